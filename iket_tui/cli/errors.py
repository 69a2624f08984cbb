"""What a command says on stderr (one ``iket-tui: ...`` line), the usage error that ends it, and the exit codes."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

PROG = "iket-tui"
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 128 + signal.SIGINT


class UsageError(Exception):
    """The command line asks for something that cannot be done; a one-line message."""


def say(message: str) -> None:
    """One line on stderr, named after the program, so that it reads apart from a program's own output."""
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


def check_writable(path: Path) -> None:
    """Fail with a usage error before any work when ``path`` cannot be written, rather than after it."""
    if path.is_dir():
        raise UsageError(f"{path}: is a directory")
    parent = path.parent
    if not parent.is_dir():
        raise UsageError(f"{path}: no such directory {parent}")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"{path}: permission denied")
