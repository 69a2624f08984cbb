"""The streams of every agent on a host over one ssh connection: ``u32 channel | u32 length | bytes``, sans-I/O.

``iket-tui attach node1: node2:`` runs one ``ssh HOST iket-tui bridge --all`` per host, and
that one bridge carries the streams of every agent there (see docs/protocol.md, "One ssh
connection per host"). Each record is a piece of one agent's stream, unchanged, on the channel
the bridge gave that agent; channel 0 carries the bridge's and the client's own messages, one
msgpack map per record (:data:`AGENT`, :data:`AGENT_END`, :data:`CLOSE`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any, Final

import msgpack

from iket_tui.protocol.codec import ProtocolError, decode_body

RECORD = struct.Struct(">II")
CONTROL: Final = 0
"""The channel of the bridge's and the client's own messages."""
MAX_RECORD: Final = 1 << 20
"""The longest record either end writes (the bridge reads an agent's stream in smaller pieces)."""

AGENT: Final = "agent"
"""Bridge to client: ``channel`` now carries the stream of the agent of ``pid`` (``start_time``)."""
AGENT_END: Final = "agent_end"
"""Bridge to client: the stream on ``channel`` ended; ``code`` says why as the one-agent bridge's
exit code would (0 its process ended, 3 its agent stopped while the process runs on, 2 refused),
``reason`` in words."""
CLOSE: Final = "close"
"""Client to bridge: the client is done with ``channel``; its agent's connection is closed."""


class MuxError(Exception):
    """The bytes are not records of this wire: the peer is not an ``iket-tui bridge --all``."""


def encode_record(channel: int, data: bytes) -> bytes:
    """One record of ``data`` on ``channel``."""
    if len(data) > MAX_RECORD:
        raise MuxError(f"a record of {len(data)} bytes exceeds the {MAX_RECORD} byte limit")
    return RECORD.pack(channel, len(data)) + data


def encode_control(kind: str, **fields: Any) -> bytes:
    """One message of the bridge's or the client's own, on the control channel."""
    return encode_record(CONTROL, msgpack.packb({"type": kind, **fields}))


def decode_control(data: bytes) -> dict[str, Any]:
    """A control record's message; raises :class:`MuxError` on anything else."""
    try:
        return decode_body(data)
    except ProtocolError as exc:
        raise MuxError(f"not a control message ({exc})") from None


class MuxDecoder:
    """Feed bytes, iterate ``(channel, data)`` records; a bad length raises :class:`MuxError`."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        return self

    def __next__(self) -> tuple[int, bytes]:
        buffer = self._buffer
        if len(buffer) < RECORD.size:
            raise StopIteration
        channel, length = RECORD.unpack_from(buffer)
        if length > MAX_RECORD:
            raise MuxError(f"a record of {length} bytes exceeds the {MAX_RECORD} byte limit")
        end = RECORD.size + length
        if len(buffer) < end:
            raise StopIteration
        data = bytes(buffer[RECORD.size : end])
        del buffer[:end]
        return channel, data
