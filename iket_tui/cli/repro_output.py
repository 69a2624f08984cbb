"""Where ``repro -o`` puts a reproducer: the directory it names, or with ``-o -`` a tar archive
of that directory on standard output (to unpack elsewhere: ``| ssh host tar -x``)."""

from __future__ import annotations

import dataclasses
import io
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from iket_tui.cli.errors import check_directory_writable, check_stdout_takes
from iket_tui.outputs import STDOUT, write_file

if TYPE_CHECKING:
    from iket_tui.repro import Repro


def check_repro_output(output: Path) -> None:
    """Refuse, before any work, a directory that cannot or must not be written, or a terminal
    as standard output (a tar archive is no text to read there)."""
    if output == STDOUT:
        check_stdout_takes("a tar archive", "| tar -x")
    else:
        check_directory_writable(output)


def write_repro(output: Path, write: Callable[[Path], Repro], top: Callable[[Repro], str]) -> tuple[Repro, str]:
    """Have ``write`` write a reproducer into the directory ``output``; for standard output,
    into a private temporary directory sent as a tar archive of the directory ``top(repro)``.

    Returns the reproducer as the user finds it (in the archive: under ``top``, which its note
    names), and where it went, in words.
    """
    if output != STDOUT:
        found = write(output)
        return found, str(found.directory)
    with tempfile.TemporaryDirectory(prefix="iket-repro-") as private:
        directory = Path(private) / "repro"
        found = write(directory)
        name = top(found)
        data = _archive(directory, name)
    write_file(STDOUT, data)
    unpacked = dataclasses.replace(found, directory=Path(name), note=found.note.replace(str(directory), name))
    return unpacked, f"standard output, a tar archive of {name}/"


def _archive(directory: Path, name: str) -> bytes:
    """``directory`` as a tar archive of a directory ``name``, owned by nobody in particular."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(directory, arcname=name, filter=_anonymous)
    return buffer.getvalue()


def _anonymous(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info
