"""Drain and decode a ring written by the CPU producer: from a thread, from another process,
lapped on purpose, torn on purpose, reset to a new generation."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

import numpy as np
import pytest

from iket_tui.ring.buffer import MappedRing, RingView
from iket_tui.ring.counters import DrainBatch
from iket_tui.ring.cpu_producer import WarpWriter, flood, payload_bits, synthetic_warps, write_synthetic
from iket_tui.ring.decode import EventTables, payload_values
from iket_tui.ring.drain import RingDrain
from iket_tui.ring.layout import EVENT_DTYPE, KIND_END, KIND_MASK, RingGeometry

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
    parts = [batch.decode(tables) for batch in batches]
    return np.concatenate(parts) if parts else np.empty(0, dtype=EVENT_DTYPE)


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
    events = RingDrain(ring_file.view).drain().decode(tables)
    assert payload_values(events).tolist() == [-5, 0xFFFF_FFF0, 2.75, None, None]
    assert [int(k) & KIND_MASK for k in events["kind"]][-1] == KIND_END


def test_a_tiny_ring_lapped_on_purpose_counts_the_loss_exactly() -> None:
    geometry = RingGeometry(segments=2, chunks_per_segment=4)
    ring = RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry)
    drain = RingDrain(ring)
    per_chunk = ring.layout.body_words
    assert flood(ring, chunks_per_segment=3) == 2 * 3 * per_chunk
    first = drain.drain().counters
    assert (first.chunks_written, first.chunks_read, first.chunks_lost) == (6, 6, 0)

    flood(ring, chunks_per_segment=10)  # 10 more per segment into 4 slots: 6 of each are gone
    second = drain.drain()
    counters = second.counters
    assert (counters.chunks_written, counters.chunks_read, counters.chunks_lost) == (26, 14, 12)
    assert (counters.events_written, counters.events_read, counters.events_lost) == (
        26 * per_chunk,
        14 * per_chunk,
        12 * per_chunk,
    )
    assert second.chunks["stamp"].tolist() == [10, 11, 12, 13] * 2  # the newest four of each segment
    assert drain.drain().counters == counters  # nothing new: nothing counted twice


def _ten_chunks(view: RingView) -> None:
    with WarpWriter(view, segment=0, module=1, start_ns=0) as warp:
        for i in range(10 * view.layout.body_words):
            warp.event(1, t_ns=64 * (i + 1))


def test_late_tags_of_the_newest_publication_are_waited_for(ring_file: MappedRing) -> None:
    view = ring_file.view
    _ten_chunks(view)
    tags = view.chunks["tag"][0]
    late = tags[7:9].copy()
    tags[7:9] = 0  # one fence published chunks 6 to 9; the tags of 7 and 8 have not arrived yet
    drain = RingDrain(view)
    first = drain.drain()
    assert first.chunks["stamp"].tolist() == [1, 2, 3, 4, 5, 6, 7]
    assert (first.counters.chunks_written, first.counters.chunks_lost) == (7, 0)
    assert first.counters.balanced

    tags[7:9] = late
    second = drain.drain()
    assert second.chunks["stamp"].tolist() == [8, 9, 10]
    counters = second.counters
    assert (counters.chunks_written, counters.chunks_read, counters.chunks_lost) == (10, 10, 0)
    assert (counters.events_written, counters.events_lost) == (10 * view.layout.body_words, 0)


def test_an_older_chunk_without_its_tag_is_lost_not_waited_for(ring_file: MappedRing) -> None:
    view = ring_file.view
    _ten_chunks(view)
    view.chunks["tag"][0][4] = 0  # chunk 4 was published by an earlier fence than chunk 9: it is gone
    batch = RingDrain(view).drain()
    assert batch.chunks["stamp"].tolist() == [1, 2, 3, 4, 6, 7, 8, 9, 10]
    counters = batch.counters
    assert (counters.chunks_written, counters.chunks_read, counters.chunks_lost) == (10, 9, 1)
    assert (counters.events_lost, counters.torn) == (view.layout.body_words, 0)
    assert counters.balanced


def test_a_reader_lapped_during_its_copy_never_hands_on_the_overwritten_chunks() -> None:
    geometry = RingGeometry(segments=1, chunks_per_segment=4)
    ring = RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry)

    class LappedDuringCopy(RingDrain):
        def _copy(self, flat: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
            copied = super()._copy(flat)
            flood(self.ring, chunks_per_segment=4)  # the writer laps the ring between copy and recheck
            return copied

    flood(ring, chunks_per_segment=4)
    drain = LappedDuringCopy(ring)
    batch = drain.drain()
    assert len(batch.chunks) == 0
    assert (batch.counters.chunks_written, batch.counters.chunks_lost, batch.counters.torn) == (4, 4, 0)
    assert batch.counters.balanced


@pytest.mark.parametrize("tear", ["tag_only", "tag_first"])
def test_torn_chunks_never_surface_and_are_counted(ring_file: MappedRing, tables: EventTables, tear: str) -> None:
    drain = RingDrain(ring_file.view)
    seen: list[DrainBatch] = []
    per_chunk = ring_file.view.layout.body_words
    warp = WarpWriter(ring_file.view, segment=0, module=1, start_ns=0)
    warp.on_torn = lambda: seen.append(drain.drain())  # a reader right between the tag and the body
    t = 0
    for chunk in range(3):
        if chunk == 1:
            warp.tear = tear  # type: ignore[assignment]
        for _ in range(per_chunk):
            t += 64
            warp.event(1, t_ns=t)
    warp.close()
    seen.append(drain.drain())

    events = _collect(drain, seen, tables)
    # chunk 1 (its events were staged while chunk 0 was flushed) is torn: never handed on
    assert len(events) == 3 * per_chunk - per_chunk
    assert (np.diff(events["t_ns"].astype(np.int64)) > 0).all()
    counters = drain.counters
    assert counters.torn == 1
    assert (counters.chunks_written, counters.chunks_read, counters.chunks_lost) == (3, 2, 1)
    assert (counters.events_written, counters.events_read, counters.events_lost) == (
        3 * per_chunk,
        2 * per_chunk,
        per_chunk,
    )


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
    assert sorted(_got(batch.decode(tables))) == sorted(_expected(4, 100, seed=4))


def test_a_reset_under_way_is_left_alone(ring_file: MappedRing) -> None:
    view = ring_file.view
    write_synthetic(view, 3, 50)
    view.header["generation"] = 1  # the owner is in the middle of a reset
    batch = RingDrain(view).drain()
    assert len(batch.chunks) == 0 and batch.counters.events_written == 0
