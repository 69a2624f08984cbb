"""What a command says on stderr (one ``iket-tui: ...`` line), the usage error that ends it, and the exit codes."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

from iket_tui.outputs import STDOUT, OutputError, check_directory, check_file, reader_kept

PROG = "iket-tui"
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 128 + signal.SIGINT


class UsageError(Exception):
    """The command line asks for something that cannot be done; a one-line message."""


def say(message: str) -> None:
    """One line on stderr, named after the program, so that it reads apart from a program's own output."""
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


def check_writable(path: Path, *, stdout: bool = False) -> None:
    """Fail with a usage error before any work when ``path`` cannot or must not be written (a
    link planted there, another user's directory: see :mod:`iket_tui.outputs`), rather than after it.
    Standard output (``-o -``) is only for a command that says it may write there (``stdout``)."""
    if path == STDOUT and not stdout:
        raise UsageError("-o -: only `record`, `export` and `repro` write to standard output; name a file here")
    try:
        check_file(path)
    except OutputError as exc:
        raise UsageError(str(exc)) from None


@contextlib.contextmanager
def reader_of(path: Path | None) -> Iterator[None]:
    """A usage error at once when ``path`` is a FIFO that nobody reads; else its reader kept
    waiting for what is written there until the block ends (see :func:`iket_tui.outputs.reader_kept`)."""
    with contextlib.ExitStack() as kept:
        if path is not None:
            try:
                kept.enter_context(reader_kept(path))
            except OutputError as exc:
                raise UsageError(str(exc)) from None
        yield


def check_directory_writable(path: Path) -> None:
    """The same for a directory to write files into (``repro -o DIR``)."""
    try:
        check_directory(path)
    except OutputError as exc:
        raise UsageError(str(exc)) from None


def check_stdout_takes(what: str, example: str) -> None:
    """Refuse to write ``what`` (bytes, not text) to standard output when it is a terminal, on
    which it would show as garbage, rather than piped or redirected (``example``)."""
    if os.isatty(1):  # what -o - writes to, whatever sys.stdout is
        raise UsageError(
            f"-o - writes {what} to standard output, which is a terminal: pipe it ({example}) or redirect it"
        )


def shown(path: Path) -> str:
    """A destination as a message names it."""
    return "standard output" if path == STDOUT else str(path)
