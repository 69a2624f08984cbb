"""Jumps in a replay of a 1,000,000-event recording (the replay benchmark's), timed from the
jump asked for to the model built at the time jumped to, as the UI's replay jumps.
A paused, seekable ``RecordingSource`` is read on a thread as the app reads it; each batch is
applied to a ``Session``, built anew when a batch says the stream restarts, or loaded from the
checkpoint it reads on from. Jumps: to the end from the start (forwards over the whole file),
back to the middle, forwards by 1%, back to 99% of the way, back to 1%, forwards to 97%; first
without checkpoints (each jump back reads the file again from its start), then with the
checkpoints the app makes on a thread as a replay opens (their making timed too). The baseline,
printed beside them, is the replay benchmark's reading of the whole file into the model, in the
same run. The timeline is read once as the bar and the jump keys read it.
"""

from __future__ import annotations

import gc
import queue
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.replay import _into_model, write_recording
from benchmarks.results import Figure
from iket_tui.model.collector import tune_for_large_trees
from iket_tui.model.session import Session
from iket_tui.sources.base import SourceBatch
from iket_tui.sources.checkpoints import ReplayCheckpoints
from iket_tui.sources.replay import RecordingSource
from iket_tui.sources.timeline import scan_timeline

WAIT_S = 120.0


class _Replay:
    def __init__(self, path: Path, checkpoints: ReplayCheckpoints | None = None) -> None:
        self.source = RecordingSource(path, start_paused=True, seekable=True)
        self.checkpoints = checkpoints
        self.session = Session()
        self._batches: queue.Queue[SourceBatch] = queue.Queue(maxsize=16)  # the app's batches in flight
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for batch in self.source.batches():
            self._batches.put(batch)

    def jump(self, t_ns: int) -> float:
        """Seconds from the jump asked for to its last batch applied."""
        t0 = time.perf_counter()
        here = self.source.position_t_ns
        self.source.seek(t_ns, None if self.checkpoints is None else self.checkpoints.start_for(t_ns, here))
        while True:
            batch = self._batches.get(timeout=WAIT_S)
            if batch.restart:
                self.session = Session() if batch.resumed_from is None else batch.resumed_from.session()
            self.session.apply(batch.messages)
            if batch.jumped_to == t_ns:
                return time.perf_counter() - t0

    def close(self) -> None:
        self.source.close()


def run() -> list[Figure]:
    tune_for_large_trees()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.msgpack"
        write_recording(path)
        t0 = time.perf_counter()
        timeline = scan_timeline(path)
        scan_s = time.perf_counter() - t0
        start, length = timeline.start_ns, timeline.length_ns
        plain = _jumps(path, None, start, length)
        gc.collect()
        t0 = time.perf_counter()
        checkpoints = ReplayCheckpoints(path, Session)
        checkpoints.build()
        build_s = time.perf_counter() - t0
        kept_mb = checkpoints.kept_bytes / 1e6
        jumps = _jumps(path, checkpoints, start, length)
        del checkpoints
        gc.collect()
        whole_s, _ = _into_model(path)
    worst = max(jumps.values())
    said = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in jumps.items())
    said += f"; its checkpoints made in {build_s:.2f} s on a thread as the replay opens, {kept_mb:.0f} MB kept"
    said += f"; the replay benchmark's whole file into the model in the same run {whole_s:.2f} s"
    plain_said = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in plain.items())
    return [
        Figure("jump anywhere in a replay of 1M pass events, the longest", worst, "s", 1.0, said),
        Figure(
            "the same jumps without checkpoints (reading from the start), the longest",
            max(plain.values()),
            "s",
            None,
            plain_said,
        ),
        Figure("read the timeline of 1M pass events (the bar, the jump keys)", scan_s, "s", None, "once, on a thread"),
    ]


def _jumps(path: Path, checkpoints: ReplayCheckpoints | None, start: int, length: int) -> dict[str, float]:
    replay = _Replay(path, checkpoints)
    try:
        return {
            "to the end": replay.jump(start + length),
            "back to 50%": replay.jump(start + length // 2),
            "forwards to 51%": replay.jump(start + length * 51 // 100),
            "back to 99%": replay.jump(start + length * 99 // 100),
            "back to 1%": replay.jump(start + length // 100),
            "forwards to 97%": replay.jump(start + length * 97 // 100),
        }
    finally:
        replay.close()
