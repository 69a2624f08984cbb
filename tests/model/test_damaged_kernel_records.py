"""Damaged ``kernel_records``: refused when read, counted as malformed by the session, and the
intact batches around them kept."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from iket_tui.model.session import Session
from iket_tui.protocol import messages as m
from iket_tui.ring.layout import FLAG_PAYLOAD_EVERY_EVENT, layout_by_id
from iket_tui.ring.wire import RecordsError, records_from_message
from iket_tui.sources.reading import read_recording

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"


def _h200() -> tuple[m.Message, m.Message, m.Message]:
    messages, _ = read_recording(EXAMPLE)
    tracing, module, records = (
        msg for msg in messages if msg["type"] in (m.KERNEL_TRACING, m.KERNEL_MODULE, m.KERNEL_RECORDS)
    )
    return tracing, module, records


TRACING, MODULE, RECORDS = _h200()


def _chunk_lie(field: str, value: int, **more: int) -> dict[str, Any]:
    layout = layout_by_id(RECORDS["layout"])
    chunks = np.frombuffer(RECORDS["chunks"], dtype=layout.drained_dtype).copy()
    for name, changed in {field: value, **more}.items():
        chunks[name][5] = changed
    return {"chunks": chunks.tobytes()}


DAMAGE: dict[str, dict[str, Any]] = {
    "warp_slots-infinite": {"warp_slots": math.inf},
    "warp_slots-huge": {"warp_slots": 2**70},
    "warp_slots-negative": {"warp_slots": -3},
    "warp_slots-zero": {"warp_slots": 0},
    "warp_slots-fraction": {"warp_slots": 0.5},
    "warp_slots-bool": {"warp_slots": True},
    "counter-negative": {"counters": {**RECORDS["counters"], "events_read": -5}},
    "counter-beyond-int64": {"counters": {**RECORDS["counters"], "events_lost": 2**64 - 1}},
    "counter-float": {"counters": {**RECORDS["counters"], "torn": 0.0}},
    "counters-missing": {"counters": None},
    "count-lies": {"count": RECORDS["count"] - 1},
    "count-negative": {"count": -1, "chunks": b""},
    "count-float": {"count": float(RECORDS["count"])},
    "layout-unknown": {"layout": 12345},
    "layout-float": {"layout": float(RECORDS["layout"])},
    "layout-list": {"layout": [RECORDS["layout"]]},
    "ring_id-text": {"ring_id": "ring"},
    "ring_id-infinite": {"ring_id": math.inf},
    "ring_id-float": {"ring_id": 1.5},
    "ring_id-negative": {"ring_id": -1},
    "chunks-text": {"chunks": "x" * len(RECORDS["chunks"])},
    "chunk-n_events-beyond-its-words": _chunk_lie("n_events", 255),
    "chunk-payloads-overlap-events": _chunk_lie("n_payloads", 200),
    "chunk-id_bits-beyond-8": _chunk_lie("id_bits", 200),
    "chunk-id_bits-below-5": _chunk_lie("id_bits", 0),
    "chunk-segment-beyond-255-sms": _chunk_lie("segment", 64 * 256),
    "chunk-a-payload-word-for-each-of-27-events": _chunk_lie(
        "n_events", 27, n_payloads=0, flags=FLAG_PAYLOAD_EVERY_EVENT
    ),
}


def test_an_intact_batch_is_read() -> None:
    records = records_from_message(RECORDS)
    assert len(records.chunks) == RECORDS["count"] == 3840
    assert records.warp_slots == 64 and records.ring_id == RECORDS["ring_id"]


@pytest.mark.parametrize("change", DAMAGE.values(), ids=DAMAGE.keys())
def test_a_batch_with_impossible_fields_is_refused_in_one_line(change: dict[str, Any]) -> None:
    with pytest.raises(RecordsError) as caught:
        records_from_message({**RECORDS, **change})
    assert "\n" not in str(caught.value)
    assert str(caught.value).startswith("kernel_records")


@pytest.mark.parametrize("change", DAMAGE.values(), ids=DAMAGE.keys())
def test_the_session_counts_a_damaged_batch_and_keeps_the_intact_ones(change: dict[str, Any]) -> None:
    damaged = {**RECORDS, **change}
    later = {**RECORDS, "t_ns": RECORDS["t_ns"] + 1}
    session = Session()
    session.apply([TRACING, MODULE, RECORDS, damaged, later])
    assert session.counters.malformed == 1
    assert session.kernels.batches == 2
    assert session.kernels.events_received == 2 * 126_720
    assert [launch.records for launch in session.kernels.newest_first()] == [2 * 42_240] * 3


def test_a_damaged_batch_waiting_for_its_table_is_never_held() -> None:
    session = Session()
    session.apply([{**RECORDS, "warp_slots": math.inf}, RECORDS])
    assert session.counters.malformed == 1
    assert session.kernels.waiting_events == 126_720
    session.apply([MODULE])
    assert session.kernels.waiting_events == 0
    assert [launch.records for launch in session.kernels.newest_first()] == [42_240] * 3


def test_a_batch_mixing_chunks_with_and_without_a_payload_word_per_event_decodes() -> None:
    """A drain writes one kind of chunk, but a batch of both is not impossible: one chunk with a
    payload word per event beside another with more events than that kind holds decodes
    without reading outside any chunk (a fuzzed input once raised IndexError there, after the
    batch had been counted)."""
    layout = layout_by_id(RECORDS["layout"])
    chunks = np.frombuffer(RECORDS["chunks"], dtype=layout.drained_dtype).copy()
    chunks["flags"][5] |= FLAG_PAYLOAD_EVERY_EVENT
    before = int(chunks["n_events"][6])
    chunks["n_events"][6], chunks["n_payloads"][6] = 30, 0
    session = Session()
    session.apply([TRACING, MODULE, {**RECORDS, "chunks": chunks.tobytes()}])
    assert session.counters.malformed == 0
    assert session.kernels.events_received == 126_720 - before + 30
