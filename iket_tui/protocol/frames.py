"""Framing: ``u32 length | u32 crc32 | body``, big-endian, sans-I/O.

A frame carries one msgpack body. The checksum lets a reader reject garbage before any
decoding and, in a recording, skip a damaged stretch to the next intact frame.
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Iterator
from typing import Final

import msgpack

from iket_tui.protocol.limits import MAX_FRAME_BODY, UNPACK_LIMITS

__all__ = ["HEADER", "HEADER_SIZE", "MAX_FRAME_BODY", "FrameDecoder", "FrameError", "encode_frame"]

HEADER = struct.Struct(">II")
HEADER_SIZE = HEADER.size

RESYNC_BUDGET: Final = 2 * MAX_FRAME_BODY
"""Bytes a resync may checksum in frames that turn out damaged before it has skipped anything."""
RESYNC_CREDIT: Final = 4
"""Further bytes it may checksum so for every byte it skips: the checksum work of resyncing stays
linear in the file, whatever the damage holds."""

_BODY_START = re.compile(
    rb"[\x80-\x8f][\xa0-\xbf\xd9-\xdb]|\xde[\x00-\xff]{2}[\xa0-\xbf\xd9-\xdb]|\xdf[\x00-\xff]{4}[\xa0-\xbf\xd9-\xdb]"
)
"""How every body begins: a msgpack map's header, then a string (its first key)."""
_BODY_START_MAX: Final = 6
"""Bytes the longest of those beginnings takes."""
_PREFIX: Final = 512
"""Bytes of a candidate body parsed before any of it is checksummed."""


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

    Resynchronising looks only where a frame could begin (a length within the limit, then a body
    that starts as a map with a string key and parses as one so far) and checksums only those
    places, within :data:`RESYNC_BUDGET` plus :data:`RESYNC_CREDIT` bytes per byte skipped: a
    damaged stretch costs about as much as reading it, never a checksum per byte of it.
    """

    def __init__(self, *, max_body: int = MAX_FRAME_BODY, resync: bool = False) -> None:
        self._buf = bytearray()
        self._pos = 0
        self._max_body = max_body
        self._resync = resync
        self._lost = False  # after damage: the position is a candidate, not a known frame start
        self._budget = RESYNC_BUDGET
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
            if self._lost:
                plausible = self._plausible(pos, length)
                if plausible is None:
                    raise StopIteration
                if not plausible:
                    self._skip()
                    continue
            end = pos + HEADER_SIZE + length
            if end > len(buf):
                raise StopIteration
            body = bytes(buf[pos + HEADER_SIZE : end])
            if zlib.crc32(body) != crc:
                if self._lost:
                    self._budget -= length
                self._reject("frame checksum mismatch")
                continue
            self._pos = end
            self._lost = False
            self.frames += 1
            self.consumed += HEADER_SIZE + length
            return body

    def drain(self) -> list[bytes]:
        """Every complete frame body now buffered; the same as ``list(self)``, faster. In strict
        mode the frames before a bad one are returned first, and the next call raises."""
        bodies: list[bytes] = []
        append = bodies.append
        buf = self._buf
        size = len(buf)
        pos = self._pos
        unpack = HEADER.unpack_from
        crc32 = zlib.crc32
        max_body = self._max_body
        start = pos
        while size - pos >= HEADER_SIZE and not self._lost:
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
        try:
            bodies.extend(self)  # whatever stopped the fast loop: damage, or the end of the data
        except FrameError:
            if not bodies:
                raise
            # The frames before the damage are returned now; the position stays on the damage, so
            # the next call raises.
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
        self._skip()

    def _skip(self) -> None:
        """Resync: move past the current position to the next one where a frame may begin,
        counting the bytes passed."""
        buf = self._buf
        start = self._pos + 1
        found = _BODY_START.search(buf, start + HEADER_SIZE)
        while found is not None:
            length = HEADER.unpack_from(buf, found.start() - HEADER_SIZE)[0]
            if 0 < length <= self._max_body:
                break
            found = _BODY_START.search(buf, found.start() + 1)
        if found is not None:
            to = found.start() - HEADER_SIZE
        else:  # nothing here; the last few offsets wait for the bytes that tell
            to = max(start, len(buf) - HEADER_SIZE - _BODY_START_MAX + 1)
        passed = to - self._pos
        self._pos = to
        self.skipped_bytes += passed
        self.consumed += passed
        self._budget += RESYNC_CREDIT * passed
        self._lost = True

    def _plausible(self, pos: int, length: int) -> bool | None:
        """Whether a frame of ``length`` may begin at ``pos`` (``None``: not enough bytes yet to
        tell): its body starts as a map with a string key and parses as one map so far, and
        checksumming it stays within the budget."""
        buf = self._buf
        body = pos + HEADER_SIZE
        if _BODY_START.match(buf, body) is None:
            return None if len(buf) - body < _BODY_START_MAX else False
        if length > self._budget:
            return False
        prefix = min(length, _PREFIX)
        if len(buf) - body < prefix:
            return None
        return _one_map_so_far(bytes(buf[body : body + prefix]), length)


def _one_map_so_far(prefix: bytes, length: int) -> bool:
    """Whether ``prefix``, the start of a body of ``length`` bytes, may begin a body that is
    exactly one msgpack map with string keys."""
    unpacker = msgpack.Unpacker(**UNPACK_LIMITS)
    unpacker.feed(prefix)
    try:
        unpacker.unpack()
    except msgpack.OutOfData:
        return len(prefix) < length
    except Exception:  # msgpack raises several unrelated types on bad input
        return False
    consumed: int = unpacker.tell()
    return consumed == length
