"""Jumps in a replay of a 1,000,000-event recording (the replay benchmark's), timed from the
jump asked for to the model built at the time jumped to, as the UI's replay jumps.

A paused, seekable ``RecordingSource`` is read on a thread as the app reads it; each batch is
applied to a ``Session``, built anew when a batch says the stream restarts. Jumps: to the end
from the start (forwards over the whole file), back to the middle (read again from the start),
back to 99% of the way (the longest way back), forwards by 1%, and the timeline read once as the
bar and the jump keys read it. The baseline, printed beside the jumps, is the replay benchmark's
reading of the whole file into the model, in the same run: a jump back reads the file again from
its start, so the longest jump is about that long.
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
from iket_tui.sources.replay import RecordingSource
from iket_tui.sources.timeline import scan_timeline

WAIT_S = 120.0


class _Replay:
    def __init__(self, path: Path) -> None:
        self.source = RecordingSource(path, start_paused=True, seekable=True)
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
        self.source.seek(t_ns)
        while True:
            batch = self._batches.get(timeout=WAIT_S)
            if batch.restart:
                self.session = Session()
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
        replay = _Replay(path)
        try:
            jumps = {
                "to the end": replay.jump(start + length),
                "back to 50%": replay.jump(start + length // 2),
                "forwards to 51%": replay.jump(start + length * 51 // 100),
                "back to 99%": replay.jump(start + length * 99 // 100),
                "back to 1%": replay.jump(start + length // 100),
            }
        finally:
            replay.close()
        del replay  # its model: the baseline's is built alone, as each jump's was
        gc.collect()
        whole_s, _ = _into_model(path)
    worst = max(jumps.values())
    said = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in jumps.items())
    said += f"; the replay benchmark's whole file into the model in the same run {whole_s:.2f} s"
    return [
        Figure("jump anywhere in a replay of 1M pass events, the longest", worst, "s", 1.0, said),
        Figure("read the timeline of 1M pass events (the bar, the jump keys)", scan_s, "s", None, "once, on a thread"),
    ]
