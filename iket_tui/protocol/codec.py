"""Messages to frames and back, with limits on every decode."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Generic, Literal, TypeVar, overload

import msgpack

from iket_tui.protocol.frames import MAX_FRAME_BODY, FrameDecoder, FrameError, encode_frame
from iket_tui.protocol.limits import MAX_ARRAY, MAX_FRAME_OBJECTS, OBJECTS_CHECKED_ABOVE, UNPACK_LIMITS
from iket_tui.protocol.messages import (
    BATCH,
    HELLO,
    KNOWN_TYPES,
    PASS_ROW_EXTRA,
    PASS_ROW_LEN,
    PROTOCOL_VERSION,
    UNDELIVERED_TYPES,
    Item,
    Message,
    PassTuple,
    as_message,
    message_of,
    row_of,
)

MAX_BATCH_ITEMS = MAX_ARRAY

_BATCH_HEAD = b"\x82" + msgpack.packb("type") + msgpack.packb(BATCH) + msgpack.packb("messages")
_ARRAY_HEAD_MAX = 5  # bytes of the largest msgpack array header
_BATCH_OBJECTS = 6  # the batch map, its two keys and two values (one the messages array)


class ProtocolError(Exception):
    """The peer or file broke the protocol; the message is a one-line explanation."""


class _Refused(ValueError):
    """A body that msgpack would decode but the protocol does not allow."""


_NOT_A_STRING_KEY = "a map key that is not a string"


def _string_keys(entries: dict[Any, Any]) -> dict[Any, Any]:
    # msgpack's strict_map_key already refuses every key but str and bytes.
    if bytes in map(type, entries):
        raise _Refused(_NOT_A_STRING_KEY)
    return entries


class _ObjectCount:
    """Counts what a body decodes to as msgpack builds it, bottom up, and stops it at
    :data:`MAX_FRAME_OBJECTS` (before the rest of it is ever built)."""

    __slots__ = ("objects",)

    def __init__(self) -> None:
        self.objects = 0

    def array(self, items: list[Any]) -> list[Any]:
        self.objects += 1 + len(items)
        if self.objects > MAX_FRAME_OBJECTS:
            raise _Refused(f"a frame of more than {MAX_FRAME_OBJECTS:,} objects")
        return items

    def map(self, entries: dict[Any, Any]) -> dict[Any, Any]:
        self.objects += 1 + 2 * len(entries)
        if self.objects > MAX_FRAME_OBJECTS:
            raise _Refused(f"a frame of more than {MAX_FRAME_OBJECTS:,} objects")
        return _string_keys(entries)


def _unpack(body: bytes) -> Any:
    """A body decoded within the protocol's limits: msgpack's, string keys only, and at most
    :data:`MAX_FRAME_OBJECTS` objects (counted only where the body is large enough to hold more)."""
    if len(body) <= OBJECTS_CHECKED_ABOVE:
        return msgpack.unpackb(body, object_hook=_string_keys, **UNPACK_LIMITS)
    count = _ObjectCount()
    return msgpack.unpackb(body, object_hook=count.map, list_hook=count.array, **UNPACK_LIMITS)


def objects_in(value: Any) -> int:
    """What ``value`` counts against :data:`MAX_FRAME_OBJECTS` once decoded: 1 for each array
    or map, plus its items, or twice its entries, and so on inside them."""
    count = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            count += 1 + 2 * len(item)
            stack.extend(inner for inner in item.values() if isinstance(inner, dict | list | tuple))
        elif isinstance(item, list | tuple):
            count += 1 + len(item)
            stack.extend(inner for inner in item if isinstance(inner, dict | list | tuple))
    return count


def encode_message(msg: Message) -> bytes:
    """One message as one frame."""
    return encode_frame(msgpack.packb(msg, use_bin_type=True))


def encode_batch(msgs: Sequence[Item | PassTuple], *, rows: bool = True) -> bytes:
    """Several messages as ``batch`` frames, pass events as pass rows (as maps with
    ``rows=False``, for a reader older than protocol 1.1); one message alone goes in a frame of
    its own, as a map. A pass event may be given as a pass row already (a list, or a tuple as the
    agent builds them), which is written as it is.

    Messages that together exceed a frame's limits (its bytes, or the objects it decodes to) are
    spread over as many frames as needed, in order; a single message beyond the byte limit raises
    :class:`FrameError`.
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
        if len(body) <= OBJECTS_CHECKED_ABOVE or (
            len(body) <= MAX_FRAME_BODY and objects_in({"type": BATCH, "messages": items}) <= MAX_FRAME_OBJECTS
        ):
            return encode_frame(body)
    return b"".join(_split_batch(msgs, items))


