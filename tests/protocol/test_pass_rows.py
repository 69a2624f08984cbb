"""Pass rows (protocol 1.1): pass events inside a batch as positional arrays, and batches
spread over several frames when they exceed a frame's limit."""

from __future__ import annotations

import json
from typing import Any

import msgpack
import pytest

from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import MessageDecoder, ProtocolError, encode_batch, encode_message
from iket_tui.protocol.frames import HEADER, MAX_FRAME_BODY, FrameDecoder, FrameError, encode_frame

COMMON: dict[str, Any] = {"compile": 3, "context": 1, "depth": 1, "parent": 0, "phase": "pipeline_cuda"}


def _pass_events() -> list[m.Message]:
    return [
        m.pass_start(name="tl.LowerTileOp", seq=0, t_ns=100, **{**COMMON, "depth": 0, "parent": None}),
        m.pass_start(name="tl.Simplify", seq=1, t_ns=110, **COMMON),
        m.pass_end(name="tl.Simplify", seq=1, t_ns=150, duration_ns=40, **COMMON),
        m.pass_incomplete(name="tl.LayoutInference", seq=2, t_ns=190, error="InternalError: conflict", **COMMON),
        m.pass_incomplete(name="tl.LetInline", seq=3, t_ns=195, error=None, **COMMON),
    ]


def _stream() -> list[m.Message]:
    """Pass events with other messages between them, as the agent batches them."""
    events = _pass_events()
    return [
        m.compile_begin(compile=3, label="stage=jit-lower, kernel=add", kernel="add", target="cuda", t_ns=90),
        *events[:3],
        m.heartbeat(t_ns=160, produced=4, dropped=0, open_passes=1, observer_errors=2),
        *events[3:],
    ]


def _bodies(data: bytes) -> list[Any]:
    frames = FrameDecoder()
    frames.feed(data)
    return [msgpack.unpackb(body) for body in frames]


def _batch_frame(items: list[Any]) -> bytes:
    return encode_frame(msgpack.packb({"type": m.BATCH, "messages": items}))


def test_a_batch_carries_pass_events_as_rows_in_the_documented_order() -> None:
    stream = _stream()
    [body] = _bodies(encode_batch(stream))
    items = body["messages"]
    assert [type(item) for item in items] == [dict, list, list, list, dict, list, list]
    assert items[2] == ["pass_start", 3, 1, "tl.Simplify", 1, 1, 0, "pipeline_cuda", 110, None]
    assert items[3] == ["pass_end", 3, 1, "tl.Simplify", 1, 1, 0, "pipeline_cuda", 150, 40]
    assert items[5][-1] == "InternalError: conflict" and items[6][-1] is None
    assert items[4] == stream[4]


def test_rows_are_half_the_bytes_of_maps() -> None:
    events = [
        m.pass_end(name=f"tl.Pass{seq}", seq=seq, t_ns=1_700_000_000_000 + seq, duration_ns=12_345, **COMMON)
        for seq in range(64)
    ]
    as_maps = encode_frame(msgpack.packb({"type": m.BATCH, "messages": events}))
    assert len(encode_batch(events)) < 0.6 * len(as_maps)


def test_a_reader_sees_the_maps_the_writer_sent_field_for_field() -> None:
    stream = _stream()
    decoder = MessageDecoder()
    decoder.feed(encode_batch(stream))
    got = decoder.drain()
    assert got == stream
    assert [json.dumps(msg) for msg in got] == [json.dumps(msg) for msg in stream]  # same keys, same order


def test_a_reader_that_keeps_rows_gets_rows_and_the_other_messages_as_maps() -> None:
    stream = _stream()
    data = encode_batch(stream)
    for read in (lambda d: d.drain(), lambda d: list(d)):
        decoder = MessageDecoder(rows=True)
        decoder.feed(data)
        got = read(decoder)
        assert [m.message_of(item) if isinstance(item, list) else item for item in got] == stream
        assert [isinstance(item, list) for item in got] == [msg["type"] in m.PASS_EVENTS for msg in stream]
        assert [m.t_ns_of(item) for item in got] == [msg["t_ns"] for msg in stream]


def test_row_of_and_message_of_are_inverse() -> None:
    for msg in _pass_events():
        row = m.row_of(msg)
        assert row is not None and len(row) == m.PASS_ROW_LEN
        assert m.message_of(row) == msg


def test_maps_a_row_cannot_say_exactly_stay_maps() -> None:
    event = _pass_events()[2]
    with_more = {**event, "note": "a field of a later minor version"}
    without_phase = {key: value for key, value in event.items() if key != "phase"}
    hello = m.hello(role="agent", pid=1, start_time=2, software_version="x", capabilities=[])
    for msg in (with_more, without_phase, hello):
        assert m.row_of(msg) is None
    [body] = _bodies(encode_batch([with_more, without_phase, event]))
    assert body["messages"][:2] == [with_more, without_phase]
    assert isinstance(body["messages"][2], list)


