"""What one core can do with numpy over a drained ring, step by step: the floor under the drain.

The ring of ``benchmarks/ring_drain.py`` (the agent's default, 128 MiB of records, filled by the
CPU producer: a warp of a region's worth of events in every region) is read once by the drain as
it ships, then each step the drain must make over every record is timed alone:

- **copy**: ``np.copyto`` of every record (what a ``memcpy`` does; a ring file's drain copies
  it, a GPU ring's is copied by the DMA engine);
- **stamps, one pass**: ``np.equal`` of every stamp (a 4-byte word every 16 bytes) against the
  expected stamps, into a kept buffer (a ring file's drain makes two: the stamps before and
  after its copy; a GPU ring's copy is checked by its descriptors read again after it);
- **expected stamps**: each region's stamps from its claim's stamp base and read position,
  broadcast into a kept buffer;
- **newest stamp per region**: ``max`` over every row;
- **stop per region**: one ``argmin`` over the check's rows rolled to the read position;
- **events into chunks**: every run's words and payloads into 256-byte chunks of 26 events,
  windows of 26 records gathered per chunk, both 32-bit columns (word and payload) in one go;
- **drain as shipped**: :class:`RingDrain` over the same ring refilled before each pass (the
  ``drain numpy`` figure of ``benchmarks/ring_drain.py``);
- **fresh chunks**: allocating the chunks a pass hands on and touching every page (a pass's
  output is new memory: its consumers keep it).

Rates are nanoseconds per record (every record is an event), the best of ``--passes`` runs; the
machine is shared, so the best is the figure::

    python -m benchmarks.ring_drain_variants [--passes 7]

The sum of the steps every pass needs (a stamp pass, the events into chunks, the fresh chunks)
is the floor of a numpy drain here.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.ring_drain import TARGET_EVENTS_PER_S, CopiedRing, default_geometry
from iket_tui.ring.buffer import RingView
from iket_tui.ring.cpu_producer import flood
from iket_tui.ring.drain import RingDrain
from iket_tui.ring.layout import DEFAULT_LAYOUT, DRAINED_EVENTS_PER_CHUNK, HEADER_WORDS

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


def measure(passes: int = 7) -> dict[str, float]:
    """Nanoseconds per record of the numpy drain and of each step, best of ``passes``."""
    geometry = default_geometry()
    regions, cap = geometry.regions, geometry.records_per_region
    ring = RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry)
    flood(ring, records_per_warp=cap)
    source = CopiedRing(ring)
    source.copy()
    n = geometry.capacity_records
    words = ring.record_words
    stamps = words[..., 3]
    flat = words.reshape(-1, 4)
    rng = np.random.default_rng(1)
    read_from = rng.integers(0, cap, regions)  # read positions as a running ring has them
    base = rng.integers(0, 1 << 32, regions).astype(np.uint32)  # each claim's stamp base
    off = read_from & (cap - 1)
    slots = np.arange(cap, dtype=np.uint32)
    expected = np.empty((regions, cap), dtype=np.uint32)
    ok = np.empty((regions, cap), dtype=bool)
    doubled = np.empty((regions, 2 * cap), dtype=bool)
    copy = np.empty_like(flat)
    # The chunks of one pass: every region's records, 26 at a time.
    starts = np.arange(0, cap, PER)
    start = (np.arange(regions)[:, None] * cap + starts[None, :]).ravel()
    chunks = len(start)

    drainer = RingDrain(ring, source=source, native=False)

    def refill() -> None:  # the next lap of every region, copied as the DMA engine copies it
        flood(ring, records_per_warp=cap)
        source.copy()

    def drain() -> None:
        drainer.drain()

    def expected_broadcast() -> None:
        np.subtract(slots[None, :], off.astype(np.uint32)[:, None], out=expected)
        np.bitwise_and(expected, np.uint32(cap - 1), out=expected)
        np.add(expected, (base + read_from.astype(np.uint32))[:, None], out=expected)

    def stop() -> None:
        doubled[:, :cap] = ok
        doubled[:, cap:] = ok
        rolled = np.lib.stride_tricks.sliding_window_view(doubled, cap, axis=1)[np.arange(regions), off]
        rolled.argmin(axis=1)

    body = np.zeros(chunks, dtype=DEFAULT_LAYOUT.drained_dtype).view("<u4").reshape(chunks, -1)

    def both_columns() -> None:
        windows = np.lib.stride_tricks.sliding_window_view(flat[:, ::2], PER, axis=0)  # (records, 2, PER)
        picked = windows[np.minimum(start, len(windows) - 1)]
        body[:, HEADER_WORDS : HEADER_WORDS + 2 * PER].reshape(chunks, 2, PER)[...] = picked

    def fresh() -> None:
        out = np.empty(chunks * DEFAULT_LAYOUT.chunk_words, dtype=np.uint32)
        out[:: 4096 // 4] = 0

    steps: dict[str, Callable[[], object]] = {
        "drain as shipped (numpy)": drain,
        "copy (memcpy)": lambda: np.copyto(copy, flat),
        "stamps, one pass (np.equal, out=)": lambda: np.equal(stamps, expected, out=ok),
        "expected stamps, broadcast": expected_broadcast,
        "newest stamp per region (max)": lambda: stamps.max(axis=1),
        "stop per region (rolled argmin)": stop,
        "events into chunks, both columns at once": both_columns,
        "fresh chunks, every page touched": fresh,
    }
    expected_broadcast()
    np.equal(stamps, expected, out=ok)
    return {name: _best_ns(step, passes, n, refill if step is drain else None) for name, step in steps.items()}


FLOOR_STEPS = (
    "stamps, one pass (np.equal, out=)",
    "events into chunks, both columns at once",
    "fresh chunks, every page touched",
)
"""The steps every numpy pass over a busy ring makes, whatever else it does."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.ring_drain_variants", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--passes", type=int, default=7)
    args = parser.parse_args(argv)
    if args.passes < 1:
        print("--passes must be at least 1", file=sys.stderr)
        return 2
    result = measure(args.passes)
    for name, ns in result.items():
        print(f"  {name:45} {ns:6.2f} ns/record")
    floor = sum(result[name] for name in FLOOR_STEPS)
    target = 1e9 / TARGET_EVENTS_PER_S
    print(f"  {'floor: the steps every pass makes, summed':45} {floor:6.2f} ns/record (target {target:g} ns)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
