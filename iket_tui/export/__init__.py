"""Recordings as files that other viewers open: a Chrome trace (Perfetto, ``chrome://tracing``)
of every kernel launch and compile (:mod:`~iket_tui.export.chrome`), a speedscope profile of
the process, its compiles holding their passes and codegen steps
(:mod:`~iket_tui.export.speedscope`), and Perfetto's native protobuf trace of both
(:mod:`~iket_tui.export.perfetto`), each written while the recording is read, in bounded
memory (:func:`stream_of`). A recording of several
processes keeps them apart in each: a trace process, a profile and a process track per
process, holding its own compiles and launches."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from iket_tui.export.chrome import CLOCKS_NOTE, ChromeStream, chrome_trace
from iket_tui.export.common import STREAM_END, ExportError, recording_session, session_notes
from iket_tui.export.perfetto import PerfettoStream, perfetto_trace
from iket_tui.export.speedscope import SPEEDSCOPE_SCHEMA, SpeedscopeStream, speedscope
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
    "PerfettoStream",
    "SpeedscopeStream",
    "chrome_trace",
    "events_in",
    "export",
    "perfetto_trace",
    "recording_session",
    "session_notes",
    "speedscope",
    "stream_of",
]


def stream_of(
    fmt: str, write: Callable[[bytes], object], *, name: str = ""
) -> ChromeStream | SpeedscopeStream | PerfettoStream:
    """The stream that writes format ``fmt`` through ``write`` while a recording is read: each
    chunk of its messages goes to ``feed``, then ``finish`` completes the file and gives the
    number of events written."""
    if fmt == "chrome":
        return ChromeStream(write, name=name)
    if fmt == "speedscope":
        return SpeedscopeStream(write, name=name)
    if fmt == "perfetto":
        return PerfettoStream(write, name=name)
    raise ExportError(f"unknown export format {fmt!r} (choose {' or '.join(FORMATS + BINARY_FORMATS)})")


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
