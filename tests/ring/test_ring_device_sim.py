"""The CUDA runtime's own logic, run on the host, read back by the real drain and decoder: every
record a warp stores, its claim, descriptor and end, a warp that stops mid-way, a warp that laps
its own region, claims that go round the ring."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import ring_warp_sim as sim

from iket_tui.ring.buffer import MappedRing
from iket_tui.ring.counters import LOSS_OVERWRITTEN
from iket_tui.ring.cpu_producer import payload_bits, synthetic_warps
from iket_tui.ring.decode import EventTables
from iket_tui.ring.device import RingTarget
from iket_tui.ring.drain import RingDrain
from iket_tui.ring.events import EventInfo, ModuleEvents
from iket_tui.ring.layout import (
    EVENT_WARP_BEGIN,
    EVENT_WARP_END,
    EVENT_WARP_ROW,
    KIND_END,
    KIND_MARK,
    KIND_MASK,
    WARP_SLOTS,
    RingGeometry,
)

pytestmark = [
    pytest.mark.skipif(sim.compiler() is None, reason="needs a C++ compiler"),
    pytest.mark.usefixtures("drain_engine"),
]

ADDRESS = 0x3F0000000000
TABLE = ModuleEvents(
    7,
    5,
    ("sim",),
    (
        EventInfo(1, "tick", "mark"),
        EventInfo(2, "work", "range"),
        EventInfo(3, "row", "mark", "int32"),
        EventInfo(4, "mask", "mark", "uint32"),
        EventInfo(5, "scale", "mark", "float32"),
    ),
)


def _ring(tmp_path: Path, geometry: RingGeometry, id_bits: int = 5) -> tuple[MappedRing, Path]:
    ring = MappedRing.create(tmp_path / "ring", geometry)
    target = RingTarget(ADDRESS, geometry, ring.view.ring_id)
    return ring, sim.build(tmp_path, target, module=TABLE.module, id_bits=id_bits)


def _warps(count: int, events: int) -> list[sim.SimWarp]:
    warps = []
    for index, stream in synthetic_warps(count, events, seed=11):
        warps.append(
            sim.SimWarp(
                sm=index % 3,
                slot=(index // 3) % 2,
                block=(index, index % 5, 1),
                warp=index % 4,
                grid_dim=(24, 5, 2),
                events=[(e.event_id, None if e.payload is None else payload_bits(e.payload), e.t_ns) for e in stream],
            )
        )
    return warps


def _events_only(events: np.ndarray) -> np.ndarray:
    return events[(events["kind"] & EVENT_WARP_ROW) == 0]


def test_what_the_device_runtime_writes_the_drain_reads_exactly(tmp_path: Path) -> None:
    ring, program = _ring(tmp_path, RingGeometry(256, 256))
    warps = _warps(24, 150)
    sim.run(program, ring.path, ring.view.geometry.total_bytes, warps)
    batch = RingDrain(ring.view).drain()
    events = batch.decode(EventTables([TABLE]))

    expected = [
        (w.sm, w.block[0], w.block[1], w.warp, event_id, t & ~31, bits or 0)
        for w in warps
        for event_id, bits, t in w.events
    ]
    got = list(
        zip(
            events["sm"].tolist(),
            events["block_x"].tolist(),
            events["block_y"].tolist(),
            events["warp"].tolist(),
            events["event"].tolist(),
            events["t_ns"].tolist(),
            events["payload"].tolist(),
            strict=True,
        )
    )
    assert sorted(got) == sorted(expected)
    counters = batch.counters
    assert counters.events_written == counters.events_read == 24 * 150
    assert counters.chunks_written == counters.chunks_read == 24 * 150  # a record is an event
    assert counters.chunks_lost == counters.events_lost == counters.torn == 0
    for flag in (EVENT_WARP_BEGIN, EVENT_WARP_END):
        marked = events[(events["kind"] & flag) != 0]
        assert sorted(marked["block_x"].tolist()) == list(range(24))
    assert set((events["kind"] & KIND_MASK)[events["event"] == 31].tolist()) == {KIND_END}
    assert (events["module"] == TABLE.module).all()
    assert ring.view.warps == (24, 24, 24 * 150)  # claims, warps ended and the events they wrote
    # each warp names its launch's shape: the grid and the warps of its block
    assert set(batch.chunks["block_warps"].tolist()) == {4} and set(batch.chunks["grid_x"].tolist()) == {24}


def test_a_warp_that_stops_shows_every_event_it_ran_and_no_end(tmp_path: Path) -> None:
    ring, program = _ring(tmp_path, RingGeometry(64, 256))
    t = 1 << 42
    ran = [(2, None, t + 100), (3, payload_bits(17), t + 200), (2, None, t + 300)]
    stuck = sim.SimWarp(sm=0, slot=3, block=(3, 0, 0), warp=1, events=ran, stops=True)
    idle = sim.SimWarp(sm=0, slot=4, block=(4, 0, 0), warp=2, events=[], start_ns=t + 50, stops=True)
    done = sim.SimWarp(sm=0, slot=5, block=(5, 0, 0), warp=0, events=[(1, None, t + 400)])
    sim.run(program, ring.path, ring.view.geometry.total_bytes, [stuck, idle, done])
    drain = RingDrain(ring.view)
    events = drain.drain().decode(EventTables([TABLE]))

    held = events[events["block_x"] == 3]
    assert held["event"].tolist() == [2, 3, 2]
    assert held["payload"].tolist() == [0, 17, 0]
    assert held["t_ns"].tolist()[-1] == (t + 300) & ~31
    assert held["kind"][0] & EVENT_WARP_BEGIN and not (held["kind"] & EVENT_WARP_END).any()
    (began,) = events[events["block_x"] == 4]  # began, wrote nothing: one warp row at its begin
    assert began["kind"] == EVENT_WARP_ROW | EVENT_WARP_BEGIN | 3
    assert (began["t_ns"], began["event"], began["warp"]) == (t + 50, 0, 2)
    (finished,) = events[events["block_x"] == 5]
    assert finished["kind"] & EVENT_WARP_BEGIN and finished["kind"] & EVENT_WARP_END
    assert ring.view.warps == (3, 1, 1)
    counters = drain.counters
    assert (counters.events_read, counters.events_lost, counters.chunks_lost) == (4, 0, 0)
    assert drain.drain().chunks.size == 0  # nothing more until the warps go on


def test_long_gaps_decode_exactly(tmp_path: Path) -> None:
    ring, program = _ring(tmp_path, RingGeometry(64, 256))
    t = 1 << 42
    times = [t, t + 1000, t + 3_000_000_000, t + 13_000_000_000, t + 13_000_000_512]
    warp = sim.SimWarp(sm=0, slot=5, block=(9, 0, 0), warp=2, events=[(1, None, x) for x in times])
    sim.run(program, ring.path, ring.view.geometry.total_bytes, [warp])
    batch = RingDrain(ring.view).drain()
    events = batch.decode(EventTables([TABLE]))
    assert events["t_ns"].tolist() == [x & ~31 for x in times]
    assert set(batch.chunks["segment"].tolist()) == {2}  # SM 0, warp 2
    assert (events["kind"] & KIND_MASK).tolist() == [KIND_MARK] * 5


def test_a_warp_that_laps_its_region_keeps_its_newest_events_and_its_name(tmp_path: Path) -> None:
    ring, program = _ring(tmp_path, RingGeometry(8, 16))
    t = 1 << 41
    long = sim.SimWarp(sm=3, slot=0, block=(7, 1, 0), warp=2, events=[(1, None, t + 40 * i) for i in range(50)])
    short = sim.SimWarp(sm=4, slot=0, block=(8, 0, 0), warp=0, events=[(1, None, t + 5000 + 40 * i) for i in range(5)])
    sim.run(program, ring.path, ring.view.geometry.total_bytes, [long, short])
    batch = RingDrain(ring.view).drain()
    counters = batch.counters
    # the long warp's newest 16 events, under its own name; the short warp whole
    assert (counters.events_written, counters.events_read, counters.events_lost) == (55, 21, 34)
    events = batch.decode(EventTables([TABLE]))
    kept = events[(events["block_x"] == 7) & ((events["kind"] & EVENT_WARP_ROW) == 0)]
    assert kept["t_ns"].tolist() == [(t + 40 * i) & ~31 for i in range(34, 50)]
    assert set(zip(kept["sm"].tolist(), kept["block_y"].tolist(), kept["warp"].tolist(), strict=True)) == {(3, 1, 2)}
    assert batch.losses[["block_x", "reason", "events"]].tolist() == [(7, LOSS_OVERWRITTEN, 34)]
    assert len(events[events["block_x"] == 8]) == 5


def test_claims_that_go_round_the_ring_lose_the_oldest_warp_whole(tmp_path: Path) -> None:
    ring, program = _ring(tmp_path, RingGeometry(2, 16))
    t = 1 << 41
    warps = [
        sim.SimWarp(sm=0, slot=0, block=(b, 0, 0), warp=0, events=[(1, None, t + 1000 * b + 40 * i) for i in range(6)])
        for b in range(3)
    ]
    sim.run(program, ring.path, ring.view.geometry.total_bytes, warps)
    batch = RingDrain(ring.view).drain()
    counters = batch.counters
    assert (counters.events_written, counters.events_read, counters.events_lost) == (18, 12, 6)
    assert counters.warps_unread == 1
    events = batch.decode(EventTables([TABLE]))
    assert sorted(set(events["block_x"].tolist())) == [1, 2]


def test_a_module_with_many_events_widens_its_ids(tmp_path: Path) -> None:
    table = ModuleEvents(7, 6, ("wide",), tuple(EventInfo(i, f"e{i}", "range") for i in range(1, 41) if i != 31))
    ring, program = _ring(tmp_path, RingGeometry(64, 256), id_bits=6)
    t = 1 << 40
    ids = [1, 40, 31, 33, 31, 2]  # 31 is how TileLang writes a range end
    warp = sim.SimWarp(
        sm=0, slot=1, block=(0, 0, 0), warp=0, events=[(i, None, t + 640 * n) for n, i in enumerate(ids)]
    )
    sim.run(program, ring.path, ring.view.geometry.total_bytes, [warp])
    events = _events_only(RingDrain(ring.view).drain().decode(EventTables([table])))
    assert events["event"].tolist() == [1, 40, 63, 33, 63, 2]
    assert (events["kind"] & KIND_MASK).tolist()[2] == KIND_END
    assert events["t_ns"].tolist() == [(t + 640 * n) & ~63 for n in range(6)]
    assert int(np.unique(events["sm"])[0]) == 0 and WARP_SLOTS == 64
