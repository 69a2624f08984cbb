"""Framing: ``u32 length | u32 crc32 | body``, big-endian, sans-I/O.

A frame carries one msgpack body. The checksum lets a reader reject garbage before any
decoding and, in a recording, skip a damaged stretch to the next intact frame.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

HEADER = struct.Struct(">II")
HEADER_SIZE = HEADER.size
MAX_FRAME_BODY = 16 * 1024 * 1024


class FrameError(Exception):
    """The byte stream is not a valid sequence of frames."""


def encode_frame(body: bytes) -> bytes:
    """Wrap one message body in a frame."""
    if not body:
        raise FrameError("a frame body cannot be empty")
    if len(body) > MAX_FRAME_BODY:
        raise FrameError(f"frame body of {len(body)} bytes exceeds the {MAX_FRAME_BODY} byte limit")
    return HEADER.pack(len(body), zlib.crc32(body)) + body


class FrameDecoder:
    """Feed bytes, iterate complete frame bodies.

    In strict mode (a live socket) a bad length or checksum raises :class:`FrameError`: the
    peer is not speaking this protocol and nothing after that point can be trusted. In resync
    mode (a recording on disk) the decoder skips forward to the next intact frame and counts
    the bytes it skipped in :attr:`skipped_bytes`.
    """

    def __init__(self, *, max_body: int = MAX_FRAME_BODY, resync: bool = False) -> None:
        self._buf = bytearray()
        self._pos = 0
        self._max_body = max_body
        self._resync = resync
        self.skipped_bytes = 0
        self.frames = 0
        self.consumed = 0  # bytes of the stream fully accounted for (frames + skipped)

    @property
    def pending(self) -> int:
        """Bytes received that do not yet form a complete frame."""
        return len(self._buf) - self._pos

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += data

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        buf = self._buf
        while True:
            pos = self._pos
            if len(buf) - pos < HEADER_SIZE:
                raise StopIteration
            length, crc = HEADER.unpack_from(buf, pos)
            if length > self._max_body:
                self._reject(f"frame length {length} exceeds the {self._max_body} byte limit")
                continue
            if length == 0:
                self._reject("empty frame")
                continue
            end = pos + HEADER_SIZE + length
            if end > len(buf):
                raise StopIteration
            body = bytes(buf[pos + HEADER_SIZE : end])
            if zlib.crc32(body) != crc:
                self._reject("frame checksum mismatch")
                continue
            self._pos = end
            self.frames += 1
            self.consumed += HEADER_SIZE + length
            return body

    def drain(self) -> list[bytes]:
        """Every complete frame body now buffered; the same as ``list(self)``, faster."""
        bodies: list[bytes] = []
        append = bodies.append
        buf = self._buf
        size = len(buf)
        pos = self._pos
        unpack = HEADER.unpack_from
        crc32 = zlib.crc32
        max_body = self._max_body
        start = pos
        while size - pos >= HEADER_SIZE:
            length, crc = unpack(buf, pos)
            end = pos + HEADER_SIZE + length
            if not 0 < length <= max_body or end > size:
                break
            body = bytes(buf[pos + HEADER_SIZE : end])
            if crc32(body) != crc:
                break
            append(body)
            pos = end
        self._pos = pos
        self.frames += len(bodies)
        self.consumed += pos - start
        bodies.extend(self)  # whatever stopped the fast loop: damage, or the end of the data
        return bodies

    def finish(self) -> Iterator[bytes]:
        """At end of stream: in resync mode, look past an incomplete tail for intact frames.

        Whatever still remains in :attr:`pending` afterwards is where the stream was cut.
        """
        yield from self
        if not self._resync:
            return
        cut = (self._pos, self.skipped_bytes, self.consumed)
        while self.pending >= HEADER_SIZE:
            self._reject("incomplete frame")
            found = False
            for body in self:
                found = True
                yield body
            if found:
                cut = (self._pos, self.skipped_bytes, self.consumed)
        self._pos, self.skipped_bytes, self.consumed = cut

    def _reject(self, why: str) -> None:
        if not self._resync:
            raise FrameError(why)
        self._pos += 1
        self.skipped_bytes += 1
        self.consumed += 1
