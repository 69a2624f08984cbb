"""How fast one core drains and decodes the kernel event ring.

A ring the size a 132-SM GPU gets (one segment per warp slot) is filled with full chunks by the
CPU producer, as warps of a busy kernel would fill it; then :class:`RingDrain` copies them out
(tags checked before and after, stamps checked, counters kept) and :func:`decode` turns them
into events. Rates are in events per second, best of several passes (the machine is shared):

    python -m benchmarks.ring_drain [--sms 132] [--chunks 8] [--passes 8]
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np

from benchmarks.results import Figure
from iket_tui.ring.buffer import RingView
from iket_tui.ring.cpu_producer import flood
from iket_tui.ring.decode import EventTables, decode
from iket_tui.ring.drain import RingDrain
from iket_tui.ring.events import EventInfo, ModuleEvents
from iket_tui.ring.layout import EVENT_DTYPE, RingGeometry

TARGET_EVENTS_PER_S = 200e6


def measure(sms: int = 132, chunks: int = 8, passes: int = 8) -> dict[str, Any]:
    """Best drain, decode and drain+decode rates over ``passes`` fills of ``chunks`` full
    chunks in every segment of a ring for ``sms`` SMs."""
    geometry = RingGeometry.for_sms(sms, max(4, chunks))
    ring = RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry)
    drain = RingDrain(ring)
    tables = EventTables([ModuleEvents(1, 5, ("flood",), (EventInfo(1, "tick", "mark"),))])
    scratch = np.empty(geometry.segments * chunks * ring.layout.body_words, dtype=EVENT_DTYPE)
    best_drain = best_decode = best_both = 0.0
    clock = time.perf_counter
    events = 0
    for _ in range(passes):
        events = flood(ring, chunks_per_segment=chunks)
        t0 = clock()
        batch = drain.drain()
        t1 = clock()
        decoded = decode(batch.chunks, tables, ring.layout, scratch=scratch)
        t2 = clock()
        if len(decoded) != events or not batch.counters.balanced or batch.counters.events_lost:
            raise AssertionError(f"drained {len(decoded)} of {events} events: {batch.counters}")
        best_drain = max(best_drain, events / (t1 - t0))
        best_decode = max(best_decode, events / (t2 - t1))
        best_both = max(best_both, events / (t2 - t0))
    return {
        "events_per_pass": events,
        "chunks_per_pass": geometry.segments * chunks,
        "drain_events_per_s": best_drain,
        "decode_events_per_s": best_decode,
        "drain_decode_events_per_s": best_both,
    }


def run() -> list[Figure]:
    """The figures for ``python -m benchmarks.run``: nanoseconds per event, target 5 ns (200 M/s)."""
    result = measure()
    target_ns = 1e9 / TARGET_EVENTS_PER_S
    how = f"{result['events_per_pass']} events in {result['chunks_per_pass']} chunks, best of 8"
    return [
        Figure("ring drain, per event", 1e9 / result["drain_events_per_s"], "ns", target_ns, how),
        Figure("ring drain + decode, per event", 1e9 / result["drain_decode_events_per_s"], "ns", None, how),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ring_drain", description=__doc__.splitlines()[0])
    parser.add_argument("--sms", type=int, default=132)
    parser.add_argument("--chunks", type=int, default=8, help="full chunks per segment per pass")
    parser.add_argument("--passes", type=int, default=8)
    args = parser.parse_args(argv)
    result = measure(args.sms, args.chunks, args.passes)
    print(f"{result['events_per_pass']} events ({result['chunks_per_pass']} chunks) per pass, best of {args.passes}:")
    for name in ("drain", "decode", "drain_decode"):
        print(f"  {name.replace('_', ' + '):15} {result[name + '_events_per_s'] / 1e6:8.1f} M events/s")
    met = result["drain_events_per_s"] >= TARGET_EVENTS_PER_S
    print(f"drain target {TARGET_EVENTS_PER_S / 1e6:.0f} M events/s: {'met' if met else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
