"""How fast one core drains and decodes the kernel event ring.

A ring the size a 132-SM GPU gets (one segment per warp slot, 512 records each) is filled by
the CPU producer, a warp of ``--records`` records in every segment, as warps of a busy kernel
would fill it; then :class:`RingDrain` reads them (stamps checked before and after the copy,
warps identified, counters kept, events packed into drained chunks) and :func:`decode` turns
them into events. Rates are in events per second, best of several passes (the machine is
shared):

    python -m benchmarks.ring_drain [--sms 132] [--records 512] [--passes 8]
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np

from benchmarks.results import Figure
from iket_tui.agent.kernel_options import DEFAULT_RING_CHUNKS
from iket_tui.ring.buffer import RingView
from iket_tui.ring.cpu_producer import flood
from iket_tui.ring.decode import EventTables, decode
from iket_tui.ring.drain import RingDrain
from iket_tui.ring.events import EventInfo, ModuleEvents
from iket_tui.ring.layout import EVENT_DTYPE, RECORDS_PER_CHUNK, WARP_SLOTS, RingGeometry

TARGET_EVENTS_PER_S = 200e6


def measure(sms: int = 132, records: int = 512, passes: int = 8) -> dict[str, Any]:
    """Best drain, decode and drain+decode rates over ``passes`` fills of a warp of ``records``
    records in every segment of a ring for ``sms`` SMs."""
    geometry = RingGeometry(sms * WARP_SLOTS, max(records, DEFAULT_RING_CHUNKS * RECORDS_PER_CHUNK))
    ring = RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry)
    drain = RingDrain(ring)
    tables = EventTables([ModuleEvents(1, 5, ("flood",), (EventInfo(1, "tick", "mark"),))])
    scratch = np.empty(geometry.segments * records * 2, dtype=EVENT_DTYPE)
    best_drain = best_decode = best_both = 0.0
    clock = time.perf_counter
    events = 0
    for _ in range(passes):
        events = flood(ring, records_per_segment=records)
        t0 = clock()
        batch = drain.drain()
        t1 = clock()
        decoded = decode(batch.chunks, tables, batch.layout, scratch=scratch)
        t2 = clock()
        if len(decoded) != events or not batch.counters.balanced or batch.counters.events_lost:
            raise AssertionError(f"drained {len(decoded)} of {events} events: {batch.counters}")
        best_drain = max(best_drain, events / (t1 - t0))
        best_decode = max(best_decode, events / (t2 - t1))
        best_both = max(best_both, events / (t2 - t0))
    return {
        "events_per_pass": events,
        "records_per_pass": geometry.segments * records,
        "drain_events_per_s": best_drain,
        "decode_events_per_s": best_decode,
        "drain_decode_events_per_s": best_both,
    }


def run() -> list[Figure]:
    """The figures for ``python -m benchmarks.run``: nanoseconds per event, target 5 ns (200 M/s)."""
    result = measure()
    target_ns = 1e9 / TARGET_EVENTS_PER_S
    how = f"{result['events_per_pass']} events in {result['records_per_pass']} records, best of 8"
    return [
        Figure("ring drain, per event", 1e9 / result["drain_events_per_s"], "ns", target_ns, how),
        Figure("ring drain + decode, per event", 1e9 / result["drain_decode_events_per_s"], "ns", None, how),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ring_drain", description=__doc__.splitlines()[0])
    parser.add_argument("--sms", type=int, default=132)
    parser.add_argument("--records", type=int, default=512, help="records per segment per pass")
    parser.add_argument("--passes", type=int, default=8)
    args = parser.parse_args(argv)
    result = measure(args.sms, args.records, args.passes)
    print(f"{result['events_per_pass']} events ({result['records_per_pass']} records) per pass, best of {args.passes}:")
    for name in ("drain", "decode", "drain_decode"):
        print(f"  {name.replace('_', ' + '):15} {result[name + '_events_per_s'] / 1e6:8.1f} M events/s")
    met = result["drain_events_per_s"] >= TARGET_EVENTS_PER_S
    print(f"drain target {TARGET_EVENTS_PER_S / 1e6:.0f} M events/s: {'met' if met else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
