"""How fast one core drains and decodes the kernel event ring.

A ring the size a 132-SM GPU gets (one segment per warp slot, 512 records each) is filled by
the CPU producer, a warp of ``--records`` records in every segment, as warps of a busy kernel
would fill it; then :class:`RingDrain` reads them (stamps checked before and after the copy,
warps identified, counters kept, events cut into drained chunks) and :func:`decode` turns them
into events. Rates are in events per second, best of several passes (the machine is shared):

    python -m benchmarks.ring_drain [--sms 132] [--records 512] [--passes 8]

Two drains: of a GPU's ring, whose records a DMA engine copies to the host (the drain reads the
copy in place and the stamps of a second copy: :class:`CopiedRing`, the copies made before the
clock starts, as the copy engine makes them beside the drain's core); and of a ring file, whose
records the drain copies itself (:class:`~iket_tui.ring.drain.LiveRing`).
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
from iket_tui.ring.drain import LiveRing, RingDrain, record_words
from iket_tui.ring.events import EventInfo, ModuleEvents
from iket_tui.ring.layout import EVENT_DTYPE, RECORDS_PER_CHUNK, WARP_SLOTS, RingGeometry

TARGET_EVENTS_PER_S = 200e6


class CopiedRing(LiveRing):
    """A ring as the agent's :class:`~iket_tui.ring.device_copy.DeviceRing` hands it to the drain:
    the records copied to the host (here: the ring itself, which nothing writes during the pass),
    and a second copy for the stamps checked after, made by :meth:`copy` as the DMA makes it."""

    def __init__(self, ring: RingView) -> None:
        super().__init__(ring)
        self._check = np.empty_like(ring.records)

    def copy(self) -> None:
        np.copyto(self._check, self.ring.records)

    def stamps(self) -> np.ndarray[Any, Any]:
        stamps: np.ndarray[Any, Any] = self.ring.records["stamp"]
        return stamps

    def rows(self, segments: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        return record_words(self.ring.records, segments, copy=False)

    def stamps_after(self, segments: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        stamps: np.ndarray[Any, Any] = self._check["stamp"]
        return stamps if len(segments) == len(stamps) else stamps[segments]


def measure(sms: int = 132, records: int = 512, passes: int = 8) -> dict[str, Any]:
    """Best drain (of a copied ring and of a live one), decode and drain+decode rates over
    ``passes`` fills of a warp of ``records`` records in every segment of a ring for ``sms`` SMs."""
    geometry = RingGeometry(sms * WARP_SLOTS, max(records, DEFAULT_RING_CHUNKS * RECORDS_PER_CHUNK))
    rings = {
        name: RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry) for name in ("copied", "live")
    }
    copied = CopiedRing(rings["copied"])
    drains = {"copied": RingDrain(rings["copied"], source=copied), "live": RingDrain(rings["live"])}
    tables = EventTables([ModuleEvents(1, 5, ("flood",), (EventInfo(1, "tick", "mark"),))])
    scratch = np.empty(geometry.segments * records * 2, dtype=EVENT_DTYPE)
    best = {"copied": 0.0, "live": 0.0, "decode": 0.0, "both": 0.0}
    clock = time.perf_counter
    events = 0
    for _ in range(passes):
        for ring in rings.values():
            events = flood(ring, records_per_segment=records)
        copied.copy()
        for name, drain in drains.items():
            t0 = clock()
            batch = drain.drain()
            t1 = clock()
            best[name] = max(best[name], events / (t1 - t0))
        decoded = decode(batch.chunks, tables, batch.layout, scratch=scratch)
        t2 = clock()
        if len(decoded) != events or not batch.counters.balanced or batch.counters.events_lost:
            raise AssertionError(f"drained {len(decoded)} of {events} events: {batch.counters}")
        best["decode"] = max(best["decode"], events / (t2 - t1))
        best["both"] = max(best["both"], events / (t2 - t1 + events / best["copied"]))
    return {
        "events_per_pass": events,
        "records_per_pass": geometry.segments * records,
        "drain_events_per_s": best["copied"],
        "drain_live_events_per_s": best["live"],
        "decode_events_per_s": best["decode"],
        "drain_decode_events_per_s": best["both"],
    }


def run() -> list[Figure]:
    """The figures for ``python -m benchmarks.run``: nanoseconds per event, target 5 ns (200 M/s),
    and the floor under them (:mod:`benchmarks.ring_drain_variants`)."""
    from benchmarks.ring_drain_variants import FLOOR_STEPS
    from benchmarks.ring_drain_variants import measure as steps

    result = measure()
    target_ns = 1e9 / TARGET_EVENTS_PER_S
    how = f"{result['events_per_pass']} events in {result['records_per_pass']} records, best of 8"
    step = steps()
    floor = sum(step[name] for name in FLOOR_STEPS)
    parts = ", ".join(f"{name} {step[name]:.2f}" for name in FLOOR_STEPS)
    return [
        Figure("ring drain of a GPU ring's copy, per event", 1e9 / result["drain_events_per_s"], "ns", target_ns, how),
        Figure("ring drain of a ring file, per event", 1e9 / result["drain_live_events_per_s"], "ns", None, how),
        Figure("ring drain + decode, per event", 1e9 / result["drain_decode_events_per_s"], "ns", None, how),
        Figure("ring drain floor with numpy: the passes every drain makes, per record", floor, "ns", None, parts),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ring_drain", description=__doc__.splitlines()[0])
    parser.add_argument("--sms", type=int, default=132)
    parser.add_argument("--records", type=int, default=512, help="records per segment per pass")
    parser.add_argument("--passes", type=int, default=8)
    args = parser.parse_args(argv)
    result = measure(args.sms, args.records, args.passes)
    print(f"{result['events_per_pass']} events ({result['records_per_pass']} records) per pass, best of {args.passes}:")
    for name in ("drain", "drain_live", "decode", "drain_decode"):
        print(f"  {name.replace('_', ' '):15} {result[name + '_events_per_s'] / 1e6:8.1f} M events/s")
    met = result["drain_events_per_s"] >= TARGET_EVENTS_PER_S
    print(f"drain target {TARGET_EVENTS_PER_S / 1e6:.0f} M events/s: {'met' if met else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
