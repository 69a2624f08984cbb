"""Reading a recording file back: every complete frame, and what was cut, damaged or skipped.

The file is read in chunks, so a large recording is never held in memory whole. Anything that
is not a readable recording (missing, empty, foreign, from another protocol major version, or
without one intact frame) is a :class:`~iket_tui.sources.base.SourceError` with a one-line
message; a recording that was cut short or damaged, its header frame included, reads everything
intact and says what it skipped in :func:`recording_notes`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar, overload

from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import ProtocolError
from iket_tui.protocol.recording import RecordingDecoder
from iket_tui.sources.base import SourceError

CHUNK_SIZE = 1 << 20


@dataclass
class RecordingInfo:
    """What reading a recording found, complete once its messages have all been read."""

    size: int = 0
    messages: int = 0
    cut_at: int | None = None
    skipped_bytes: int = 0
    header_skipped: int = 0
    """Damaged bytes skipped before the first intact frame, the header among them (0: it was read)."""
    undecodable: int = 0
    undecodable_items: int = 0
    unknown: int = 0
    ended: bool = False
    source: str = ""
    context_until_ns: int | None = None
    """A cut's: the stream time where its own stretch begins, the messages before it context."""


_T = TypeVar("_T", m.Message, m.Item)


@dataclass(frozen=True)
class ReadPoint:
    """Where a reader stood between two chunks (:meth:`RecordingReader.point`): a reader made
    with it reads on from there, as the first would have."""

    offset: int
    decoder: RecordingDecoder[Any]
    """A copy of the decoder as it stood: the bytes of a frame begun and not ended, its counts."""
    info: RecordingInfo


class RecordingReader(Generic[_T]):
    """Iterate the messages of one recording file, reading it incrementally.

    Iteration raises :class:`SourceError` for a file that is not a readable recording; after
    it, :attr:`info` describes the file. With ``rows=True`` pass events batched as pass rows
    come out as rows (lists), as replay wants them; otherwise every message is a map.
    """

    @overload
    def __init__(
        self: RecordingReader[m.Message],
        path: Path,
        *,
        chunk_size: int = CHUNK_SIZE,
        rows: Literal[False] = False,
        start: ReadPoint | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self: RecordingReader[m.Item],
        path: Path,
        *,
        chunk_size: int = CHUNK_SIZE,
        rows: bool,
        start: ReadPoint | None = None,
    ) -> None: ...

    def __init__(
        self, path: Path, *, chunk_size: int = CHUNK_SIZE, rows: bool = False, start: ReadPoint | None = None
    ) -> None:
        """``start``: read on from where another reader of the same file stood (its
        :meth:`point`), rather than from the beginning."""
        self.path = Path(path)
        self.info = RecordingInfo() if start is None else copy.copy(start.info)
        self._chunk_size = chunk_size
        self._rows = rows
        self._start = start
        self._decoder: RecordingDecoder[Any] | None = None

    def __iter__(self) -> Iterator[_T]:
        for batch in self.chunks():
            yield from batch

    def chunks(self) -> Iterator[list[_T]]:
        """The messages, one list per chunk of the file read."""
        start = self._start
        decoder: RecordingDecoder[Any] = (
            RecordingDecoder(rows=self._rows) if start is None else copy.deepcopy(start.decoder)
        )
        self._decoder = decoder
        try:
            with open(self.path, "rb") as file:
                if start is not None:
                    file.seek(start.offset)
                while data := file.read(self._chunk_size):
                    self.info.size += len(data)
                    decoder.feed(data)
                    batch = self._account(decoder.drain(), decoder)
                    if batch:
                        yield batch
                batch = self._account(list(decoder.finish()), decoder)
                if batch:
                    yield batch
        except ProtocolError as exc:
            raise SourceError(f"{self.path}: {exc}") from None
        except OSError as exc:
            raise SourceError(f"{self.path}: {_os_reason(exc)}") from None
        if self.info.messages == 0:
            raise SourceError(f"{self.path}: {_nothing_read(decoder)}")
        self.info.cut_at = decoder.cut_at

    def point(self) -> ReadPoint:
        """Where this reader stands, taken between two chunks of :meth:`chunks`."""
        assert self._decoder is not None, "taken once reading has begun"
        return ReadPoint(self.info.size, copy.deepcopy(self._decoder), copy.copy(self.info))

    def _account(self, batch: list[Any], decoder: RecordingDecoder[Any]) -> list[Any]:
        info = self.info
        if batch and info.messages == 0 and decoder.saw_header:
            _check_header(self.path, batch[0])  # the decoder made sure it is a recording map
            source = batch[0].get("source")
            info.source = source if isinstance(source, str) else ""
            until = batch[0].get("context_until_ns")
            info.context_until_ns = until if type(until) is int and until > 0 else None
        info.messages += len(batch)
        info.skipped_bytes = decoder.skipped_bytes
        info.header_skipped = decoder.header_skipped
        info.undecodable = decoder.undecodable
        info.undecodable_items = decoder.undecodable_items
        info.unknown = decoder.unknown
        if batch:
            last = batch[-1]  # a cleanly closed recording ends on its end frame
            info.ended = type(last) is dict and last["type"] == m.END
        return batch


