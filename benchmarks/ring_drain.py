"""How fast the host drains and decodes the kernel event ring.

A ring of the agent's default size (``KernelOptions()``, 128 MiB of records) is filled by the
CPU producer, one warp of ``--records`` events (default: a region's worth) in every region, as
the warps of a busy kernel would fill it; then :class:`RingDrain` reads them (descriptors checked before and
after, each record's stamp against its claim and position, counters kept, events cut into
drained chunks) and :func:`decode` turns them into events. Rates are in events per second, best
of several passes (the machine is shared):

    python -m benchmarks.ring_drain [--regions N] [--region-records N] [--records N] [--passes 8]

Two drains: of a GPU's ring, whose descriptors and records a DMA engine copies to the host (the
drain reads the copy in place and a second copy of the descriptors, as
:class:`~iket_tui.ring.device_copy.DeviceRing` hands them over: :class:`CopiedRing`, the copies
made before the clock starts, as the copy engine makes them beside the drain's cores); and of a
ring file, whose records the drain copies itself (:class:`~iket_tui.ring.drain.LiveRing`). The
copy's drain runs with the native pass on as many threads as it takes by default, on one thread,
and with numpy alone; the file's with the native pass and with numpy alone. They take turns on
the same records, and each pair must hand on the same chunks byte for byte.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np

from benchmarks.results import Figure
from iket_tui.agent.kernel_options import KernelOptions
from iket_tui.ring.buffer import RingView
from iket_tui.ring.cpu_producer import flood
from iket_tui.ring.decode import EventTables, decode
from iket_tui.ring.drain import LiveRing, RegionCopy, RingDrain
from iket_tui.ring.events import EventInfo, ModuleEvents
from iket_tui.ring.layout import EVENT_DTYPE, RingGeometry

TARGET_EVENTS_PER_S = 200e6
Array = np.ndarray[Any, Any]


class CopiedRing(LiveRing):
    """A ring as :class:`~iket_tui.ring.device_copy.DeviceRing` hands it to the drain: the
    descriptors and records copied to the host (here: the ring itself, which nothing writes
    during the pass) and read in place, and a second copy of the descriptors, made by
    :meth:`copy` as the DMA engine makes it after the records."""

    def __init__(self, ring: RingView) -> None:
        super().__init__(ring)
        self._check = np.empty_like(ring.descriptor_words)

    def copy(self) -> None:
        np.copyto(self._check, self.ring.descriptor_words)

    def read(self, claims: Array) -> RegionCopy:
        ring = self.ring
        regions = claims & (ring.geometry.regions - 1)
        if int(regions[-1]) - int(regions[0]) == len(regions) - 1:  # one span: read in place
            rows = slice(int(regions[0]), int(regions[-1]) + 1)
            return RegionCopy(ring.descriptor_words[rows], ring.record_words[rows], self._check[rows])
        return RegionCopy(ring.descriptor_words[regions], ring.record_words[regions], self._check[regions])


def default_geometry() -> RingGeometry:
    """The agent's ring (``KernelOptions()``)."""
    options = KernelOptions()
    return RingGeometry(options.regions, options.records_per_region)


