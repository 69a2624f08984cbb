"""The timeline of a 1,000,000-event recording (the replay benchmark's), ready for the bar and
the jump keys: read from the index its recorder wrote, and found by reading the whole file (the
same recording written without the index). Beside them, what writing the index costs the
recorder: writing the recording with and without it.

``python -m benchmarks.timeline_index``; a figure row each, as ``benchmarks.run`` prints them.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from benchmarks.results import Figure
from iket_tui.model import synthetic
from iket_tui.model.collector import tune_for_large_trees
from iket_tui.protocol.codec import encode_batch
from iket_tui.protocol.messages import Item, row_of
from iket_tui.sources.recorder import RecordingWriter
from iket_tui.sources.timeline import scan_timeline

PASS_EVENTS = 1_000_000
FRAME = 16  # messages per frame, as the replay benchmark writes them
READY_TARGET_S = 0.2
"""The timeline from the index: well within the 1 s a jump may take."""


def write(path: Path, *, index: bool, pass_events: int = PASS_EVENTS) -> float:
    """Write the replay benchmark's recording at ``path`` as ``record`` does, handed the
    messages as its socket decodes them (pass events as pass rows); the seconds it took."""
    t0 = time.perf_counter()
    writer = RecordingWriter(path, source="benchmark", index=index)
    writer.write(synthetic.agent_hello())
    pending: list[Item] = []
    for msg in synthetic.bulk(pass_events):
        pending.append(row_of(msg) or msg)
        if len(pending) == FRAME:
            writer.write_frames(encode_batch(pending), pending)
            pending = []
    if pending:
        writer.write_frames(encode_batch(pending), pending)
    writer.close("benchmark")
    return time.perf_counter() - t0


def _ready(path: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    timeline = scan_timeline(path)
    return time.perf_counter() - t0, len(timeline.marks)


def run() -> list[Figure]:
    tune_for_large_trees()
    with tempfile.TemporaryDirectory() as tmp:
        indexed, plain = Path(tmp) / "indexed.msgpack", Path(tmp) / "plain.msgpack"
        write_indexed_s = write(indexed, index=True)
        write_plain_s = write(plain, index=False)
        from_index_s, marks = _ready(indexed)
        scan_s, scanned = _ready(plain)
        grown = indexed.stat().st_size / plain.stat().st_size - 1
    return [
        Figure(
            "timeline of 1M pass events ready, from the recording's index",
            from_index_s,
            "s",
            READY_TARGET_S,
            f"{marks:,} marks; the same recording without its index: {scan_s:.2f} s ({scanned:,} marks)",
        ),
        Figure("timeline of 1M pass events ready, read from the whole file", scan_s, "s", None, "no index"),
        Figure(
            "writing the 1M-event recording with its index",
            write_indexed_s,
            "s",
            None,
            f"without: {write_plain_s:.2f} s; the index makes the file {grown:.1%} larger",
        ),
    ]


if __name__ == "__main__":
    for figure in run():
        print(figure.row(), flush=True)
