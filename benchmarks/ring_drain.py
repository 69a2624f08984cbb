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
records the drain copies itself (:class:`~iket_tui.ring.drain.LiveRing`). Each runs with the
native drain pass and with numpy alone, taking turns on the same records, and both must hand on
the same chunks byte for byte.
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
    """Best drain (of a copied ring and of a live one, each with the native pass and with numpy
    alone), decode and drain+decode rates over ``passes`` fills of a warp of ``records`` records
    in every segment of a ring for ``sms`` SMs."""
    geometry = RingGeometry(sms * WARP_SLOTS, max(records, DEFAULT_RING_CHUNKS * RECORDS_PER_CHUNK))
    rings = {
        name: RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry) for name in ("copied", "live")
    }
    copied = CopiedRing(rings["copied"])
    drains = {
        "copied": RingDrain(rings["copied"], source=copied),
        "copied_numpy": RingDrain(rings["copied"], source=copied, native=False),
        "live": RingDrain(rings["live"]),
        "live_numpy": RingDrain(rings["live"], native=False),
    }
    for drain in drains.values():
        drain.drain()  # the native pass is loaded (and built once) before the clock starts
    tables = EventTables([ModuleEvents(1, 5, ("flood",), (EventInfo(1, "tick", "mark"),))])
    scratch = np.empty(geometry.segments * records * 2, dtype=EVENT_DTYPE)
    best = dict.fromkeys((*drains, "decode", "both"), 0.0)
    clock = time.perf_counter
    events = 0
    for index in range(passes):
        for ring in rings.values():
            events = flood(ring, records_per_segment=records)
        copied.copy()
        batches = {}
        order = list(drains) if index % 2 == 0 else list(reversed(drains))  # neither always first
        for name in order:
            t0 = clock()
            batches[name] = drains[name].drain()
            t1 = clock()
            best[name] = max(best[name], events / (t1 - t0))
        for name, batch in batches.items():
            if batch.events != events or not batch.counters.balanced or batch.counters.events_lost:
                raise AssertionError(f"{name}: drained {batch.events} of {events} events: {batch.counters}")
        for kind in ("copied", "live"):
            if batches[kind].chunks.tobytes() != batches[kind + "_numpy"].chunks.tobytes():
                raise AssertionError(f"{kind}: the native pass and numpy drained different chunks")
        batch = batches["copied"]
        t1 = clock()
        decoded = decode(batch.chunks, tables, batch.layout, scratch=scratch)
        t2 = clock()
        if len(decoded) != events:
            raise AssertionError(f"decoded {len(decoded)} of {events} events")
        best["decode"] = max(best["decode"], events / (t2 - t1))
        best["both"] = max(best["both"], events / (t2 - t1 + events / best["copied"]))
    return {
        "events_per_pass": events,
        "records_per_pass": geometry.segments * records,
        "engine": drains["copied"].engine,
        "drain_events_per_s": best["copied"],
        "drain_numpy_events_per_s": best["copied_numpy"],
        "drain_live_events_per_s": best["live"],
        "drain_live_numpy_events_per_s": best["live_numpy"],
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
    numpy = f"{how}; numpy alone in the same run"
    return [
        Figure("ring drain of a GPU ring's copy, per event", 1e9 / result["drain_events_per_s"], "ns", target_ns, how),
        Figure(
            "ring drain of a GPU ring's copy with numpy alone, per event",
            1e9 / result["drain_numpy_events_per_s"],
            "ns",
            None,
            numpy,
        ),
        Figure("ring drain of a ring file, per event", 1e9 / result["drain_live_events_per_s"], "ns", None, how),
        Figure(
            "ring drain of a ring file with numpy alone, per event",
            1e9 / result["drain_live_numpy_events_per_s"],
            "ns",
            None,
            numpy,
        ),
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
    print(f"  ({result['engine']})")
    for name in ("drain", "drain_numpy", "drain_live", "drain_live_numpy", "decode", "drain_decode"):
        rate = result[name + "_events_per_s"]
        print(f"  {name.replace('_', ' '):17} {rate / 1e6:8.1f} M events/s, {1e9 / rate:5.2f} ns an event")
    met = result["drain_events_per_s"] >= TARGET_EVENTS_PER_S
    print(f"drain target {TARGET_EVENTS_PER_S / 1e6:.0f} M events/s: {'met' if met else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
