"""Framing and message decoding: what a reader accepts, rejects and skips."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import MessageDecoder, ProtocolError, check_hello, encode_batch, encode_message
from iket_tui.protocol.frames import HEADER, FrameDecoder, FrameError, encode_frame


def _pass_events(n: int) -> list[m.Message]:
    return [
        m.pass_start(compile=1, context=0, name=f"tl.Pass{i}", seq=i, depth=0, parent=None, phase=None, t_ns=i)
        for i in range(n)
    ]


def test_messages_survive_any_chunking() -> None:
    sent = _pass_events(50)
    stream = b"".join(encode_message(msg) for msg in sent)
    for chunk in (1, 3, 7, 64, len(stream)):
        decoder = MessageDecoder()
        got: list[m.Message] = []
        for i in range(0, len(stream), chunk):
            decoder.feed(stream[i : i + chunk])
            got.extend(decoder)
        assert got == sent
        assert decoder.frames.pending == 0


def test_strict_decoder_rejects_garbage_before_decoding() -> None:
    decoder = MessageDecoder()
    decoder.feed(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    with pytest.raises(ProtocolError, match=r"exceeds|checksum"):
        list(decoder)


def test_strict_decoder_rejects_a_corrupted_frame() -> None:
    frame = bytearray(encode_message(_pass_events(1)[0]))
    frame[-1] ^= 0xFF
    decoder = MessageDecoder()
    decoder.feed(frame)
    with pytest.raises(ProtocolError, match="checksum"):
        list(decoder)


def test_resync_skips_damage_and_keeps_the_frames_around_it() -> None:
    a, b, c = _pass_events(3)
    damaged = bytearray(encode_message(b))
    damaged[HEADER.size + 2] ^= 0x55
    decoder = MessageDecoder(resync=True)
    decoder.feed(encode_message(a) + b"\x00garbage\xff" + bytes(damaged) + encode_message(c))
    assert [*decoder, *decoder.finish()] == [a, c]
    assert decoder.frames.skipped_bytes == len(b"\x00garbage\xff") + len(damaged)


def test_unknown_types_are_skipped_and_counted() -> None:
    decoder = MessageDecoder()
    future = {"type": "kernel_batch_v9", "payload": b"\x00" * 8}
    known = _pass_events(1)[0]
    decoder.feed(encode_frame(msgpack.packb(future)) + encode_message(known))
    assert list(decoder) == [known]
    assert decoder.unknown == 1


@pytest.mark.parametrize(
    "body",
    [
        msgpack.packb([1, 2, 3]),
        msgpack.packb({"no_type": 1}),
        msgpack.packb({1: "int key"}),
        b"\xc1",  # never-used msgpack byte
        msgpack.packb({"type": "pass_start", "name": "x" * 10})[:-3],
    ],
    ids=["array", "no-type", "int-key", "reserved-byte", "short-body"],
)
def test_bodies_that_are_not_messages(body: bytes) -> None:
    strict = MessageDecoder()
    strict.feed(encode_frame(body))
    with pytest.raises(ProtocolError):
        list(strict)
    lenient = MessageDecoder(resync=True)
    lenient.feed(encode_frame(body))
    assert list(lenient) == []
    assert lenient.undecodable == 1


def test_decode_limits_refuse_huge_containers() -> None:
    decoder = MessageDecoder()
    decoder.feed(encode_frame(msgpack.packb({"type": "pass_start", "x": list(range(2_000_000))})))
    with pytest.raises(ProtocolError, match="undecodable"):
        list(decoder)


def test_oversized_frame_is_refused_without_buffering_it() -> None:
    decoder = FrameDecoder(max_body=1024)
    decoder.feed(HEADER.pack(1 << 30, 0))
    with pytest.raises(FrameError, match="exceeds"):
        list(decoder)


def test_hello_version_check_names_both_versions() -> None:
    hello = m.hello(role="agent", pid=1, start_time=2, software_version="9", capabilities=[])
    check_hello(hello, expect_role="agent")
    hello["proto"] = [2, 0]
    with pytest.raises(ProtocolError, match=r"peer speaks 2\.0, this iket-tui speaks 1\.1"):
        check_hello(hello, expect_role="agent")
    with pytest.raises(ProtocolError, match="expected an 'agent'"):
        check_hello(
            m.hello(role="client", pid=1, start_time=2, software_version="9", capabilities=[]), expect_role="agent"
        )


@given(st.binary(max_size=512))
def test_arbitrary_bytes_never_crash_a_resyncing_reader(data: bytes) -> None:
    decoder = MessageDecoder(resync=True)
    decoder.feed(data)
    list(decoder)
    list(decoder.finish())
    assert decoder.frames.consumed + decoder.frames.pending == len(data)


def test_batches_are_flattened_in_order() -> None:
    events = _pass_events(5)
    stream = encode_batch(events[:3]) + encode_message(events[3]) + encode_batch(events[4:])
    decoder = MessageDecoder()
    decoder.feed(stream)
    assert list(decoder) == events
    again = MessageDecoder()
    again.feed(stream)
    assert again.drain() == events


def test_a_batch_holding_junk_is_refused_or_skipped() -> None:
    good = _pass_events(1)[0]
    body = msgpack.packb({"type": "batch", "messages": [good, 7, {"type": "from_the_future"}]})
    strict = MessageDecoder()
    strict.feed(encode_frame(body))
    with pytest.raises(ProtocolError, match="not a message"):
        strict.drain()
    lenient = MessageDecoder(resync=True)
    lenient.feed(encode_frame(body))
    assert lenient.drain() == [good]
    assert (lenient.undecodable, lenient.undecodable_items, lenient.unknown) == (0, 1, 1)


@given(st.lists(st.sampled_from(["frame", "garbage", "damaged", "batch", "future"]), max_size=12))
def test_drain_and_iteration_agree_on_any_stream(parts: list[str]) -> None:
    events = iter(_pass_events(40))
    stream = b""
    for part in parts:
        if part == "frame":
            stream += encode_message(next(events))
        elif part == "garbage":
            stream += b"\x00\x00\x00\x05junk!"
        elif part == "damaged":
            frame = bytearray(encode_message(next(events)))
            frame[-2] ^= 1
            stream += bytes(frame)
        elif part == "batch":
            stream += encode_batch([next(events), next(events)])
        else:
            stream += encode_frame(msgpack.packb({"type": "from_the_future"}))
    one, two = MessageDecoder(resync=True), MessageDecoder(resync=True)
    one.feed(stream)
    two.feed(stream)
    assert [*one, *one.finish()] == [*two.drain(), *two.finish()]
    assert (one.unknown, one.undecodable, one.undecodable_items, one.frames.skipped_bytes) == (
        two.unknown,
        two.undecodable,
        two.undecodable_items,
        two.frames.skipped_bytes,
    )


def test_a_live_drain_returns_what_came_before_the_damage_then_raises() -> None:
    good = _pass_events(3)
    bad_body = encode_frame(msgpack.packb([1, 2]))
    for tail, error in ((b"\xff" * 12, "exceeds"), (bad_body, "not a map")):
        decoder = MessageDecoder()
        decoder.feed(b"".join(encode_message(msg) for msg in good) + tail)
        assert decoder.drain() == good
        with pytest.raises(ProtocolError, match=error):
            decoder.drain()
        with pytest.raises(ProtocolError, match=error):
            list(decoder)
    frames = FrameDecoder()
    frames.feed(encode_message(good[0]) + b"\xff" * 12)
    assert len(frames.drain()) == 1
    with pytest.raises(FrameError, match="exceeds"):
        frames.drain()
