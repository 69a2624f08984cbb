"""Writes the stream a client receives into a recording file that survives its writer being killed.

The file is :data:`~iket_tui.protocol.recording.MAGIC`, a ``recording`` frame, every frame
exactly as it came off the socket, a ``checkpoint`` every so many messages or about every
second, and an ``end`` frame when closed. Data is handed to the operating system after every
chunk the caller writes (:meth:`RecordingWriter.flush`), so a recorder killed with SIGKILL
leaves a file whose complete frames all replay. The file is created as
:func:`iket_tui.outputs.create_growing` says: never through a link, and under its final name
from its first frame on.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from iket_tui import __version__
from iket_tui.outputs import OutputError, create_growing
from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import encode_message
from iket_tui.protocol.recording import MAGIC
from iket_tui.sources.base import SourceError


class RecordingWriter:
    """Append-only writer of one recording file.

    ``messages`` counts stream messages written (not the recording's own header, checkpoint and
    end frames); ``dropped`` is the largest loss count the agent reported to this client.
    """

    def __init__(
        self,
        path: Path,
        *,
        source: str,
        checkpoint_every: int = 1000,
        checkpoint_interval_s: float = 1.0,
    ) -> None:
        self.path = Path(path)
        self.messages = 0
        self.dropped = 0
        self._last_t_ns = 0
        self._checkpoint_every = checkpoint_every
        self._checkpoint_interval_s = checkpoint_interval_s
        self._since_checkpoint = 0
        self._last_checkpoint = time.monotonic()
        self._closed = False
        header = m.recording(created_unix=time.time(), software_version=__version__, source=source)
        try:
            fd = create_growing(self.path, MAGIC + encode_message(header))
        except OutputError as exc:
            raise SourceError(f"cannot write {exc}") from None
        except OSError as exc:
            raise SourceError(f"cannot write {self.path}: {exc.strerror or exc}") from None
        self._file: BinaryIO = open(fd, "wb")  # noqa: SIM115 - lives as long as the writer

    @property
    def closed(self) -> bool:
        return self._closed

    def write_frames(self, data: bytes, msgs: Sequence[m.Item]) -> None:
        """Append complete frames exactly as received, given the messages they hold (maps or
        pass rows, each one message)."""
        if self._closed:
            return
        self._write_raw(data)
        self.messages += len(msgs)
        self._since_checkpoint += len(msgs)
        for msg in msgs:
            self._account(msg)
        if self._since_checkpoint >= self._checkpoint_every or (
            time.monotonic() - self._last_checkpoint >= self._checkpoint_interval_s
        ):
            self._checkpoint()

    def write(self, msg: m.Message) -> None:
        """Append one message (encoded here)."""
        self.write_frames(encode_message(msg), [msg])

    def flush(self) -> None:
        """Hand everything written so far to the operating system."""
        if self._closed:
            return
        try:
            self._file.flush()
        except OSError as exc:
            raise SourceError(f"cannot write {self.path}: {exc.strerror or exc}") from None

    def close(self, reason: str) -> None:
        """Write the ``end`` frame and close the file; later calls do nothing."""
        if self._closed:
            return
        try:
            end = m.end(messages=self.messages, dropped=self.dropped, t_ns=self._last_t_ns, reason=reason)
            self._write_raw(encode_message(end))
            self._file.flush()
        finally:
            self._closed = True
            self._file.close()

    def _checkpoint(self) -> None:
        msg = m.checkpoint(messages=self.messages, dropped=self.dropped, t_ns=self._last_t_ns)
        self._write_raw(encode_message(msg))
        self._since_checkpoint = 0
        self._last_checkpoint = time.monotonic()

    def _account(self, msg: m.Item) -> None:
        t_ns = m.t_ns_of(msg)
        if t_ns is not None and t_ns > self._last_t_ns:
            self._last_t_ns = t_ns
        if not isinstance(msg, dict):
            return
        kind = msg.get("type")
        key = "total" if kind == m.DROPPED else "dropped" if kind in (m.HEARTBEAT, m.BYE) else None
        if key is not None:
            total = msg.get(key)
            if isinstance(total, int) and total > self.dropped:
                self.dropped = total

    def _write_raw(self, data: bytes) -> None:
        try:
            self._file.write(data)
        except OSError as exc:
            raise SourceError(f"cannot write {self.path}: {exc.strerror or exc}") from None