def read_recording(path: Path) -> tuple[list[m.Message], RecordingInfo]:
    """Every complete message of a recording and what reading it found."""
    reader = RecordingReader(path)
    messages = list(reader)
    return messages, reader.info


def recording_notes(info: RecordingInfo, *, verb: str = "read") -> tuple[str, ...]:
    """One-line remarks for the user about a recording read to its end."""
    notes: list[str] = []
    if info.cut_at is not None:
        notes.append(f"recording cut at byte {info.cut_at}: {info.messages} complete messages {verb}")
    elif not info.ended:
        notes.append("recording has no end frame: its recorder stopped without closing it")
    if info.header_skipped:
        notes.append(f"the recording's header was damaged: {info.header_skipped} bytes skipped")
    if info.skipped_bytes > info.header_skipped:
        more = " more" if info.header_skipped else ""
        notes.append(f"skipped {info.skipped_bytes - info.header_skipped}{more} damaged bytes")
    if info.undecodable:
        notes.append(f"skipped {info.undecodable} undecodable frames")
    if info.undecodable_items:
        notes.append(f"skipped {info.undecodable_items} undecodable messages inside batch frames")
    if info.unknown:
        notes.append(f"skipped {info.unknown} messages of types this iket-tui does not know (a newer recorder?)")
    return tuple(notes)


def _nothing_read(decoder: RecordingDecoder[Any]) -> str:
    """Why a recording with a valid magic gave no message at all, in one line."""
    if decoder.skipped_bytes:
        cut = f", the last {decoder.pending} bytes an incomplete frame" if decoder.pending else ""
        return f"no intact frame in this recording: {decoder.skipped_bytes} damaged bytes skipped{cut}"
    unread = [f"{decoder.undecodable} undecodable frames"] if decoder.undecodable else []
    if decoder.unknown:
        unread.append(f"{decoder.unknown} messages of types this iket-tui does not know")
    if unread:
        return f"no message this iket-tui can read in this recording: {', '.join(unread)}"
    return "no complete frame in this recording (cut right after its header?)"


def _check_header(path: Path, header: m.Message) -> None:
    proto = header.get("proto")
    if not (isinstance(proto, list) and len(proto) == 2 and all(isinstance(v, int) for v in proto)):
        raise SourceError(f"{path}: recording header without a valid protocol version")
    if proto[0] != m.PROTOCOL_VERSION[0]:
        ours = ".".join(map(str, m.PROTOCOL_VERSION))
        raise SourceError(f"{path}: recorded with protocol {proto[0]}.{proto[1]}, this iket-tui speaks {ours}")


def _os_reason(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return "no such file"
    if isinstance(exc, IsADirectoryError):
        return "is a directory"
    return exc.strerror or type(exc).__name__
