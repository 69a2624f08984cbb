"""Reading a damaged recording against reading it intact.

A 20 MB recording is the H200 demo's stream (``examples/h200-demo.msgpack``) over and over,
written by the recorder, each copy holding one 1 MB ``kernel_records`` frame. It is read as
``iket-tui dump`` reads it (every message a map), intact and then damaged:

- one flipped bit inside the 1 MB ``kernel_records`` frame nearest the middle: that frame is
  skipped, every other one read;
- 1 MB of random bytes over the middle of the file: the frames under them are skipped.

Each figure is the damaged read's time over the intact read's, best of three each, in the same run.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.results import Figure
from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import encode_message
from iket_tui.protocol.frames import HEADER_SIZE
from iket_tui.sources.reading import RecordingInfo, RecordingReader, read_recording
from iket_tui.sources.recorder import RecordingWriter

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "h200-demo.msgpack"
SIZE = 20_000_000
ROUNDS = 3


def write_recording(path: Path, size: int = SIZE) -> bytes:
    """Write the benchmark recording; returns the frame of its ``kernel_records``."""
    messages, _ = read_recording(EXAMPLE)
    stream = [msg for msg in messages if msg["type"] not in (m.RECORDING, m.CHECKPOINT, m.END)]
    writer = RecordingWriter(path, source="benchmark")
    while path.stat().st_size < size:
        for msg in stream:
            writer.write(msg)
        writer.flush()
    writer.close("benchmark")
    return encode_message(next(msg for msg in stream if msg["type"] == m.KERNEL_RECORDS))


def _read(path: Path) -> tuple[float, RecordingInfo]:
    best = float("inf")
    reader = RecordingReader(path)
    for _ in range(ROUNDS):
        reader = RecordingReader(path)
        t0 = time.perf_counter()
        for _chunk in reader.chunks():
            pass
        best = min(best, time.perf_counter() - t0)
    return best, reader.info


def _damaged(path: Path, data: bytes, damage: Callable[[bytearray], None]) -> Path:
    out = path.with_name(f"damaged-{path.name}")
    damaged = bytearray(data)
    damage(damaged)
    out.write_bytes(damaged)
    return out


def run() -> list[Figure]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.msgpack"
        frame = write_recording(path)
        data = path.read_bytes()
        intact_s, intact = _read(path)

        def flip(buf: bytearray) -> None:
            at = data.find(frame, len(data) // 2)
            buf[at + HEADER_SIZE + len(frame) // 2] ^= 0x10

        def overwrite(buf: bytearray) -> None:
            middle = len(buf) // 2
            buf[middle : middle + (1 << 20)] = random.Random(16).randbytes(1 << 20)

        figures = []
        for name, damage in (("one flipped bit in a 1 MB frame", flip), ("1 MB of random bytes", overwrite)):
            seconds, info = _read(_damaged(path, data, damage))
            detail = (
                f"{len(data) / 1e6:.0f} MB read in {seconds:.2f} s against {intact_s:.2f} s intact; "
                f"{info.skipped_bytes:,} bytes skipped, {intact.messages - info.messages} of {intact.messages:,} "
                "messages lost"
            )
            figures.append(Figure(f"damaged recording: {name}", seconds / intact_s, "x", 2.0, detail))
    return figures