def _split_batch(msgs: Sequence[Item | PassTuple], items: list[Any]) -> Iterator[bytes]:
    """The frames of a batch too large for one: consecutive runs of messages that each fit."""
    packer = msgpack.Packer(use_bin_type=True)
    room = MAX_FRAME_BODY - len(_BATCH_HEAD) - _ARRAY_HEAD_MAX
    room_objects = MAX_FRAME_OBJECTS - _BATCH_OBJECTS
    first = 0
    run: list[bytes] = []
    size = objects = 0
    for index, item in enumerate(items):
        packed = packer.pack(item)
        cost = 1 + objects_in(item)
        if run and (size + len(packed) > room or objects + cost > room_objects or len(run) == MAX_BATCH_ITEMS):
            yield _batch_frame(msgs, first, run, packer)
            first, run, size, objects = index, [], 0, 0
        run.append(packed)
        size += len(packed)
        objects += cost
    if run:
        yield _batch_frame(msgs, first, run, packer)


def _batch_frame(msgs: Sequence[Item | PassTuple], first: int, run: list[bytes], packer: Any) -> bytes:
    if len(run) == 1:
        return encode_message(as_message(msgs[first]))
    return encode_frame(b"".join((_BATCH_HEAD, packer.pack_array_header(len(run)), *run)))


def decode_body(body: bytes) -> Message:
    """One frame body as a message map; raises :class:`ProtocolError` on anything else."""
    try:
        obj = _unpack(body)
    except _Refused as exc:
        raise ProtocolError(f"undecodable message body ({exc})") from None
    except Exception as exc:  # msgpack raises several unrelated types on bad input
        raise ProtocolError(f"undecodable message body ({type(exc).__name__})") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        raise ProtocolError("message is not a map with a string 'type'")
    return obj


_T = TypeVar("_T", Message, Item)


class MessageDecoder(Generic[_T]):
    """Feed bytes, iterate messages of known types.

    Messages of unknown types (a newer peer) are skipped and counted in :attr:`unknown`. In
    resync mode (recordings) damaged frames are skipped (their bytes counted by the frame
    decoder), undecodable bodies are skipped and counted in :attr:`undecodable` (frames), and
    items of a batch that are neither messages nor pass rows in :attr:`undecodable_items`;
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
        self.undecodable_items = 0
        self._failure: ProtocolError | None = None  # strict: the error a drain returned messages before

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self.frames.feed(data)

    def __iter__(self) -> Iterator[_T]:
        if self._failure is not None:
            raise self._failure
        try:
            yield from self._messages(self.frames)
        except FrameError as exc:
            raise ProtocolError(str(exc)) from None

    def drain(self) -> list[_T]:
        """Every complete message now buffered; the same as ``list(self)``, faster. In strict mode
        the messages before a bad frame are returned first, and the next call raises."""
        if self._failure is not None:
            raise self._failure
        try:
            bodies = self.frames.drain()
        except FrameError as exc:
            raise ProtocolError(str(exc)) from None
        out: list[Any] = []
        append = out.append
        unpack = _unpack
        known = KNOWN_TYPES
        for body in bodies:
            try:
                msg = unpack(body)
                kind = msg["type"]
            except Exception:
                msg = None
                kind = None
            kept = len(out)
            try:
                if type(msg) is dict and type(kind) is str and kind in known:
                    if kind == BATCH:
                        self._flatten(msg, out)
                    else:
                        append(msg)
                else:
                    decoded = self._decode(body)
                    if decoded is not None:
                        append(decoded)
            except ProtocolError as exc:
                del out[kept:]  # a frame is read whole or not at all
                if not out:
                    raise
                self._failure = exc
                break
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
            if msg["type"] not in UNDELIVERED_TYPES:
                self.unknown += 1
            return None
        return msg

    def _flatten(self, batch: Message, out: list[Any]) -> None:
        """Append the messages inside a ``batch`` to ``out``, each checked like a message of
        its own frame (and a pass row for its shape)."""
        inner = batch.get("messages")
        if type(inner) is not list:
            if not self._resync:
                raise ProtocolError("batch without a 'messages' array")
            self.undecodable += 1
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
        """A batch item that cannot be read: an error live, skipped and counted in a recording."""
        if not self._resync:
            raise ProtocolError(why)
        self.undecodable_items += 1


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
