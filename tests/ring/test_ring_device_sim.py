"""The CUDA runtime's own logic, run on the host, read back by the real drain and decoder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import ring_warp_sim as sim

from iket_tui.ring.buffer import MappedRing
from iket_tui.ring.cpu_producer import payload_bits, synthetic_warps
from iket_tui.ring.decode import EventTables
from iket_tui.ring.device import RingTarget
from iket_tui.ring.drain import RingDrain
from iket_tui.ring.events import EventInfo, ModuleEvents
from iket_tui.ring.layout import (
    DEFAULT_FLUSH_NS,
    DEVICE_MIN_CHUNKS,
    EVENT_WARP_END,
    KIND_END,
    KIND_MARK,
    KIND_MASK,
    PUBLISH_EVERY,
    WARP_SLOTS,
    ChunkLayout,
    RingGeometry,
)

pytestmark = pytest.mark.skipif(sim.compiler() is None, reason="needs a C++ compiler")

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
                slot=(index // 3) % 2,  # several warps in turn in each slot: counters handed on
                block=(index, index % 5, 1),
                warp=index % 4,
                events=[(e.event_id, None if e.payload is None else payload_bits(e.payload), e.t_ns) for e in stream],
            )
        )
    return warps


def test_what_the_device_runtime_writes_the_drain_reads_exactly(tmp_path: Path) -> None:
    ring, program = _ring(tmp_path, RingGeometry.for_sms(3, 64))
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
    assert batch.counters.events_written == batch.counters.events_read == 24 * 150
    assert batch.counters.chunks_lost == batch.counters.events_lost == batch.counters.torn == 0
    ends = events[(events["kind"] & EVENT_WARP_END) != 0]
    assert sorted(ends["block_x"].tolist()) == list(range(24))
    assert set((events["kind"] & KIND_MASK)[events["event"] == 31].tolist()) == {KIND_END}
    assert (events["module"] == TABLE.module).all()


def test_old_staged_events_are_flushed_and_long_gaps_decode_exactly(tmp_path: Path) -> None:
    ring, program = _ring(tmp_path, RingGeometry.for_sms(1, 16))
    t = 1 << 42
    times = [t, t + 1000, t + 1000 + DEFAULT_FLUSH_NS + 64, t + 3_000_000_000, t + 13_000_000_000, t + 13_000_000_512]
    warp = sim.SimWarp(sm=0, slot=5, block=(9, 0, 0), warp=2, events=[(1, None, x) for x in times])
    sim.run(program, ring.path, ring.view.geometry.total_bytes, [warp])
    batch = RingDrain(ring.view).drain()
    events = batch.decode(EventTables([TABLE]))
    assert events["t_ns"].tolist() == [x & ~31 for x in times]
    assert len(batch.chunks) == 4  # a chunk ends before each event older than the flush age would join it
    assert set(batch.chunks["segment"].tolist()) == {5}
    assert (events["kind"] & KIND_MASK).tolist() == [KIND_MARK] * 6


def test_a_ring_lapped_by_the_device_counts_every_lost_event(tmp_path: Path) -> None:
    ring, program = _ring(tmp_path, RingGeometry.for_sms(1, DEVICE_MIN_CHUNKS))
    per_chunk = ChunkLayout().body_words
    t = 1 << 41
    warp = sim.SimWarp(
        sm=0, slot=0, block=(0, 0, 0), warp=0, events=[(1, None, t + 40 * i) for i in range(50 * per_chunk)]
    )
    sim.run(program, ring.path, ring.view.geometry.total_bytes, [warp])
    counters = RingDrain(ring.view).drain().counters
    # 50 chunks into 16 slots; each flush announced the slot PUBLISH_EVERY ahead of its chunk, so the
    # newest 12 remain
    remain = DEVICE_MIN_CHUNKS - PUBLISH_EVERY
    assert (counters.chunks_written, counters.chunks_read, counters.chunks_lost) == (50, remain, 50 - remain)
    assert (counters.events_written, counters.events_read, counters.events_lost) == (
        50 * per_chunk,
        remain * per_chunk,
        (50 - remain) * per_chunk,
    )
    assert int(ring.view.counters[0]["next_chunk"]) == 50


def test_a_module_with_many_events_widens_its_ids(tmp_path: Path) -> None:
    table = ModuleEvents(7, 6, ("wide",), tuple(EventInfo(i, f"e{i}", "range") for i in range(1, 41) if i != 31))
    ring, program = _ring(tmp_path, RingGeometry.for_sms(1, 16), id_bits=6)
    t = 1 << 40
    ids = [1, 40, 31, 33, 31, 2]  # 31 is how TileLang writes a range end
    warp = sim.SimWarp(
        sm=0, slot=1, block=(0, 0, 0), warp=0, events=[(i, None, t + 640 * n) for n, i in enumerate(ids)]
    )
    sim.run(program, ring.path, ring.view.geometry.total_bytes, [warp])
    events = RingDrain(ring.view).drain().decode(EventTables([table]))
    assert events["event"].tolist() == [1, 40, 63, 33, 63, 2]
    assert (events["kind"] & KIND_MASK).tolist()[2] == KIND_END
    assert events["t_ns"].tolist() == [(t + 640 * n) & ~63 for n in range(6)]
    assert int(np.unique(events["sm"])[0]) == 0 and WARP_SLOTS == 64
