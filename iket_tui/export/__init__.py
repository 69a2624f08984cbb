"""Recordings as files that other viewers open: a Chrome trace (Perfetto, ``chrome://tracing``)
of every kernel launch and compile, written while the recording is read
(:mod:`~iket_tui.export.chrome`), and a speedscope profile of the process, its compiles
holding their passes and codegen steps (:mod:`~iket_tui.export.speedscope`), and Perfetto's
native protobuf trace of both (:mod:`~iket_tui.export.perfetto`). A recording of several
processes keeps them apart in each: a trace process, a profile and a process track per
process, holding its own compiles and launches."""

from __future__ import annotations

from typing import Any, Final

from iket_tui.export.chrome import CLOCKS_NOTE, ChromeStream, chrome_trace
from iket_tui.export.common import STREAM_END, ExportError, recording_session, session_notes
from iket_tui.export.perfetto import perfetto_trace
from iket_tui.export.speedscope import SPEEDSCOPE_SCHEMA, speedscope
from iket_tui.model.session import Session

READ_CHUNK: Final = 1 << 15
"""Bytes of the recording an export reads at a time (the reader's default is 1 MiB): its
messages are then applied and written while they still sit in the processor's caches, which
made the whole export markedly faster (BENCHMARKS.md, export)."""
FORMATS: Final = ("chrome", "speedscope")
"""The formats :func:`export` makes as one JSON document."""
BINARY_FORMATS: Final = ("perfetto",)
"""The formats written as bytes (:func:`perfetto_trace`), not as a JSON document."""

__all__ = [
    "BINARY_FORMATS",
    "CLOCKS_NOTE",
    "FORMATS",
    "READ_CHUNK",
    "SPEEDSCOPE_SCHEMA",
    "STREAM_END",
    "ChromeStream",
    "ExportError",
    "chrome_trace",
    "events_in",
    "export",
    "perfetto_trace",
    "recording_session",
    "session_notes",
    "speedscope",
]


def export(session: Session, fmt: str, *, name: str = "") -> dict[str, Any]:
    """The document of format ``fmt`` (one of :data:`FORMATS`) for a recording's session."""
    if fmt == "chrome":
        return chrome_trace(session, name=name)
    if fmt == "speedscope":
        return speedscope(session, name=name)
    raise ExportError(f"unknown export format {fmt!r} (choose {' or '.join(FORMATS)})")


def events_in(document: dict[str, Any]) -> int:
    """How many timed events a document holds (metadata not counted)."""
    if "traceEvents" in document:
        return sum(1 for event in document["traceEvents"] if event["ph"] != "M")
    return sum(len(profile["events"]) for profile in document["profiles"])
