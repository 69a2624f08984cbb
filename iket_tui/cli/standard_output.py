"""Standard output as the commands write their text to it (``dump``, ``ls``, ``stacks``,
``completion``, ``--help``): a write that fails there (``> /dev/full``, a full disk, ``>&-``)
is one line and exit code 2 like any bad input, never an internal error, nor a traceback when
the interpreter flushes at exit.

:func:`guarded` puts a text stream over descriptor 1 in ``sys.stdout`` whose failures raise
:class:`StdoutError`, telling them apart from every other ``OSError``. A standard output that
was closed gets ``/dev/null`` opened for reading in its place, so that no file or socket the
command opens takes descriptor 1 (and receives what was meant for standard output), while every
write there still fails, as the closed descriptor would have.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import sys
from collections.abc import Iterator

STDOUT_FD = 1


class StdoutError(OSError):
    """A write to standard output failed; ``errno`` says why (``EPIPE``: its reader left)."""


class _StdoutFile(io.FileIO):
    """Descriptor 1, whose failed writes raise :class:`StdoutError`."""

    def write(self, data: object) -> int | None:  # type: ignore[override]
        try:
            return super().write(data)  # type: ignore[arg-type]
        except OSError as exc:
            raise StdoutError(exc.errno, exc.strerror) from None


def said(exc: StdoutError) -> str:
    """The failure in one line."""
    if exc.errno == errno.EBADF:
        return "standard output is closed"
    return f"cannot write to standard output: {exc.strerror or exc}"


@contextlib.contextmanager
def guarded() -> Iterator[None]:
    """Within the block ``sys.stdout`` raises :class:`StdoutError` for a failed write; the
    stream the block found is put back after it. Only the process's own standard output is
    replaced: a stream put there by someone else (a test's capture) is left as it is."""
    original = sys.stdout
    if original is not None and original is not sys.__stdout__:
        yield
        return
    _hold_closed_descriptor()
    encoding = getattr(original, "encoding", None) or "utf-8"
    errors = getattr(original, "errors", None) or "strict"
    line_buffering = bool(getattr(original, "line_buffering", False))
    raw = _StdoutFile(STDOUT_FD, "w", closefd=False)
    stream = io.TextIOWrapper(io.BufferedWriter(raw), encoding=encoding, errors=errors, line_buffering=line_buffering)
    sys.stdout = stream
    try:
        yield
    finally:
        sys.stdout = original
        with contextlib.suppress(OSError):
            stream.flush()
        with contextlib.suppress(OSError):
            stream.close()


def flush() -> None:
    """Write out what ``sys.stdout`` still holds; raises :class:`StdoutError` when it cannot."""
    if sys.stdout is not None:
        sys.stdout.flush()


def silence() -> None:
    """Point descriptor 1 at ``/dev/null`` and drop what ``sys.stdout`` still holds, so that
    nothing fails again there (the interpreter flushes it at exit) after the failure was said."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, STDOUT_FD)
    os.close(devnull)
    with contextlib.suppress(OSError, ValueError):
        if sys.stdout is not None:
            sys.stdout.flush()


def _hold_closed_descriptor() -> None:
    """A closed descriptor 1 gets ``/dev/null``, read-only, in its place (see the module's docstring)."""
    try:
        os.fstat(STDOUT_FD)
    except OSError:
        pass
    else:
        return
    placeholder = os.open(os.devnull, os.O_RDONLY)  # not inherited: a program run gets standard output closed, as given
    if placeholder != STDOUT_FD:
        os.dup2(placeholder, STDOUT_FD, inheritable=False)
        os.close(placeholder)