def measure(
    geometry: RingGeometry | None = None, records_per_warp: int | None = None, passes: int = 8
) -> dict[str, Any]:
    """Best drain rates (of a copied ring: native on its default threads, native on one thread,
    numpy; of a ring file: native, numpy), decode and drain+decode rates over ``passes`` fills of
    a warp of ``records_per_warp`` events (default: a region's worth) in every region."""
    geometry = default_geometry() if geometry is None else geometry
    records = geometry.records_per_region if records_per_warp is None else records_per_warp
    rings = {
        name: RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry) for name in ("copied", "live")
    }
    copied = CopiedRing(rings["copied"])
    drains = {
        "copied": RingDrain(rings["copied"], source=copied),
        "copied_one_thread": RingDrain(rings["copied"], source=copied, threads=1),
        "copied_numpy": RingDrain(rings["copied"], source=copied, native=False),
        "live": RingDrain(rings["live"]),
        "live_numpy": RingDrain(rings["live"], native=False),
    }
    for drain in drains.values():
        drain.drain()  # the native pass is loaded (and built once) before the clock starts
    tables = EventTables([ModuleEvents(1, 5, ("flood",), (EventInfo(1, "tick", "mark"),))])
    kept = min(records, geometry.records_per_region) * geometry.regions
    scratch = np.empty(2 * kept, dtype=EVENT_DTYPE)
    best = dict.fromkeys((*drains, "decode", "both"), 0.0)
    threads = 1
    clock = time.perf_counter
    events = 0
    for index in range(passes):
        for ring in rings.values():
            events = flood(ring, records_per_warp=records, warps=geometry.regions)
        copied.copy()
        batches = {}
        order = list(drains) if index % 2 == 0 else list(reversed(drains))  # neither always first
        for name in order:
            t0 = clock()
            batches[name] = drains[name].drain()
            t1 = clock()
            best[name] = max(best[name], kept / (t1 - t0))
        threads = max(threads, drains["copied"].threads_used)
        for name, batch in batches.items():
            counters = batch.counters
            if batch.events != kept or not counters.balanced or counters.events_lost != (index + 1) * (events - kept):
                raise AssertionError(f"{name}: drained {batch.events} of {kept} events kept: {counters}")
        for first, second in (("copied", "copied_numpy"), ("copied", "copied_one_thread"), ("live", "live_numpy")):
            if batches[first].chunks.tobytes() != batches[second].chunks.tobytes():
                raise AssertionError(f"{first} and {second} drained different chunks")
        batch = batches["copied"]
        t1 = clock()
        decoded = decode(batch.chunks, tables, batch.layout, scratch=scratch)
        t2 = clock()
        if len(decoded) != kept:
            raise AssertionError(f"decoded {len(decoded)} of {kept} events")
        best["decode"] = max(best["decode"], kept / (t2 - t1))
        best["both"] = max(best["both"], kept / (t2 - t1 + kept / best["copied"]))
    return {
        "events_per_pass": kept,
        "regions": geometry.regions,
        "records_per_region": geometry.records_per_region,
        "bytes_per_pass": geometry.total_bytes - geometry.descriptors_offset,
        "engine": drains["copied"].engine,
        "threads": threads,
        "drain_events_per_s": best["copied"],
        "drain_one_thread_events_per_s": best["copied_one_thread"],
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
    how = (
        f"{result['events_per_pass']} events in {result['regions']} regions of {result['records_per_region']} "
        f"records, best of 8"
    )
    step = steps()
    floor = sum(step[name] for name in FLOOR_STEPS)
    parts = ", ".join(f"{name} {step[name]:.2f}" for name in FLOOR_STEPS)
    numpy = f"{how}; numpy alone in the same run"
    threads = f"{how}; up to {result['threads']} threads"
    return [
        Figure(
            "ring drain of a GPU ring's copy, per event", 1e9 / result["drain_events_per_s"], "ns", target_ns, threads
        ),
        Figure(
            "ring drain of a GPU ring's copy on one thread, per event",
            1e9 / result["drain_one_thread_events_per_s"],
            "ns",
            None,
            how,
        ),
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


def _power_of_two(text: str) -> int:
    value = int(text)
    if value < 1 or value & (value - 1):
        raise argparse.ArgumentTypeError(f"{text} is not a power of two")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ring_drain", description=__doc__.splitlines()[0])
    default = default_geometry()
    parser.add_argument("--regions", type=_power_of_two, default=default.regions)
    parser.add_argument("--region-records", type=_power_of_two, default=default.records_per_region)
    parser.add_argument("--records", type=int, help="events per warp per pass (default: a region's worth)")
    parser.add_argument("--passes", type=int, default=8)
    args = parser.parse_args(argv)
    if args.passes < 1 or (args.records is not None and args.records < 1):
        print("--passes and --records must be at least 1", file=sys.stderr)
        return 2
    try:
        geometry = RingGeometry(args.regions, args.region_records)
    except ValueError as exc:
        print(f"python -m benchmarks.ring_drain: {exc}", file=sys.stderr)
        return 2
    result = measure(geometry, args.records, args.passes)
    print(
        f"{result['events_per_pass']} events kept per pass ({result['regions']} regions of "
        f"{result['records_per_region']} records, {result['bytes_per_pass'] / 2**20:.1f} MiB), best of {args.passes}:"
    )
    print(f"  ({result['engine']}; the default drain's passes ran on up to {result['threads']} threads)")
    for name in (
        "drain",
        "drain_one_thread",
        "drain_numpy",
        "drain_live",
        "drain_live_numpy",
        "decode",
        "drain_decode",
    ):
        rate = result[name + "_events_per_s"]
        print(f"  {name.replace('_', ' '):17} {rate / 1e6:8.1f} M events/s, {1e9 / rate:5.2f} ns an event")
    met = result["drain_events_per_s"] >= TARGET_EVENTS_PER_S
    print(f"drain target {TARGET_EVENTS_PER_S / 1e6:.0f} M events/s: {'met' if met else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
