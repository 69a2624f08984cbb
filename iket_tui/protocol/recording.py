"""The recording file format: a magic header, then the socket's frames.

A recording starts with :data:`MAGIC`, then a ``recording`` message, the stream exactly as
it came off the socket with periodic ``checkpoint`` messages, and an ``end`` message when it
was closed cleanly. A file cut off mid-write still yields every complete frame, and one whose
``recording`` frame is damaged still yields every other frame: damage there is no different
from damage anywhere else.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Generic, Literal, TypeVar, overload

from iket_tui.protocol.codec import MessageDecoder, ProtocolError
from iket_tui.protocol.frames import encode_frame
from iket_tui.protocol.messages import RECORDING, Item, Message

MAGIC = b"\x89IKETREC\r\n\x1a\n"


_T = TypeVar("_T", Message, Item)


class RecordingDecoder(Generic[_T]):
    """Feed a recording's bytes from the start, iterate its messages.

    After :meth:`finish`, :attr:`cut_at` is the byte offset where an incomplete tail begins
    (``None`` if the file ends on a frame boundary), and :attr:`skipped_bytes` counts damaged
    bytes skipped inside the file. With ``rows=True`` pass rows come out as they are (see
    :class:`~iket_tui.protocol.codec.MessageDecoder`).

    The first message must be the ``recording`` header when the frame that holds it is the
    first thing after the magic (anything else is a foreign file, refused). When damaged bytes
    were skipped before it, the header was in them: the messages go on without it,
    :attr:`saw_header` stays false and :attr:`header_skipped` says how many bytes that was.
    """

    @overload
    def __init__(self: RecordingDecoder[Message], *, rows: Literal[False] = False) -> None: ...

    @overload
    def __init__(self: RecordingDecoder[Item], *, rows: bool) -> None: ...

    def __init__(self, *, rows: bool = False) -> None:
        self._head = bytearray()
        self._started = False
        self._decoder: MessageDecoder[Any] = MessageDecoder(resync=True, rows=rows)
        self._head_decoder: MessageDecoder[Any] = MessageDecoder(resync=True, rows=rows)
        self._settled = False  # the first message was seen: a header, or proof it was damaged
        self.cut_at: int | None = None
        self.saw_header = False
        self.header_skipped = 0

    @property
    def skipped_bytes(self) -> int:
        return self._decoder.frames.skipped_bytes

    @property
    def pending(self) -> int:
        """Bytes after the last intact frame that do not form one (a cut tail, after :meth:`finish`)."""
        return self._decoder.frames.pending

    @property
    def undecodable(self) -> int:
        return self._decoder.undecodable + self._head_decoder.undecodable

    @property
    def undecodable_items(self) -> int:
        return self._decoder.undecodable_items + self._head_decoder.undecodable_items

    @property
    def unknown(self) -> int:
        return self._decoder.unknown + self._head_decoder.unknown

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._started:
            self._decoder.feed(data)
            return
        self._head += data
        if len(self._head) < len(MAGIC):
            if not MAGIC.startswith(bytes(self._head)):
                raise ProtocolError("not an iket-tui recording (bad magic)")
            return
        if not self._head.startswith(MAGIC):
            raise ProtocolError("not an iket-tui recording (bad magic)")
        self._started = True
        self._decoder.feed(self._head[len(MAGIC) :])
        self._head.clear()

    def __iter__(self) -> Iterator[_T]:
        if self._started:
            for msg in self._decoder:  # lazily, frame by frame: the skipped count is the one before msg
                yield self._check(msg)

    def drain(self) -> list[_T]:
        """Every complete message now buffered; the same as ``list(self)``, faster."""
        if not self._started:
            return []
        if self._settled:
            return self._decoder.drain()
        head = self._first_messages()
        return head + self._decoder.drain() if head else head

    def _first_messages(self) -> list[Any]:
        """The messages of the first frame that holds any, taken one frame at a time so that
        what was skipped before it is known, and that frame checked as the header."""
        frames = self._decoder.frames
        for body in frames:
            self._head_decoder.feed(encode_frame(body))
            msgs = self._head_decoder.drain()
            if msgs:
                self._check(msgs[0])
                return msgs
        return []

    def finish(self) -> Iterator[_T]:
        if not self._started:
            if self._head:
                raise ProtocolError("not an iket-tui recording (file shorter than its header)")
            raise ProtocolError("empty file")
        for msg in self._decoder.finish():
            yield self._check(msg)
        if self._decoder.frames.pending:
            self.cut_at = len(MAGIC) + self._decoder.frames.consumed

    def _check(self, msg: Any) -> Any:
        if not self._settled:
            skipped = self.skipped_bytes
            if skipped:
                self.header_skipped = skipped  # the header was somewhere in them
            elif type(msg) is not dict or msg["type"] != RECORDING:
                raise ProtocolError("recording does not begin with a 'recording' frame")
            else:
                self.saw_header = True
            self._settled = True
        return msg
