"""Writes the stream a client receives into a recording file that survives its writer being killed,
and a disk that fills up under it.

The file is :data:`~iket_tui.protocol.recording.MAGIC`, a ``recording`` frame, every frame
exactly as it came off the socket, a ``checkpoint`` every so many messages or about every
second, each followed by an ``index`` frame (the marks of the recording's timeline found since
the one before, :class:`~iket_tui.sources.timeline.TimelineIndexer`), and a last ``index`` and an
``end`` frame when closed. Data is handed to the operating system after every
chunk the caller writes (:meth:`RecordingWriter.flush`), so a recorder killed with SIGKILL
leaves a file whose complete frames all replay.

The file is created as :func:`iket_tui.outputs.create_growing` says: never through a link,
under its final name from its first frame on (standard output is written where it stands). A
write that fails (the disk is full) stops the recording for good: the file is cut back to the
end of its last whole frame, so that no half frame follows what it holds, an ``end`` frame
saying why is added where it still fits, and :class:`RecordingStopped` says where it was cut.
The stream being recorded is not the writer's to stop.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from iket_tui import __version__
from iket_tui.model.fields import MAX_COUNT
from iket_tui.outputs import OutputError, PartialWrite, create_growing, write_all
from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import encode_message
from iket_tui.protocol.recording import MAGIC
from iket_tui.sources.base import SourceError
from iket_tui.sources.timeline import TimelineIndexer

_FLUSH_AT = 256 * 1024
"""Bytes held before they are handed to the operating system without waiting for :meth:`RecordingWriter.flush`."""


class RecordingStopped(SourceError):
    """Writing a recording failed for good (the disk is full); the one-line message says why,
    where the file was cut, and how many messages it holds, all of which replay."""


class _Mark(NamedTuple):
    """What the file holds once the held bytes up to ``end`` are written: whole frames only."""

    end: int
    messages: int
    dropped: int
    t_ns: int


class RecordingWriter:
    """Append-only writer of one recording file.

    ``messages`` counts stream messages written (not the recording's own header, checkpoint and
    end frames); ``dropped`` is the largest loss count the agent reported to this client.
    ``size`` is the bytes in the file, and ``stopped`` the one-line reason it stopped early
    (``None`` while it records, or once it closed normally).
    """

    def __init__(
        self,
        path: Path,
        *,
        source: str,
        checkpoint_every: int = 1000,
        checkpoint_interval_s: float = 1.0,
        context_until_ns: int | None = None,
        index: bool = True,
    ) -> None:
        """``index``: write the recording's index of its timeline (see :mod:`iket_tui.sources.timeline`),
        which costs the writer a model of the stream; without it a replay reads the file for it."""
        self.path = Path(path)
        self.messages = 0
        self.dropped = 0
        """Events the agents reported dropped, summed over the processes and their connections."""
        self._process: tuple[object, int] | None = None  # whose messages are being written: (host, pid)
        self._reported: dict[tuple[object, int] | None, int] = {}  # by process: its connection's running total
        self.size = 0
        self.stopped: str | None = None
        self._last_t_ns = 0
        self._checkpoint_every = checkpoint_every
        self._checkpoint_interval_s = checkpoint_interval_s
        self._since_checkpoint = 0
        self._last_checkpoint = time.monotonic()
        self._held = bytearray()  # whole frames not yet handed to the operating system
        self._marks: list[_Mark] = []  # where each held chunk of frames ends
        self._written = _Mark(0, 0, 0, 0)  # what the file holds
        self._closed = False
        self._indexer = TimelineIndexer() if index else None
        header = m.recording(
            created_unix=time.time(), software_version=__version__, source=source, context_until_ns=context_until_ns
        )
        head = MAGIC + encode_message(header)
        try:
            self._fd = create_growing(self.path, head)
        except OutputError as exc:
            raise SourceError(f"cannot write {exc}") from None
        except OSError as exc:
            if exc.errno in _FULL:
                raise SourceError(
                    f"{_why(exc)}: {self.path} cannot hold even a recording's header; nothing was recorded"
                ) from None
            raise SourceError(f"cannot write {self.path}: {exc.strerror or exc}") from None
        self.size = len(head)
        self._origin = _origin(self._fd, self.size)
        self._written = _Mark(self.size, 0, 0, 0)

    @property
    def closed(self) -> bool:
        return self._closed

    def write_frames(self, data: bytes, msgs: Sequence[m.Item]) -> None:
        """Append complete frames exactly as received, given the messages they hold (maps or
        pass rows, each one message). Raises :class:`RecordingStopped` when the file cannot
        take them; a stopped or closed writer takes nothing more."""
        if self._closed:
            return
        self.messages += len(msgs)
        self._since_checkpoint += len(msgs)
        for msg in msgs:
            self._account(msg)
        if self._indexer is not None:
            self._indexer.feed(msgs)
        self._hold(data)
        if self._since_checkpoint >= self._checkpoint_every or (
            time.monotonic() - self._last_checkpoint >= self._checkpoint_interval_s
        ):
            self._checkpoint()
        if len(self._held) >= _FLUSH_AT:
            self.flush()

    def write(self, msg: m.Message) -> None:
        """Append one message (encoded here)."""
        self.write_frames(encode_message(msg), [msg])

    def flush(self) -> None:
        """Hand everything written so far to the operating system; raises :class:`RecordingStopped`
        when it cannot."""
        if self._closed or not self._held:
            return
        try:
            write_all(self._fd, self._held)
        except PartialWrite as exc:
            self._stop(exc)
        self.size += len(self._held)
        self._written = self._marks[-1]._replace(end=self.size)
        self._held.clear()
        self._marks.clear()

    def close(self, reason: str) -> None:
        """Write the ``end`` frame and close the file; later calls do nothing. Raises
        :class:`RecordingStopped` when the file could not take what was left to write."""
        if self._closed:
            return
        try:
            end = m.end(messages=self.messages, dropped=self.dropped, t_ns=self._last_t_ns, reason=reason)
            frames = encode_message(end)
            if self._indexer is not None:
                frames = self._indexer.before_end(end, self.size + len(self._held)) + frames
            self._hold(frames)
            self.flush()
        finally:
            self._close()

    def _hold(self, frames: bytes) -> None:
        self._held += frames
        self._marks.append(_Mark(len(self._held), self.messages, self.dropped, self._last_t_ns))

    def _checkpoint(self) -> None:
        msg = m.checkpoint(messages=self.messages, dropped=self.dropped, t_ns=self._last_t_ns)
        frames = encode_message(msg)
        if self._indexer is not None:
            at = self.size + len(self._held)
            frames += self._indexer.after_checkpoint(msg, at, at + len(frames))
        self._hold(frames)
        self._since_checkpoint = 0
        self._last_checkpoint = time.monotonic()

    def _stop(self, exc: PartialWrite) -> None:
        """Keep the whole frames that made it into the file and nothing after them, add an
        ``end`` frame if it fits, close, and raise :class:`RecordingStopped`."""
        kept = self._written
        for mark in self._marks:
            if mark.end <= exc.written:
                kept = mark._replace(end=self.size + mark.end)
        self.size, self.messages, self.dropped, self._last_t_ns = kept
        self._cut()
        why = _why(exc)
        end = m.end(
            messages=self.messages, dropped=self.dropped, t_ns=self._last_t_ns, reason=f"recording stopped: {why}"
        )
        try:
            write_all(self._fd, encode_message(end))
        except PartialWrite:
            self._cut()
        self.stopped = (
            f"recording stopped, {why}: {self.path} was cut at byte {self.size}, "
            f"after {self.messages} messages (all of them replay)"
        )
        self._close()
        raise RecordingStopped(self.stopped)

    def _cut(self) -> None:
        """Cut the file back to :attr:`size`, dropping a partly written frame (a device cannot be cut)."""
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, self._origin + self.size)
            os.lseek(self._fd, self._origin + self.size, os.SEEK_SET)

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._held.clear()
        self._marks.clear()
        with contextlib.suppress(OSError):
            os.close(self._fd)

    def _account(self, msg: m.Item) -> None:
        t_ns = m.t_ns_of(msg)
        if t_ns is not None and t_ns > self._last_t_ns:
            self._last_t_ns = t_ns
        if not isinstance(msg, dict):
            return
        kind = msg.get("type")
        if kind == m.PROCESS or (kind == m.HELLO and msg.get("role", "agent") == "agent"):
            pid = msg.get("pid")
            host = msg.get("host") if kind == m.PROCESS else self._process[0] if self._process is not None else None
            self._process = (host, pid) if type(pid) is int else None  # pids of two hosts may be the same
            if kind == m.HELLO:  # a new connection: its running totals start again from 0
                self._reported[self._process] = 0
            return
        key = "total" if kind == m.DROPPED else "dropped" if kind in (m.HEARTBEAT, m.BYE) else None
        if key is not None:
            total = msg.get(key)
            before = self._reported.get(self._process, 0)
            if type(total) is int and before < total <= MAX_COUNT:  # past it, a lie: not added up
                self.dropped += total - before
                self._reported[self._process] = total


_FULL = (errno.ENOSPC, errno.EDQUOT)


def _origin(fd: int, written: int) -> int:
    """Where the recording starts in ``fd``, ``written`` bytes back: after what a file that is
    standard output already held (``>> FILE``); 0 for a new file, a pipe or a device."""
    try:
        return max(os.lseek(fd, 0, os.SEEK_CUR) - written, 0)
    except OSError:
        return 0


def _why(exc: OSError) -> str:
    """A failed write in the user's words: ``the disk is full``, or the system's reason."""
    if exc.errno == errno.ENOSPC:
        return "the disk is full"
    if exc.errno == errno.EDQUOT:
        return "the disk quota is used up"
    text = exc.strerror or str(exc)
    return text[:1].lower() + text[1:]
