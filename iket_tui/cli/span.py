"""The stretch of a recording that ``--from`` and ``--to`` name, for the commands that read one
(``dump``, ``cut``): its checks, in the user's words."""

from __future__ import annotations

import argparse
from pathlib import Path

from iket_tui.cli.errors import UsageError
from iket_tui.sources.span import SpanCursor, TimeSpan


def time_span(args: argparse.Namespace) -> TimeSpan:
    """The span ``--from`` and ``--to`` name; a usage error when it runs backwards."""
    try:
        return TimeSpan(args.from_s, args.to_s)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def nothing_in(path: Path, span: TimeSpan, cursor: SpanCursor) -> UsageError:
    """The error for a span that holds no message of the recording read through ``cursor``."""
    return UsageError(f"{path}: nothing recorded {span.said()} ({cursor.length_said()})")
