"""Where an export is written: a file object over the destination the user named, written the
way :mod:`iket_tui.outputs` writes files (never through a link; a regular file under a private
name beside it, renamed onto it once complete, so the name never holds half a trace; ``-o -``
is standard output), gzip-compressed when the name ends in ``.gz``."""

from __future__ import annotations

import contextlib
import gzip
import io
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Final

from iket_tui.outputs import writing

BUFFER: Final = 1 << 20
GZIP_LEVEL: Final = 6


@contextlib.contextmanager
def open_destination(path: Path) -> Iterator[BinaryIO]:
    """A binary file to write the export into; on leaving the block without an exception the
    destination holds exactly what was written (compressed for ``*.gz``), otherwise a regular
    file's destination is left as it was."""
    with writing(Path(path)) as fd:
        buffered = io.BufferedWriter(io.FileIO(fd, "wb", closefd=False), BUFFER)
        out: BinaryIO = buffered
        if Path(path).name.endswith(".gz"):
            out = gzip.GzipFile(filename="", fileobj=buffered, mode="wb", compresslevel=GZIP_LEVEL, mtime=0)  # type: ignore[assignment]
        try:
            yield out
            if out is not buffered:
                out.close()
            buffered.flush()
        except BaseException:
            with contextlib.suppress(OSError):  # a write that failed already says why; this one would again
                buffered.close()
            raise
        buffered.close()
