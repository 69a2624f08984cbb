"""The ``iket-tui`` command line: one subcommand per job (``iket-tui --help`` lists them)."""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Callable

from iket_tui.cli import standard_output
from iket_tui.cli.config import apply_config, config_keys, reads_config
from iket_tui.cli.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, UsageError, say
from iket_tui.cli.parser import build_parser
from iket_tui.cli.standard_output import StdoutError
from iket_tui.endpoints import EndpointError
from iket_tui.sources.base import SourceError

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns the process exit code.

    Every bad input ends in one line on stderr (``iket-tui: ...``) and exit code 2, never a
    traceback, a standard output that cannot be written (full, closed) included; Ctrl-C ends
    with 130 and leaves any recording valid. Textual is imported only by the commands that
    show the UI.
    """
    with standard_output.guarded():
        try:
            code = _command(argv)
            standard_output.flush()
        except StdoutError as exc:
            standard_output.silence()
            if exc.errno == errno.EPIPE:
                return 0  # a reader that had enough (| head): not an error
            say(standard_output.said(exc))
            return EXIT_BAD_INPUT
        return code


def _command(argv: list[str] | None) -> int:
    """Parse the command line and run its command; a failed write to standard output is left to :func:`main`."""
    parser = build_parser()
    keys = config_keys()
    try:
        if reads_config(parser, keys, sys.argv[1:] if argv is None else argv):
            apply_config(parser, keys)
    except UsageError as exc:
        say(str(exc))
        return EXIT_BAD_INPUT
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 0
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:
        say(f"choose a command: {', '.join(_commands(parser))} (see --help)")
        return EXIT_BAD_INPUT
    try:
        return handler(args)
    except (SourceError, EndpointError, UsageError) as exc:
        say(str(exc))
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except StdoutError:
        raise
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except Exception as exc:
        if os.environ.get("IKET_TUI_DEBUG"):
            raise
        say(f"internal error: {type(exc).__name__}: {exc} (IKET_TUI_DEBUG=1 shows the traceback)")
        return 1


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that a reader that went away (``| head``) causes no error at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _commands(parser: argparse.ArgumentParser) -> list[str]:
    """The subcommands, in the order --help lists them."""
    return [
        name for action in parser._actions if isinstance(action, argparse._SubParsersAction) for name in action.choices
    ]
