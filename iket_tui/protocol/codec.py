"""Messages to frames and back, with limits on every decode."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgpack

from iket_tui.protocol.frames import MAX_FRAME_BODY, FrameDecoder, FrameError, encode_frame
from iket_tui.protocol.messages import BATCH, HELLO, KNOWN_TYPES, PROTOCOL_VERSION, Message

_LIMITS: dict[str, Any] = {
    "raw": False,
    "strict_map_key": True,
    "max_str_len": 4 * 1024 * 1024,
    "max_bin_len": MAX_FRAME_BODY,
    "max_array_len": 1_000_000,
    "max_map_len": 10_000,
    "max_ext_len": 0,
}


class ProtocolError(Exception):
    """The peer or file broke the protocol; the message is a one-line explanation."""


def encode_message(msg: Message) -> bytes:
    """One message as one frame."""
    return encode_frame(msgpack.packb(msg, use_bin_type=True))


def encode_batch(msgs: list[Message]) -> bytes:
    """Several messages as one ``batch`` frame (one message alone goes in a frame of its own)."""
    if len(msgs) == 1:
        return encode_message(msgs[0])
    return encode_frame(msgpack.packb({"type": BATCH, "messages": msgs}, use_bin_type=True))


def decode_body(body: bytes) -> Message:
    """One frame body as a message map; raises :class:`ProtocolError` on anything else."""
    try:
        obj = msgpack.unpackb(body, **_LIMITS)
    except Exception as exc:  # msgpack raises several unrelated types on bad input
        raise ProtocolError(f"undecodable message body ({type(exc).__name__})") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        raise ProtocolError("message is not a map with a string 'type'")
    return obj


class MessageDecoder:
    """Feed bytes, iterate messages of known types.

    Messages of unknown types (a newer peer) are skipped and counted in :attr:`unknown`. In
    resync mode (recordings) damaged frames and undecodable bodies are skipped and counted;
    otherwise they raise :class:`ProtocolError`.
    """

    def __init__(self, *, resync: bool = False) -> None:
        self.frames = FrameDecoder(resync=resync)
        self._resync = resync
        self.unknown = 0
        self.undecodable = 0

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self.frames.feed(data)

    def __iter__(self) -> Iterator[Message]:
        try:
            yield from self._messages(self.frames)
        except FrameError as exc:
            raise ProtocolError(str(exc)) from None

    def drain(self) -> list[Message]:
        """Every complete message now buffered; the same as ``list(self)``, faster."""
        try:
            bodies = self.frames.drain()
        except FrameError as exc:
            raise ProtocolError(str(exc)) from None
        out: list[Message] = []
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
                    out.extend(self._flatten(msg))
                else:
                    append(msg)
            else:
                decoded = self._decode(body)
                if decoded is not None:
                    append(decoded)
        return out

    def finish(self) -> Iterator[Message]:
        """At end of stream: every remaining complete message (see :meth:`FrameDecoder.finish`)."""
        yield from self._messages(self.frames.finish())

    def _messages(self, bodies: Iterator[bytes]) -> Iterator[Message]:
        for body in bodies:
            msg = self._decode(body)
            if msg is None:
                continue
            if msg["type"] == BATCH:
                yield from self._flatten(msg)
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

    def _flatten(self, batch: Message) -> list[Message]:
        """The messages inside a ``batch``, each checked like a message of its own frame."""
        inner = batch.get("messages")
        if not isinstance(inner, list):
            return self._bad("batch without a 'messages' array")
        out: list[Message] = []
        for msg in inner:
            if not isinstance(msg, dict) or not isinstance(msg.get("type"), str) or msg["type"] == BATCH:
                out.extend(self._bad("batch holds something that is not a message"))
            elif msg["type"] in KNOWN_TYPES:
                out.append(msg)
            else:
                self.unknown += 1
        return out

    def _bad(self, why: str) -> list[Message]:
        if not self._resync:
            raise ProtocolError(why)
        self.undecodable += 1
        return []


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
