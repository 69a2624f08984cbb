"""Messages to frames and back, with limits on every decode."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Generic, Literal, TypeVar, overload

import msgpack

from iket_tui.protocol.frames import MAX_FRAME_BODY, FrameDecoder, FrameError, encode_frame
from iket_tui.protocol.limits import MAX_ARRAY, UNPACK_LIMITS
from iket_tui.protocol.messages import (
    BATCH,
    HELLO,
    KNOWN_TYPES,
    PASS_ROW_EXTRA,
    PASS_ROW_LEN,
    PROTOCOL_VERSION,
    Item,
    Message,
    PassTuple,
    as_message,
    message_of,
    row_of,
)

MAX_BATCH_ITEMS = MAX_ARRAY

_LIMITS = UNPACK_LIMITS

_BATCH_HEAD = b"\x82" + msgpack.packb("type") + msgpack.packb(BATCH) + msgpack.packb("messages")
_ARRAY_HEAD_MAX = 5  # bytes of the largest msgpack array header


class ProtocolError(Exception):
    """The peer or file broke the protocol; the message is a one-line explanation."""


def encode_message(msg: Message) -> bytes:
    """One message as one frame."""
    return encode_frame(msgpack.packb(msg, use_bin_type=True))


def encode_batch(msgs: Sequence[Item | PassTuple], *, rows: bool = True) -> bytes:
    """Several messages as ``batch`` frames, pass events as pass rows (as maps with
    ``rows=False``, for a reader older than protocol 1.1); one message alone goes in a frame of
    its own, as a map. A pass event may be given as a pass row already (a list, or a tuple as the
    agent builds them), which is written as it is.

    Messages that together exceed a frame's limit are spread over as many frames as needed, in
    order; a single message beyond the limit raises :class:`FrameError`.
    """
    if len(msgs) == 1:
        return encode_message(as_message(msgs[0]))
    items: list[Any]
    if rows:
        items = [(row_of(msg) or msg) if isinstance(msg, dict) else msg for msg in msgs]
    else:
        items = [as_message(msg) for msg in msgs]
    if len(items) <= MAX_BATCH_ITEMS:
        body = msgpack.packb({"type": BATCH, "messages": items}, use_bin_type=True)
        if len(body) <= MAX_FRAME_BODY:
            return encode_frame(body)
    return b"".join(_split_batch(msgs, items))


def _split_batch(msgs: Sequence[Item | PassTuple], items: list[Any]) -> Iterator[bytes]:
    """The frames of a batch too large for one: consecutive runs of messages that each fit."""
    packer = msgpack.Packer(use_bin_type=True)
    room = MAX_FRAME_BODY - len(_BATCH_HEAD) - _ARRAY_HEAD_MAX
    first = 0
    run: list[bytes] = []
    size = 0
    for index, item in enumerate(items):
        packed = packer.pack(item)
        if run and (size + len(packed) > room or len(run) == MAX_BATCH_ITEMS):
            yield _batch_frame(msgs, first, run, packer)
            first, run, size = index, [], 0
        run.append(packed)
        size += len(packed)
    if run:
        yield _batch_frame(msgs, first, run, packer)


def _batch_frame(msgs: Sequence[Item | PassTuple], first: int, run: list[bytes], packer: Any) -> bytes:
    if len(run) == 1:
        return encode_message(as_message(msgs[first]))
    return encode_frame(b"".join((_BATCH_HEAD, packer.pack_array_header(len(run)), *run)))


def decode_body(body: bytes) -> Message:
    """One frame body as a message map; raises :class:`ProtocolError` on anything else."""
    try:
        obj = msgpack.unpackb(body, **_LIMITS)
    except Exception as exc:  # msgpack raises several unrelated types on bad input
        raise ProtocolError(f"undecodable message body ({type(exc).__name__})") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        raise ProtocolError("message is not a map with a string 'type'")
    return obj


_T = TypeVar("_T", Message, Item)


class MessageDecoder(Generic[_T]):
    """Feed bytes, iterate messages of known types.

    Messages of unknown types (a newer peer) are skipped and counted in :attr:`unknown`. In
    resync mode (recordings) damaged frames and undecodable bodies are skipped and counted;
    otherwise they raise :class:`ProtocolError`.

    Pass rows inside a batch come out as the maps they stand for; with ``rows=True`` they come
    out as they are (lists), for readers that want to build no map per pass event. Either way
    a row is checked for its shape only (its length and a pass event type); its fields are for
    the reader to validate, as a map's are.
    """

    @overload
    def __init__(self: MessageDecoder[Message], *, resync: bool = False, rows: Literal[False] = False) -> None: ...

    @overload
    def __init__(self: MessageDecoder[Item], *, resync: bool = False, rows: bool) -> None: ...

    def __init__(self, *, resync: bool = False, rows: bool = False) -> None:
        self.frames = FrameDecoder(resync=resync)
        self._resync = resync
        self._rows = rows
        self.unknown = 0
        self.undecodable = 0

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self.frames.feed(data)

    def __iter__(self) -> Iterator[_T]:
        try:
            yield from self._messages(self.frames)
        except FrameError as exc:
            raise ProtocolError(str(exc)) from None

    def drain(self) -> list[_T]:
        """Every complete message now buffered; the same as ``list(self)``, faster."""
        try:
            bodies = self.frames.drain()
        except FrameError as exc:
            raise ProtocolError(str(exc)) from None
        out: list[Any] = []
        append = out.append
        unpackb = msgpack.unpackb
        known = KNOWN_TYPES
        for body in bodies:
            try:
                msg = unpackb(body, **_LIMITS)
                kind = msg["type"]
            except Exception:
                msg = None
                kind = None
            if type(msg) is dict and type(kind) is str and kind in known:
                if kind == BATCH:
                    self._flatten(msg, out)
                else:
                    append(msg)
            else:
                decoded = self._decode(body)
                if decoded is not None:
                    append(decoded)
        return out

    def finish(self) -> Iterator[_T]:
        """At end of stream: every remaining complete message (see :meth:`FrameDecoder.finish`)."""
        yield from self._messages(self.frames.finish())

    def _messages(self, bodies: Iterator[bytes]) -> Iterator[Any]:
        for body in bodies:
            msg = self._decode(body)
            if msg is None:
                continue
            if msg["type"] == BATCH:
                out: list[Any] = []
                self._flatten(msg, out)
                yield from out
            else:
                yield msg

    def _decode(self, body: bytes) -> Message | None:
        try:
            msg = decode_body(body)
        except ProtocolError:
            if not self._resync:
                raise
            self.undecodable += 1
            return None
        if msg["type"] not in KNOWN_TYPES:
            self.unknown += 1
            return None
        return msg

    def _flatten(self, batch: Message, out: list[Any]) -> None:
        """Append the messages inside a ``batch`` to ``out``, each checked like a message of
        its own frame (and a pass row for its shape)."""
        inner = batch.get("messages")
        if type(inner) is not list:
            self._bad("batch without a 'messages' array")
            return
        append = out.append
        keep_rows = self._rows
        row_types = PASS_ROW_EXTRA
        row_len = PASS_ROW_LEN
        for msg in inner:
            if type(msg) is list and len(msg) == row_len and type(msg[0]) is str and msg[0] in row_types:
                append(msg if keep_rows else message_of(msg))
            elif type(msg) is dict and type(kind := msg.get("type")) is str and kind in KNOWN_TYPES and kind != BATCH:
                append(msg)
            else:
                self._odd_item(msg)

    def _odd_item(self, item: Any) -> None:
        """A batch item that is neither a known message nor a pass row: unknown or bad."""
        if type(item) is dict:
            kind = item.get("type")
            if type(kind) is str and kind != BATCH:
                self.unknown += 1
                return
        elif type(item) is list and item and type(item[0]) is str:
            if item[0] not in PASS_ROW_EXTRA:
                self.unknown += 1  # a row form of a later minor version
                return
            self._bad(f"a {item[0]} row of {len(item)} items, not {PASS_ROW_LEN}")
            return
        self._bad("batch holds something that is not a message")

    def _bad(self, why: str) -> None:
        if not self._resync:
            raise ProtocolError(why)
        self.undecodable += 1


def check_hello(msg: Message, *, expect_role: str) -> None:
    """Validate a peer's hello: right role, same protocol major version."""
    if msg.get("type") != HELLO:
        raise ProtocolError(f"expected a hello, got {msg.get('type')!r}")
    proto = msg.get("proto")
    if not (isinstance(proto, list) and len(proto) == 2 and all(isinstance(v, int) for v in proto)):
        raise ProtocolError("hello without a valid protocol version")
    if proto[0] != PROTOCOL_VERSION[0]:
        ours = ".".join(map(str, PROTOCOL_VERSION))
        raise ProtocolError(
            f"protocol version mismatch: peer speaks {proto[0]}.{proto[1]}, this iket-tui speaks {ours}"
        )
    if msg.get("role") != expect_role:
        raise ProtocolError(f"peer is a {msg.get('role')!r}, expected an {expect_role!r}")
    for key in ("pid", "start_time"):
        if not isinstance(msg.get(key), int):
            raise ProtocolError(f"hello without an integer {key!r}")
