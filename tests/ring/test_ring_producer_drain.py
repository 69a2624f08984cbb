"""Drain and decode a ring written by the CPU producer: from a thread, from another process,
warps that lap their own regions, claims that go round the ring, records and descriptors not
visible yet, a region claimed again during the copy, a warp seen while it runs, a reset to a new
generation, and the shape of the GEMM users trace (thousands of events per warp and block)."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

import numpy as np
import pytest

from iket_tui.ring.buffer import MappedRing, RingView
from iket_tui.ring.counters import LOSS_LAPPED, LOSS_OVERWRITTEN, DrainBatch, RingCounters
from iket_tui.ring.cpu_producer import (
    WarpWriter,
    flood,
    payload_bits,
    synthetic_table,
    synthetic_warps,
    write_synthetic,
)
from iket_tui.ring.decode import EventTables, payload_values
from iket_tui.ring.drain import LiveRing, RegionCopy, RingDrain
from iket_tui.ring.layout import (
    EVENT_DTYPE,
    EVENT_WARP_BEGIN,
    EVENT_WARP_END,
    EVENT_WARP_ROW,
    FLAG_WARP_BEGIN,
    FLAG_WARP_END,
    FLAG_WARP_LAPPED,
    KIND_END,
    KIND_MASK,
    KIND_UNKNOWN,
    RingGeometry,
)

pytestmark = pytest.mark.usefixtures("drain_engine")

PRODUCER_ARGS = ("--warps", "80", "--events", "300", "--seed", "9", "--module", "1")


def _expected(warps: int, events: int, seed: int) -> list[tuple[int, int, int, int]]:
    """(block, t_ns, event, payload bits) of every event of the synthetic stream."""
    return [
        (warp, e.t_ns & ~31, e.event_id, 0 if e.payload is None else payload_bits(e.payload))
        for warp, stream in synthetic_warps(warps, events, seed=seed)
        for e in stream
    ]


def _got(events: np.ndarray[Any, Any]) -> list[tuple[int, int, int, int]]:
    return list(
        zip(
            events["block_x"].tolist(),
            events["t_ns"].tolist(),
            events["event"].tolist(),
            events["payload"].tolist(),
            strict=True,
        )
    )


def _collect(drain: RingDrain, batches: list[DrainBatch], tables: EventTables) -> np.ndarray[Any, Any]:
    """The events of ``batches``, without warp rows."""
    parts = [batch.decode(tables) for batch in batches]
    events = np.concatenate(parts) if parts else np.empty(0, dtype=EVENT_DTYPE)
    return events[(events["kind"] & EVENT_WARP_ROW) == 0]


def test_events_written_by_a_thread_are_drained_while_it_writes(ring_file: MappedRing, tables: EventTables) -> None:
    drain = RingDrain(ring_file.view, period_s=0.002)
    batches: list[DrainBatch] = []
    stop = threading.Event()
    drainer = drain.run(batches.append, stop)
    writer = threading.Thread(target=write_synthetic, args=(ring_file.view, 120, 400), kwargs={"seed": 3})
    writer.start()
    writer.join(timeout=120)
    stop.set()
    drainer.join(timeout=60)

    events = _collect(drain, batches, tables)
    assert sorted(_got(events)) == sorted(_expected(120, 400, seed=3))
    assert all(batch.counters.balanced for batch in batches)
    final = drain.counters
    assert (final.events_written, final.events_read, final.events_lost, final.torn) == (48_000, 48_000, 0, 0)


def test_events_written_by_another_process_are_drained_while_it_writes(
    ring_file: MappedRing, tables: EventTables
) -> None:
    drain = RingDrain(ring_file.view, period_s=0.005)
    batches: list[DrainBatch] = []
    stop = threading.Event()
    drainer = drain.run(batches.append, stop)
    producer = subprocess.run(
        [sys.executable, "-m", "iket_tui.ring.cpu_producer", str(ring_file.path), *PRODUCER_ARGS],
        capture_output=True,
        text=True,
        timeout=120,
    )
    stop.set()
    drainer.join(timeout=60)

    assert producer.returncode == 0, producer.stderr
    assert producer.stdout.strip() == "24000"
    events = _collect(drain, batches, tables)
    assert sorted(_got(events)) == sorted(_expected(80, 300, seed=9))
    assert drain.counters.events_lost == 0 and drain.counters.events_read == 24_000


def test_payloads_decode_to_the_values_written(ring_file: MappedRing, tables: EventTables) -> None:
    with WarpWriter(ring_file.view, module=1, start_ns=1000) as warp:
        warp.event(3, -5, t_ns=1100)
        warp.event(4, 0xFFFF_FFF0, t_ns=1200)
        warp.event(5, 2.75, t_ns=1300)
        warp.event(2, t_ns=1400)
        warp.end(t_ns=1500)
    events = _collect(RingDrain(ring_file.view), [RingDrain(ring_file.view).drain()], tables)
    assert payload_values(events).tolist() == [-5, 0xFFFF_FFF0, 2.75, None, None]
    assert [int(k) & KIND_MASK for k in events["kind"]][-1] == KIND_END


def _tiny(regions: int = 8, records: int = 16) -> RingView:
    geometry = RingGeometry(regions, records)
    return RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry)


def _balanced(counters: RingCounters) -> tuple[int, int, int]:
    assert counters.balanced and counters.chunks_written == counters.events_written  # a record is an event
    return counters.events_written, counters.events_read, counters.events_lost


def test_a_warp_that_writes_more_than_its_region_keeps_its_newest_events_under_its_own_name() -> None:
    ring = _tiny()
    drain = RingDrain(ring)
    assert flood(ring, records_per_warp=12, warps=2, launch=3, block_warps=2) == 24
    first = drain.drain()
    assert _balanced(first.counters) == (24, 24, 0) and len(first.losses) == 0

    flood(ring, records_per_warp=40, warps=2, launch=4, block_warps=2)  # 40 each into 16 slots: 24 of each are gone
    second = drain.drain()
    assert _balanced(second.counters) == (104, 56, 48)
    events = second.decode(EventTables([synthetic_table()]))
    kept = events[(events["kind"] & EVENT_WARP_ROW) == 0]
    # the newest 16 of each warp, named: launch 4, block 0, warps 0 and 1
    assert sorted(set(zip(kept["launch"].tolist(), kept["warp"].tolist(), strict=True))) == [(4, 0), (4, 1)]
    assert len(kept) == 32 and kept["t_ns"].min() == (1 << 40) + 24 * 32
    assert (second.chunks["flags"] & FLAG_WARP_LAPPED != 0).sum() == 2  # each warp says it is not whole
    assert second.losses[["launch", "warp", "reason", "events"]].tolist() == [
        (4, 0, LOSS_OVERWRITTEN, 24),
        (4, 1, LOSS_OVERWRITTEN, 24),
    ]
    assert drain.drain().counters == second.counters  # nothing new: nothing counted twice


def test_claims_that_go_round_the_ring_before_it_is_read_lose_the_oldest_warps_whole() -> None:
    ring = _tiny(regions=8)
    drain = RingDrain(ring)
    flood(ring, records_per_warp=12, warps=20, launch=7, block_warps=2)  # 20 warps, 8 regions
    batch = drain.drain()
    assert _balanced(batch.counters) == (240, 96, 144)
    assert (batch.counters.warps_unread, batch.counters.warps_lost) == (12, 12)
    events = batch.decode(EventTables([synthetic_table()]))
    # the newest eight warps whole (blocks 6 to 9), never a piece of an older one
    assert sorted(set(zip(events["block_x"].tolist(), events["warp"].tolist(), strict=True))) == [
        (block, warp) for block in range(6, 10) for warp in (0, 1)
    ]
    begins = (batch.chunks["flags"] & FLAG_WARP_BEGIN) != 0
    ends = (batch.chunks["flags"] & FLAG_WARP_END) != 0
    assert begins.sum() == ends.sum() == 8
    assert (batch.chunks["grid_x"] == 10).all() and (batch.chunks["block_warps"] == 2).all()


def test_a_region_claimed_again_before_its_warp_was_read_to_its_end_names_what_it_lost() -> None:
    ring = _tiny(regions=2)
    drain = RingDrain(ring)
    held = WarpWriter(ring, module=1, launch=2, block=(5, 0, 0), warp=1, start_ns=0)
    for i in range(4):
        held.event(1, t_ns=64 * (i + 1))
    assert drain.drain().events == 4
    for i in range(4, 10):
        held.event(1, t_ns=64 * (i + 1))
    held.close()
    flood(ring, records_per_warp=3, warps=2, launch=9)  # both regions go to later warps before the next read
    batch = drain.drain()
    # named, though its end was never read: how many it lost comes from the header's count of the
    # events of the warps that ended, once every claim is finished with
    assert batch.losses[["launch", "block_x", "warp", "reason", "events"]].tolist() == [(2, 5, 1, LOSS_LAPPED, -1)]
    assert _balanced(batch.counters) == (16, 10, 6)
    assert batch.counters.warps_lost == 1 and batch.counters.warps_unread == 0


def _warp_with(view: RingView, events: int) -> WarpWriter:
    warp = WarpWriter(view, module=1, launch=5, block=(2, 0, 0), warp=3, start_ns=0)
    for i in range(events):
        warp.event(1, t_ns=64 * (i + 1))
    return warp


def test_a_record_not_visible_yet_ends_its_regions_pass_until_it_is(ring_file: MappedRing) -> None:
    view = ring_file.view
    _warp_with(view, 10).close()
    stamps = view.records["stamp"][0]
    late = int(stamps[4])
    stamps[4] = 0  # position 4 is stored, its stamp not visible yet; 5 onwards are
    drain = RingDrain(view)
    first = drain.drain()
    assert first.events == 4  # positions 0..3
    assert _balanced(first.counters) == (4, 4, 0)

    stamps[4] = late
    second = drain.drain()
    assert second.events == 6
    assert _balanced(second.counters) == (10, 10, 0)
    assert (second.chunks["flags"] & FLAG_WARP_END).any()


def test_a_warp_is_read_only_once_its_descriptor_is_whole(ring_file: MappedRing, tables: EventTables) -> None:
    view = ring_file.view
    warp = _warp_with(view, 2)
    words = view.descriptor_words[0]
    late = int(words[4])
    words[4] = 0  # the descriptor's second part is not visible yet: the warp waits with it
    drain = RingDrain(view)
    assert drain.drain().events == 0 and drain.counters.events_written == 0
    words[4] = late
    events = drain.drain().decode(tables)
    assert events["launch"].tolist() == [5, 5] and events["warp"].tolist() == [3, 3]
    warp.close()


def test_a_region_claimed_again_during_the_copy_is_never_handed_on() -> None:
    ring = _tiny(regions=1)

    class ClaimedDuringCopy(LiveRing):
        def read(self, claims: np.ndarray[Any, Any]) -> RegionCopy:
            copied = super().read(claims)
            flood(self.ring, records_per_warp=16, warps=1, launch=2)  # a later warp takes the region meanwhile
            return RegionCopy(copied.descriptors, copied.records, self.ring.descriptor_words[claims % 1])

    flood(ring, records_per_warp=16, warps=1, launch=1)
    drain = RingDrain(ring, source=ClaimedDuringCopy(ring))
    batch = drain.drain()
    assert len(batch.chunks) == 0
    assert (batch.counters.events_read, batch.counters.torn) == (0, 0)
    batch = RingDrain(ring).drain()  # a reader that is not lapped reads the newest warp whole
    assert batch.counters.events_read == 16 and set(batch.chunks["launch"].tolist()) == {2}


def test_a_warp_is_shown_while_it_runs_and_ends_when_it_ends(ring_file: MappedRing, tables: EventTables) -> None:
    view = ring_file.view
    drain = RingDrain(view)
    warp = WarpWriter(view, module=1, block=(4, 0, 0), warp=1, start_ns=1000)
    began = drain.drain().decode(tables)
    assert began["kind"].tolist() == [EVENT_WARP_ROW | EVENT_WARP_BEGIN | KIND_UNKNOWN]
    assert began["t_ns"].tolist() == [1000]
    warp.event(2, t_ns=1100)
    warp.event(3, 9, t_ns=1200)
    running = drain.drain().decode(tables)
    assert running["event"].tolist() == [2, 3] and not (running["kind"] & (EVENT_WARP_END | EVENT_WARP_BEGIN)).any()
    warp.close(t_ns=5000)
    (ended,) = drain.drain().decode(tables)
    assert ended["kind"] == EVENT_WARP_ROW | EVENT_WARP_END | KIND_UNKNOWN
    assert (ended["t_ns"], ended["block_x"], ended["warp"]) == (5000, 4, 1)
    assert drain.counters.balanced and drain.counters.events_read == 2


def test_a_new_generation_counts_what_the_old_one_left_unread(ring_file: MappedRing, tables: EventTables) -> None:
    view = ring_file.view
    drain = RingDrain(view)
    write_synthetic(view, 10, 100, seed=1)
    assert drain.drain().counters.events_read == 1000
    write_synthetic(view, 5, 100, seed=2)  # never read: the owner resets the ring first
    assert view.begin_generation() == 2
    write_synthetic(view, 4, 100, seed=4)

    batch = drain.drain()
    assert batch.generation_changed
    counters = batch.counters
    assert (counters.generation, counters.resets) == (2, 1)
    assert _balanced(counters) == (1900, 1400, 500)
    assert sorted(_got(_collect(drain, [batch], tables))) == sorted(_expected(4, 100, seed=4))


def test_a_reset_under_way_is_left_alone(ring_file: MappedRing) -> None:
    view = ring_file.view
    write_synthetic(view, 3, 50)
    view.header["generation"] = 1  # the owner is in the middle of a reset
    batch = RingDrain(view).drain()
    assert len(batch.chunks) == 0 and batch.counters.events_written == 0


def test_a_quiet_ring_is_not_copied_once_every_claim_is_read_to_its_end_after_a_reset_too(
    ring_file: MappedRing,
) -> None:
    view = ring_file.view

    class Quiet(LiveRing):
        """A source like a GPU ring's: ``refresh`` says whether any warp ran since the last
        passes (here: ``moved``); every copy of regions is counted."""

        moved = True
        copies = 0

        def refresh(self) -> bool:
            return self.moved

        def read(self, claims: np.ndarray[Any, Any]) -> RegionCopy:
            self.copies += 1
            return super().read(claims)

    source = Quiet(view)
    drain = RingDrain(view, source=source)
    _warp_with(view, 10).close()
    stamps = view.records["stamp"][0]
    late = int(stamps[7])
    stamps[7] = 0  # position 7 is not visible yet when the warps have all ended
    assert drain.drain().events == 7 and not drain.caught_up
    source.moved = False  # no warp runs any more, yet the warp is not read to its end
    stamps[7] = late
    assert drain.drain().events == 3 and drain.caught_up and source.copies == 2
    assert drain.drain().events == 0 and source.copies == 2  # read to its end: not copied

    assert view.begin_generation() == 2
    _warp_with(view, 3).close()
    source.moved = True
    batch = drain.drain()
    assert batch.generation_changed and batch.events == 3 and drain.caught_up
    source.moved = False
    assert drain.drain().events == 0 and source.copies == 3  # quiet again after the reset
    assert _balanced(drain.counters) == (13, 13, 0)


# The load users bring: the fp16 GEMM 4096^3 traced at every k-step writes 512 events per warp
# per block, 4 warps a block, 1,024 blocks: 2,097,152 events a launch.

GEMM_BLOCKS, GEMM_WARPS, GEMM_EVENTS = 1024, 4, 512


def _whole_launches(batch: DrainBatch) -> dict[int, int]:
    """Launch -> warps that arrived whole (began and ended, nothing overwritten) in ``batch``."""
    chunks = batch.chunks
    flags = chunks["flags"].astype(np.int64)
    key = chunks["launch"].astype(np.int64) << 32 | chunks["block_x"].astype(np.int64) << 8 | chunks["warp"]
    began = set(key[flags & FLAG_WARP_BEGIN != 0].tolist())
    ended = set(key[flags & FLAG_WARP_END != 0].tolist())
    lapped = set(key[flags & FLAG_WARP_LAPPED != 0].tolist())
    whole: dict[int, int] = {}
    for k in (began & ended) - lapped:
        whole[k >> 32] = whole.get(k >> 32, 0) + 1
    return whole


def test_a_gemm_launch_traced_at_every_k_step_arrives_whole_in_the_default_ring() -> None:
    ring = _tiny(regions=8192, records=1024)  # the agent's default ring: 128 MiB of records
    drain = RingDrain(ring)
    written = flood(ring, records_per_warp=GEMM_EVENTS, warps=GEMM_BLOCKS * GEMM_WARPS, launch=1, block_warps=4)
    assert written == 2_097_152
    batch = drain.drain()
    assert _balanced(batch.counters) == (written, written, 0)
    assert _whole_launches(batch) == {1: GEMM_BLOCKS * GEMM_WARPS}
    assert len(np.unique(batch.chunks["block_x"])) == GEMM_BLOCKS


def test_a_burst_of_gemm_launches_faster_than_the_reader_keeps_the_newest_launches_whole() -> None:
    ring = _tiny(regions=8192, records=1024)
    drain = RingDrain(ring)
    for launch in range(30):  # back to back, before any read: the ring holds two launches at once
        flood(ring, records_per_warp=GEMM_EVENTS, warps=GEMM_BLOCKS * GEMM_WARPS, launch=launch, block_warps=4)
    batch = drain.drain()
    assert _whole_launches(batch) == {28: 4096, 29: 4096}
    assert _balanced(batch.counters) == (30 * 2_097_152, 2 * 2_097_152, 28 * 2_097_152)
    assert batch.counters.warps_unread == 28 * 4096


def test_gemm_warps_writing_more_than_their_regions_hold_keep_their_newest_events_named() -> None:
    ring = _tiny(regions=4096, records=256)  # 4 warps of 1,024 blocks: one region each, 256 of 512 events
    drain = RingDrain(ring)
    flood(ring, records_per_warp=GEMM_EVENTS, warps=GEMM_BLOCKS * GEMM_WARPS, launch=3, block_warps=4)
    batch = drain.drain()
    assert _balanced(batch.counters) == (2_097_152, 1_048_576, 1_048_576)
    assert len(batch.losses) == 4096 and set(batch.losses["reason"].tolist()) == {LOSS_OVERWRITTEN}
    assert (batch.losses["events"] == 256).all()
    assert len(np.unique(batch.chunks["block_x"])) == GEMM_BLOCKS


def test_one_damaged_stamp_never_passes_for_a_warps_newest_record() -> None:
    """A stamp that names a position far ahead in its slot (damage, not a write) must not make
    the reader skip, or count as lost, the records the warp really wrote."""
    ring = _tiny(regions=1)
    warp = WarpWriter(ring, module=1, block=(3, 0, 0), start_ns=0)
    for i in range(10):
        warp.event(1, t_ns=64 * (i + 1))
    ring.record_words[0, 0, 3] = 0  # position 0 not visible yet: the reader looks for the newest
    ring.record_words[0, 12, 3] = ring.geometry.stamp_base(warp.claim) + 12 + 16 * 1000
    drain = RingDrain(ring)
    assert drain.drain().events == 0 and drain.counters.events_lost == 0
    ring.record_words[0, 0, 3] = ring.geometry.stamp_base(warp.claim)
    assert drain.drain().events == 10
    warp.close()
    drain.drain()
    assert _balanced(drain.counters) == (10, 10, 0)
