"""What every export format shares: the session of a whole recording, the one-line error of a
recording a format cannot show, and how host times become a trace's microseconds."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Final

from iket_tui.model.nodes import CompileNode
from iket_tui.model.session import Session

STREAM_END: Final = "the recording ends here"


class ExportError(ValueError):
    """A recording that holds nothing the chosen format can show; the message is one line."""


def recording_session(messages: Iterable[Any]) -> Session:
    """The session of a whole recording: its pass tree and kernel timeline; whatever was still
    open when the recording ends is closed as incomplete at the last time seen."""
    session = Session()
    session.apply(messages)
    session.end_stream(STREAM_END)
    return session


def session_notes(session: Session) -> tuple[str, ...]:
    """One-line remarks for the user about messages of the recording that the export left out."""
    malformed = session.counters.malformed
    if not malformed:
        return ()
    return (f"skipped {malformed} malformed messages (missing or impossible fields, e.g. a damaged kernel batch)",)


def compile_finish(comp: CompileNode, last_ns: int) -> int:
    """When a compile ended, or the last time seen for one that never did."""
    return comp.end_ns if comp.end_ns is not None else max(comp.begin_ns, last_ns)


def micros(ns: int) -> float:
    """Nanoseconds as the microseconds a trace holds: the double nearest ``ns / 1000`` that is
    not below it, so that a reader that multiplies by 1000 and truncates (as Perfetto does)
    gets ``ns`` back exactly."""
    value = ns / 1000
    return math.nextafter(value, math.inf) if value * 1000 < ns else value
