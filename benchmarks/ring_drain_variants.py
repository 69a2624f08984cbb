"""What one core can do with numpy over a drained ring, step by step: the floor under the drain.

The ring of ``benchmarks/ring_drain.py`` (132 SMs x 64 warp slots x 512 records, 69 MB, filled
by the CPU producer: a warp of 512 records in every segment) is read once by the drain as it
ships, then each step the drain must make over every record is timed alone, in the ways tried:

- **copy**: ``np.copyto`` of every record (what a ``memcpy`` does; a ring file's drain copies
  it, a GPU ring's is copied by the DMA engine);
- **stamps, one pass**: ``np.equal`` of every stamp (a 4-byte word every 16 bytes) against the
  expected stamps, into a kept buffer; the drain makes two (the stamps of the copy and those
  read after it);
- **expected stamps**: built per pass from each segment's read position: broadcast from the
  read positions into a kept buffer, three operations (shipped); by a gather from a table of
  every slot's position relative to every read position (faster, but the table is
  ``records_per_segment ** 2`` words, 1 GB for a ring of 16,384 records per segment); or as the
  pass before did, full-size arrays of relative positions and their sum;
- **newest stamp per segment**: ``max`` over every row (the pass before did it every pass; the
  drain now looks at each segment's read position and does it only after a lap);
- **stop per segment**: one ``argmin`` over the check's rows rolled to the read position;
- **own records**: the words' low bytes against 0 (a warp's begin, launch, block and end
  records); also with the stamp check, both over the whole ring one after the other (shipped),
  or 64 segments at a time, so that the second reads what the first brought into the cache;
- **events into chunks**: every run's words and payloads into 256-byte chunks of 26 events:
  windows of 26 records gathered per chunk, both 32-bit columns (word and payload) in one
  gather (shipped), one column at a time, as pairs of 64-bit words, or as whole 416-byte items,
  each then split (the gather alone of these two is timed too);
- **drain as shipped**: :class:`RingDrain` over the same ring refilled before each pass (the
  ``drain`` figure of ``benchmarks/ring_drain.py``);
- **fresh chunks**: allocating the chunks a pass hands on and touching every page (a pass's
  output is new memory: its consumers keep it).

Rates are nanoseconds per record (a record is an event but for 4 of each segment's 512), the
best of ``--passes`` runs; the machine is shared, so the best is the figure::

    python -m benchmarks.ring_drain_variants [--sms 132] [--passes 7]

The sum of the steps every pass needs (two stamp passes, the own records, the events into
chunks with their split, the fresh chunks) is the floor of a numpy drain here.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.ring_drain import TARGET_EVENTS_PER_S, CopiedRing
from iket_tui.ring.buffer import RingView
from iket_tui.ring.cpu_producer import flood
from iket_tui.ring.drain import RingDrain
from iket_tui.ring.layout import DEFAULT_LAYOUT, DRAINED_EVENTS_PER_CHUNK, HEADER_WORDS, WARP_SLOTS, RingGeometry

Array = np.ndarray[Any, Any]
PER = DRAINED_EVENTS_PER_CHUNK


def _best_ns(step: Callable[[], object], passes: int, records: int, setup: Callable[[], object] | None = None) -> float:
    best = float("inf")
    for _ in range(passes):
        if setup is not None:
            setup()
        t0 = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - t0)
    return best * 1e9 / records


def measure(sms: int = 132, passes: int = 7) -> dict[str, float]:
    """Nanoseconds per record of the drain and of each step, best of ``passes``."""
    cap = 512
    geometry = RingGeometry(sms * WARP_SLOTS, cap)
    ring = RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry)
    flood(ring, records_per_segment=cap)
    source = CopiedRing(ring)
    source.copy()
    segments, n = geometry.segments, geometry.capacity_records
    words = ring.records.view("<u4").reshape(segments, cap, 4)
    stamps, after = words[..., 3], source.stamps_after(np.arange(segments))
    flat = words.reshape(-1, 4)
    rng = np.random.default_rng(1)
    read_from = rng.integers(0, 1 << 20, segments)  # read positions as a running ring has them
    off = read_from & (cap - 1)
    slots = np.arange(cap, dtype=np.int64)
    relative = ((slots[None, :] - slots[:, None]) & (cap - 1)).astype(np.uint32)
    expected = np.empty((segments, cap), dtype=np.uint32)
    ok = np.empty((segments, cap), dtype=bool)
    doubled = np.empty((segments, 2 * cap), dtype=bool)
    copy = np.empty_like(flat)
    # The chunks of one pass: a warp's events after its 3 begin records in every segment.
    starts = np.arange(3, cap - 1, PER)
    start = (np.arange(segments)[:, None] * cap + starts[None, :]).ravel()
    chunks = len(start)

    drainer = RingDrain(ring, source=source)

    def refill() -> None:  # the next lap of every segment, copied as the DMA engine copies it
        flood(ring, records_per_segment=cap)
        source.copy()

    def drain() -> None:
        drainer.drain()

    def expected_table() -> None:
        np.take(relative, off, axis=0, out=expected, mode="clip")
        np.add(expected, (read_from + 1).astype(np.uint32)[:, None], out=expected)

    def expected_broadcast() -> None:
        np.subtract(slots.astype(np.uint32)[None, :], off.astype(np.uint32)[:, None], out=expected)
        np.bitwise_and(expected, np.uint32(cap - 1), out=expected)
        np.add(expected, (read_from + 1).astype(np.uint32)[:, None], out=expected)

    def expected_arrays() -> None:
        rel = (slots.astype(np.uint32)[None, :] - off.astype(np.uint32)[:, None]) & np.uint32(cap - 1)
        np.add(rel, (read_from + 1).astype(np.uint32)[:, None])

    own = np.empty((segments, cap), dtype=bool)
    low = ring.records.view(np.uint8).reshape(segments, cap, 16)[..., 0]

    def mirror_apart() -> None:
        np.equal(stamps, expected, out=ok)
        np.equal(low, 0, out=own)

    def mirror_blocked(rows: int = 64) -> None:
        for first in range(0, segments, rows):
            block = slice(first, first + rows)
            np.equal(stamps[block], expected[block], out=ok[block])
            np.equal(low[block], 0, out=own[block])

    def stop() -> None:
        doubled[:, :cap] = ok
        doubled[:, cap:] = ok
        rolled = np.lib.stride_tricks.sliding_window_view(doubled, cap, axis=1)[np.arange(segments), off]
        rolled.argmin(axis=1)

    def chunks_out() -> Array:
        out = np.zeros(chunks, dtype=DEFAULT_LAYOUT.drained_dtype)
        return out.view("<u4").reshape(chunks, -1)

    body = chunks_out()

    def per_column() -> None:
        for column, at in ((0, HEADER_WORDS), (2, HEADER_WORDS + PER)):
            windows = np.lib.stride_tricks.sliding_window_view(flat[:, column], PER)
            body[:, at : at + PER] = windows[np.minimum(start, len(windows) - 1)]

    def both_columns() -> None:
        windows = np.lib.stride_tricks.sliding_window_view(flat[:, ::2], PER, axis=0)  # (records, 2, PER)
        picked = windows[np.minimum(start, len(windows) - 1)]
        body[:, HEADER_WORDS : HEADER_WORDS + 2 * PER].reshape(chunks, 2, PER)[...] = picked

    pairs = flat.view("<u8")

    def as_pairs(split: bool = True) -> None:
        windows = np.lib.stride_tricks.sliding_window_view(pairs, PER, axis=0)
        picked = windows[np.minimum(start, len(windows) - 1)]
        if split:
            np.copyto(body[:, HEADER_WORDS : HEADER_WORDS + PER], picked[:, 0], casting="unsafe")
            np.copyto(body[:, HEADER_WORDS + PER : HEADER_WORDS + 2 * PER], picked[:, 1], casting="unsafe")

    whole = np.ndarray((n - PER + 1,), dtype=np.dtype((np.void, 16 * PER)), buffer=flat, strides=(16,))

    def as_items(split: bool = True) -> None:
        picked = whole[np.minimum(start, len(whole) - 1)].view("<u4").reshape(chunks, PER, 4)
        if split:
            body[:, HEADER_WORDS : HEADER_WORDS + PER] = picked[..., 0]
            body[:, HEADER_WORDS + PER : HEADER_WORDS + 2 * PER] = picked[..., 2]

    def fresh() -> None:
        out = np.empty(chunks * DEFAULT_LAYOUT.chunk_words, dtype=np.uint32)
        out[:: 4096 // 4] = 0

    steps: dict[str, Callable[[], object]] = {
        "drain as shipped": drain,
        "copy (memcpy)": lambda: np.copyto(copy, flat),
        "stamps, one pass (np.equal, out=)": lambda: np.equal(stamps, expected, out=ok),
        "stamps after, one pass": lambda: np.equal(after, expected, out=ok),
        "expected stamps, broadcast (shipped)": expected_broadcast,
        "expected stamps, from a table": expected_table,
        "expected stamps, full arrays (before)": expected_arrays,
        "newest stamp per segment (max)": lambda: stamps.max(axis=1),
        "stop per segment (rolled argmin)": stop,
        "own records (low byte == 0)": lambda: np.equal(ring.records.view(np.uint8).reshape(-1, 16)[:, 0], 0),
        "stamps and own records, one after the other (shipped)": mirror_apart,
        "stamps and own records, 64 segments at a time": mirror_blocked,
        "events into chunks, both columns at once (shipped)": both_columns,
        "events into chunks, per column": per_column,
        "events into chunks, 64-bit pairs": as_pairs,
        "  its gather alone": lambda: as_pairs(split=False),
        "events into chunks, 416-byte items": as_items,
        "  its gather alone ": lambda: as_items(split=False),
        "fresh chunks, every page touched": fresh,
    }
    expected_table()
    np.equal(stamps, expected, out=ok)
    return {name: _best_ns(step, passes, n, refill if step is drain else None) for name, step in steps.items()}


FLOOR_STEPS = (
    "stamps, one pass (np.equal, out=)",
    "stamps after, one pass",
    "own records (low byte == 0)",
    "events into chunks, both columns at once (shipped)",
    "fresh chunks, every page touched",
)
"""The steps every numpy pass over a busy ring makes, whatever else it does."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.ring_drain_variants", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--sms", type=int, default=132)
    parser.add_argument("--passes", type=int, default=7)
    args = parser.parse_args(argv)
    if args.sms < 1 or args.passes < 1:
        print("--sms and --passes must be at least 1", file=sys.stderr)
        return 2
    result = measure(args.sms, args.passes)
    for name, ns in result.items():
        print(f"  {name:45} {ns:6.2f} ns/record")
    floor = sum(result[name] for name in FLOOR_STEPS)
    target = 1e9 / TARGET_EVENTS_PER_S
    print(f"  {'floor: the steps every pass makes, summed':45} {floor:6.2f} ns/record (target {target:g} ns)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
