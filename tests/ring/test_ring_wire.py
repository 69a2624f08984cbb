"""kernel_module and kernel_records through real frames: what a client decodes is what was drained."""

from __future__ import annotations

import msgpack
import pytest

from iket_tui.protocol.codec import decode_body
from iket_tui.protocol.frames import MAX_FRAME_BODY, FrameDecoder, encode_frame
from iket_tui.ring.buffer import MappedRing
from iket_tui.ring.cpu_producer import synthetic_table, write_synthetic
from iket_tui.ring.decode import EventTables, decode
from iket_tui.ring.drain import RingDrain
from iket_tui.ring.events import EventTableError
from iket_tui.ring.layout import DEFAULT_LAYOUT
from iket_tui.ring.wire import RecordsError, kernel_module, kernel_records, module_from_message, records_from_message

pytestmark = pytest.mark.usefixtures("drain_engine")


def _through_frames(message: dict[str, object]) -> dict[str, object]:
    frames = FrameDecoder()
    frames.feed(encode_frame(msgpack.packb(message, use_bin_type=True)))
    (body,) = list(frames)
    return decode_body(body)


def test_a_drained_batch_decodes_the_same_on_the_other_side(ring_file: MappedRing, tables: EventTables) -> None:
    write_synthetic(ring_file.view, 30, 200, seed=5)
    batch = RingDrain(ring_file.view).drain()
    module = _through_frames(kernel_module(synthetic_table(), ring_id=batch.ring_id, layout=batch.layout, t_ns=1))
    records = records_from_message(_through_frames(kernel_records(batch, t_ns=2)))

    client_tables = EventTables([module_from_message(module)])
    assert records.counters == batch.counters
    assert records.ring_id == ring_file.view.ring_id
    assert records.device_now_ns == batch.device_now_ns is not None  # a ring file's writers' clock
    assert (decode(records.chunks, client_tables, records.layout) == batch.decode(tables)).all()


def test_batches_split_to_fit_a_frame(ring_file: MappedRing) -> None:
    write_synthetic(ring_file.view, 64, 300)
    batch = RingDrain(ring_file.view).drain()
    parts = batch.split(100)
    assert [len(part.chunks) for part in parts[:-1]] == [100] * (len(parts) - 1)
    assert sum(len(part.chunks) for part in parts) == len(batch.chunks)
    assert 65_536 * batch.layout.chunk_bytes <= MAX_FRAME_BODY  # a 65536-chunk batch still fits one frame


def test_damaged_messages_are_refused_in_one_line(ring_file: MappedRing) -> None:
    write_synthetic(ring_file.view, 2, 100)
    message = kernel_records(RingDrain(ring_file.view).drain(), t_ns=0)
    with pytest.raises(RecordsError, match="bytes for"):
        records_from_message({**message, "chunks": message["chunks"][:-1]})
    with pytest.raises(RecordsError, match="unknown ring layout"):
        records_from_message({**message, "layout": 7})
    with pytest.raises(RecordsError, match="without its counters"):
        records_from_message({**message, "counters": {}})
    with pytest.raises(RecordsError, match="impossible device_now_ns -5"):
        records_from_message({**message, "device_now_ns": -5})
    assert records_from_message({**message, "device_now_ns": None}).device_now_ns is None  # an unknown device clock
    table = kernel_module(synthetic_table(), ring_id=None, layout=DEFAULT_LAYOUT, t_ns=0)
    with pytest.raises(EventTableError, match="bad event id 31"):
        module_from_message({**table, "events": [{"id": 31, "name": "x", "kind": "mark"}]})


def test_losses_travel_with_their_batch_and_an_older_agents_batch_still_reads() -> None:
    import numpy as np

    from iket_tui.ring.buffer import RingView
    from iket_tui.ring.counters import LOSS_OVERWRITTEN
    from iket_tui.ring.cpu_producer import flood
    from iket_tui.ring.layout import RingGeometry

    geometry = RingGeometry(8, 16)
    ring = RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry)
    flood(ring, records_per_warp=40, warps=3, launch=8, block_warps=3)
    batch = RingDrain(ring).drain()
    records = records_from_message(_through_frames(kernel_records(batch, t_ns=2)))
    assert records.losses.tobytes() == batch.losses.tobytes()
    assert records.losses[["launch", "warp", "reason", "events"]].tolist() == [
        (8, warp, LOSS_OVERWRITTEN, 24) for warp in range(3)
    ]
    assert (records.counters.warps_lost, records.counters.warps_unread) == (0, 0)
    assert set(records.chunks["grid_x"].tolist()) == {1} and set(records.chunks["block_warps"].tolist()) == {3}

    older = kernel_records(batch, t_ns=2)
    del older["losses"]
    older["counters"] = {k: v for k, v in older["counters"].items() if k not in ("warps_lost", "warps_unread")}
    read = records_from_message(_through_frames(older))
    assert len(read.losses) == 0 and read.counters.events_read == batch.counters.events_read
    with pytest.raises(RecordsError, match="whose losses are not whole loss records"):
        records_from_message({**kernel_records(batch, t_ns=2), "losses": b"\0" * 5})
    bad = batch.losses.copy()
    bad["reason"] = 9
    with pytest.raises(RecordsError, match="naming a loss of no reason there is"):
        records_from_message({**kernel_records(batch, t_ns=2), "losses": bad.tobytes()})
