"""Drain and decode a ring written by the CPU producer: from a thread, from another process,
lapped on purpose, records not visible yet, overwritten during the copy, impossible records, a
warp seen while it runs, a reset to a new generation."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

import numpy as np
import pytest

from iket_tui.ring.buffer import MappedRing, RingView
from iket_tui.ring.counters import DrainBatch
from iket_tui.ring.cpu_producer import (
    WarpWriter,
    flood,
    payload_bits,
    synthetic_table,
    synthetic_warps,
    write_synthetic,
)
from iket_tui.ring.decode import EventTables, payload_values
from iket_tui.ring.drain import LiveRing, RingDrain
from iket_tui.ring.layout import (
    EVENT_DTYPE,
    EVENT_WARP_BEGIN,
    EVENT_WARP_END,
    EVENT_WARP_ROW,
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
    with WarpWriter(ring_file.view, segment=3, module=1, start_ns=1000) as warp:
        warp.event(3, -5, t_ns=1100)
        warp.event(4, 0xFFFF_FFF0, t_ns=1200)
        warp.event(5, 2.75, t_ns=1300)
        warp.event(2, t_ns=1400)
        warp.end(t_ns=1500)
    events = _collect(RingDrain(ring_file.view), [RingDrain(ring_file.view).drain()], tables)
    assert payload_values(events).tolist() == [-5, 0xFFFF_FFF0, 2.75, None, None]
    assert [int(k) & KIND_MASK for k in events["kind"]][-1] == KIND_END


def test_a_tiny_ring_lapped_on_purpose_counts_the_loss_exactly() -> None:
    geometry = RingGeometry(segments=2, records_per_segment=16)
    ring = RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry)
    drain = RingDrain(ring)
    assert flood(ring, records_per_segment=12) == 2 * 8
    first = drain.drain().counters
    assert (first.chunks_written, first.chunks_read, first.chunks_lost) == (24, 24, 0)
    assert (first.events_written, first.events_read, first.events_lost) == (16, 16, 0)

    flood(ring, records_per_segment=40)  # 40 more per segment into 16 slots: 24 of each are gone
    second = drain.drain()
    counters = second.counters
    assert (counters.chunks_written, counters.chunks_read, counters.chunks_lost) == (104, 24, 80)
    # the surviving records belong to warps whose begin was lapped away: lost, never misattributed;
    # their events are counted from the segment's counters, stored when the warp ended
    assert len(second.chunks) == 0
    assert (counters.events_written, counters.events_read, counters.events_lost) == (16 + 72, 16, 72)
    flood(ring, records_per_segment=12)
    third = drain.drain().counters
    assert (third.events_written, third.events_read, third.events_lost) == (16 + 72 + 16, 32, 72)
    assert third.balanced and third.chunks_written == 128
    assert drain.drain().counters == third  # nothing new: nothing counted twice


def _warp_with(view: RingView, events: int, segment: int = 0) -> WarpWriter:
    warp = WarpWriter(view, segment=segment, module=1, launch=5, block=(2, 0, 0), warp=3, start_ns=0)
    for i in range(events):
        warp.event(1, t_ns=64 * (i + 1))
    return warp


def test_a_record_not_visible_yet_ends_its_segments_pass_until_it_is(ring_file: MappedRing) -> None:
    view = ring_file.view
    _warp_with(view, 10).close()
    stamps = view.records["stamp"][0]
    late = int(stamps[7])
    stamps[7] = 0  # position 7 is stored, its stamp not visible yet; 8 onwards are
    drain = RingDrain(view)
    first = drain.drain()
    assert first.events == 4  # positions 3..6
    assert (first.counters.chunks_written, first.counters.chunks_lost) == (7, 0)
    assert first.counters.balanced

    stamps[7] = late
    second = drain.drain()
    assert second.events == 6
    counters = second.counters
    assert (counters.chunks_written, counters.chunks_read, counters.chunks_lost) == (14, 14, 0)
    assert (counters.events_written, counters.events_lost) == (10, 0)


def test_a_warps_begin_is_read_whole_or_not_at_all(ring_file: MappedRing, tables: EventTables) -> None:
    view = ring_file.view
    warp = _warp_with(view, 2)
    stamps = view.records["stamp"][0]
    late = int(stamps[1])
    stamps[1] = 0  # the launch record is not visible yet: the begin waits with it
    drain = RingDrain(view)
    assert drain.drain().events == 0 and drain.counters.chunks_written == 0
    stamps[1] = late
    events = drain.drain().decode(tables)
    assert events["launch"].tolist() == [5, 5] and events["warp"].tolist() == [3, 3]
    warp.close()


def test_a_reader_lapped_during_its_copy_never_hands_on_the_overwritten_records() -> None:
    geometry = RingGeometry(segments=1, records_per_segment=16)
    ring = RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry)

    class LappedDuringCopy(LiveRing):
        def rows(self, segments: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
            copied = super().rows(segments)
            flood(self.ring, records_per_segment=16)  # the writer laps the ring between copy and recheck
            return copied

    flood(ring, records_per_segment=16)
    drain = RingDrain(ring, source=LappedDuringCopy(ring))
    batch = drain.drain()
    assert len(batch.chunks) == 0
    assert (batch.counters.chunks_written, batch.counters.chunks_read, batch.counters.torn) == (0, 0, 0)
    batch = RingDrain(ring).drain()  # a reader that is not lapped reads the newest warp whole
    assert (batch.counters.chunks_read, batch.counters.events_read) == (16, 12)


def test_a_record_stored_whole_but_impossible_is_torn_never_shown(ring_file: MappedRing, tables: EventTables) -> None:
    view = ring_file.view
    warp = _warp_with(view, 3)
    rows = view.records.view("<u4").reshape(view.geometry.segments, -1, 4)
    rows[0, 4, 0] = 0x0F00  # position 4 (the second event) holds a record of no type there is
    warp.close()
    drain = RingDrain(view)
    events = drain.drain().decode(tables)
    assert events["t_ns"].tolist() == [64, 192]
    counters = drain.counters
    assert (counters.torn, counters.chunks_lost, counters.events_read) == (1, 1, 2)
    assert (counters.events_written, counters.events_lost) == (3, 1)


def test_a_warp_is_shown_while_it_runs_and_ends_when_it_ends(ring_file: MappedRing, tables: EventTables) -> None:
    view = ring_file.view
    drain = RingDrain(view)
    warp = WarpWriter(view, segment=9, module=1, block=(4, 0, 0), warp=1, start_ns=1000)
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
    assert (counters.events_written, counters.events_read, counters.events_lost) == (1900, 1400, 500)
    assert counters.balanced
    assert sorted(_got(_collect(drain, [batch], tables))) == sorted(_expected(4, 100, seed=4))


def test_a_reset_under_way_is_left_alone(ring_file: MappedRing) -> None:
    view = ring_file.view
    write_synthetic(view, 3, 50)
    view.header["generation"] = 1  # the owner is in the middle of a reset
    batch = RingDrain(view).drain()
    assert len(batch.chunks) == 0 and batch.counters.events_written == 0


def test_a_warp_whose_begin_was_lapped_is_lost_not_torn_and_the_next_warp_is_read() -> None:
    geometry = RingGeometry(segments=1, records_per_segment=16)
    ring = RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry)
    drain = RingDrain(ring)
    first = WarpWriter(ring, segment=0, module=1, block=(1, 0, 0), start_ns=0)
    for i in range(14):
        first.event(1, t_ns=64 * (i + 1))
    first.close()  # 18 records into 16 slots: its begin and launch records are gone, its block record is left
    second = WarpWriter(ring, segment=0, module=1, block=(2, 0, 0), start_ns=2000)
    second.event(2, t_ns=2100)
    batch = drain.drain()
    counters = batch.counters
    assert counters.torn == 0
    assert (counters.chunks_written, counters.chunks_read, counters.chunks_lost) == (22, 4, 18)
    events = batch.decode(EventTables([synthetic_table()]))
    assert set(events["block_x"].tolist()) == {2}
    assert (counters.events_written, counters.events_read, counters.events_lost) == (15, 1, 14)


def test_a_quiet_ring_is_copied_until_every_segment_is_read_up_to_its_counters_after_a_reset_too(
    ring_file: MappedRing,
) -> None:
    view = ring_file.view

    class Quiet(LiveRing):
        """A source like a GPU ring's: ``refresh`` says whether any warp ran since the last
        passes (here: ``moved``); every copy of the stamps is counted."""

        moved = True
        copies = 0

        def refresh(self) -> bool:
            return self.moved

        def stamps(self) -> np.ndarray[Any, Any]:
            self.copies += 1
            return super().stamps()

    source = Quiet(view)
    drain = RingDrain(view, source=source)
    _warp_with(view, 10).close()
    stamps = view.records["stamp"][0]
    late = int(stamps[7])
    stamps[7] = 0  # position 7 is not visible yet when the warps have all ended
    assert drain.drain().events == 4 and not drain.caught_up
    source.moved = False  # no warp runs any more, yet the segment is short of its counters
    stamps[7] = late
    assert drain.drain().events == 6 and drain.caught_up and source.copies == 2
    assert drain.drain().events == 0 and source.copies == 2  # read up to its counters: not copied

    assert view.begin_generation() == 2
    _warp_with(view, 3, segment=5).close()
    source.moved = True
    batch = drain.drain()
    assert batch.generation_changed and batch.events == 3 and drain.caught_up
    source.moved = False
    assert drain.drain().events == 0 and source.copies == 3  # quiet again after the reset
    counters = drain.counters
    assert counters.balanced and (counters.events_written, counters.events_read, counters.events_lost) == (13, 13, 0)
