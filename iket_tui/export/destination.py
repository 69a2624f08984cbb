"""Where an export is written: a file object over the destination the user named, written the
way :mod:`iket_tui.outputs` writes files (never through a link; a regular file under a private
name beside it, renamed onto it once complete, so the name never holds half a trace; ``-o -``
is standard output), gzip-compressed when the name ends in ``.gz``."""

from __future__ import annotations

import contextlib
import gzip
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Final

from iket_tui.outputs import _IN_PLACE as IN_PLACE
from iket_tui.outputs import STDOUT, check_file
from iket_tui.outputs import _create_beside as create_beside
from iket_tui.outputs import _in_place as in_place
from iket_tui.outputs import _lstat as lstat
from iket_tui.outputs import _publish as publish
from iket_tui.outputs import _remove as remove

BUFFER: Final = 1 << 20
GZIP_LEVEL: Final = 6


@contextlib.contextmanager
def open_destination(path: Path) -> Iterator[BinaryIO]:
    """A binary file to write the export into; on leaving the block without an exception the
    destination holds exactly what was written (compressed for ``*.gz``), otherwise a regular
    file's destination is left as it was."""
    path = Path(path)
    check_file(path)
    private: Path | None = None
    if path == STDOUT:
        fd = os.dup(1)
    else:
        st = lstat(path)
        if st is not None and in_place(st):
            fd = os.open(path, IN_PLACE)
        else:
            fd, private = create_beside(path, st)
    raw = io.FileIO(fd, "wb", closefd=True)
    buffered = io.BufferedWriter(raw, BUFFER)
    out: BinaryIO = buffered
    if path.name.endswith(".gz"):
        out = gzip.GzipFile(filename="", fileobj=buffered, mode="wb", compresslevel=GZIP_LEVEL, mtime=0)  # type: ignore[assignment]
    try:
        yield out
        if out is not buffered:
            out.close()
        buffered.flush()
        if private is not None:
            os.fsync(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            buffered.close()
        if private is not None:
            remove(private)
        raise
    buffered.close()
    if private is not None:
        publish(private, path)