def test_a_lone_pass_event_goes_as_a_map_in_its_own_frame() -> None:
    event = _pass_events()[0]
    assert encode_batch([event]) == encode_message(event)
    assert encode_batch([m.row_of(event)]) == encode_message(event)  # type: ignore[list-item]


def test_pass_events_given_as_rows_are_written_as_the_maps_would_be() -> None:
    """The agent builds pass events as rows (tuples): the bytes are those of the maps they stand
    for, as rows for a reader of protocol 1.1 and as maps for an older one."""
    stream = _stream()
    as_lists: list[m.Item] = [m.row_of(msg) or msg for msg in stream]
    as_tuples = [tuple(item) if isinstance(item, list) else item for item in as_lists]
    assert any(isinstance(item, tuple) for item in as_tuples)
    for given in (as_lists, as_tuples):
        assert encode_batch(given) == encode_batch(stream)
        assert encode_batch(given, rows=False) == encode_batch(stream, rows=False)
        decoder = MessageDecoder()
        decoder.feed(encode_batch(given, rows=False))
        assert decoder.drain() == stream


@pytest.mark.parametrize(
    ("item", "why"),
    [
        (["pass_end", 3, 1, "tl.Simplify", 1, 1, 0, "pipeline_cuda", 150], "row of 9 items"),
        (["pass_start", 3, 1, "tl.X", 1, 1, 0, None, 150, None, "more"], "row of 11 items"),
        ([], "not a message"),
        ([7, 3, 1, "tl.X", 1, 1, 0, None, 150, None], "not a message"),
        ([["pass_start"], 3, 1, "tl.X", 1, 1, 0, None, 150, None], "not a message"),
    ],
    ids=["short", "long", "empty", "int-type", "unhashable-type"],
)
def test_a_row_of_the_wrong_shape_is_refused_live_and_skipped_in_a_recording(item: list[Any], why: str) -> None:
    good = _pass_events()[1]
    frame = _batch_frame([good, item, m.row_of(good)])
    for rows in (False, True):
        strict = MessageDecoder(rows=rows)
        strict.feed(frame)
        with pytest.raises(ProtocolError, match=why):
            strict.drain()
        lenient = MessageDecoder(resync=True, rows=rows)
        lenient.feed(frame)
        got = lenient.drain()
        assert [m.message_of(x) if isinstance(x, list) else x for x in got] == [good, good]
        assert (lenient.undecodable, lenient.undecodable_items, lenient.unknown) == (0, 1, 0)


def test_a_row_of_a_type_this_version_does_not_know_is_skipped_and_counted() -> None:
    good = _pass_events()[1]
    future = ["kernel_mark", 3, 1, "x", 0, 0, None, None, 5]
    decoder = MessageDecoder(rows=True)
    decoder.feed(_batch_frame([future, m.row_of(good)]))
    assert decoder.drain() == [m.row_of(good)]
    assert (decoder.unknown, decoder.undecodable) == (1, 0)


def test_row_fields_are_left_to_the_reader_to_validate() -> None:
    odd = ["pass_start", "three", 1, None, 0, 0, None, None, 5, None]
    decoder = MessageDecoder(rows=True)
    decoder.feed(_batch_frame([odd, odd]))
    assert decoder.drain() == [odd, odd]


def _records(t_ns: int, size: int) -> m.Message:
    return {"type": m.KERNEL_RECORDS, "t_ns": t_ns, "chunks": b"\x5a" * size}


def test_a_batch_beyond_a_frames_limit_is_spread_over_several_frames_in_order() -> None:
    events = _pass_events()
    big = 6 * 1024 * 1024
    stream = [events[0], _records(1, big), _records(2, big), events[1], events[2], _records(3, big), events[3]]
    data = encode_batch(stream)
    frames = FrameDecoder()
    frames.feed(data)
    bodies = list(frames)
    assert len(bodies) == 2
    assert all(len(body) <= MAX_FRAME_BODY for body in bodies)
    assert frames.pending == 0
    decoder = MessageDecoder()
    decoder.feed(data)
    assert decoder.drain() == stream


def test_a_run_of_one_message_in_a_split_batch_is_a_plain_frame() -> None:
    huge = 9 * 1024 * 1024
    stream = [_records(1, huge), _records(2, huge)]
    data = encode_batch(stream)
    assert data == encode_message(stream[0]) + encode_message(stream[1])
    length, _ = HEADER.unpack_from(data)
    assert length <= MAX_FRAME_BODY


def test_a_single_message_beyond_a_frames_limit_is_an_error() -> None:
    with pytest.raises(FrameError, match="exceeds"):
        encode_batch([_pass_events()[0], _records(1, MAX_FRAME_BODY)])


def test_a_writer_for_a_reader_older_than_rows_sends_maps() -> None:
    stream = _stream()
    [body] = _bodies(encode_batch(stream, rows=False))
    assert body["messages"] == stream
