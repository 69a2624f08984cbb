"""What every export format shares: the session of a whole recording, the one-line error of a
recording a format cannot show, every process's kernel launches, the processes of a recording
of several in the order and words a trace names them, and how host times become a trace's
microseconds."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Final

from iket_tui.model.launches import Launch
from iket_tui.model.nodes import CompileNode, ProcessNode
from iket_tui.model.pass_bound import UNBOUNDED_PASSES
from iket_tui.model.session import Session

STREAM_END: Final = "the recording ends here"


class ExportError(ValueError):
    """A recording that holds nothing the chosen format can show; the message is one line."""


def launches_of(session: Session) -> list[Launch]:
    """Every process's kernel launches, in the order they first appeared."""
    timelines = session.kernel_processes.timelines.values()
    return sorted((launch for timeline in timelines for launch in timeline.launches.values()), key=_order)


def _order(launch: Launch) -> int:
    return launch.order


def launch_process(session: Session, launch: Launch) -> ProcessNode:
    """The process a launch ran in (the first process for a launch that names none)."""
    return launch.process if launch.process is not None else session.tree.process


def compile_process(session: Session, comp: CompileNode) -> ProcessNode:
    """The process a compile ran in (the first process for a compile that names none)."""
    return comp.process if comp.process is not None else session.tree.process


def recording_session(messages: Iterable[Any]) -> Session:
    """The session of a whole recording: its pass tree and kernel timeline; whatever was still
    open when the recording ends is closed as incomplete at the last time seen."""
    session = Session(max_passes=UNBOUNDED_PASSES)  # an export writes every pass
    session.apply(messages)
    session.end_stream(STREAM_END)
    return session


def session_notes(session: Session) -> tuple[str, ...]:
    """One-line remarks for the user about messages of the recording that the export left out."""
    notes = []
    malformed = session.counters.malformed
    if malformed:
        notes.append(
            f"skipped {malformed} malformed messages (missing or impossible fields, e.g. a damaged kernel batch)"
        )
    late = session.tree.late_events
    if late:
        notes.append(f"left out {late} pass and codegen events that came after their compile had ended and was written")
    return tuple(notes)


def compile_finish(comp: CompileNode, last_ns: int) -> int:
    """When a compile ended, or the last time seen for one that never did; never before it began
    (a recording that lies can end it earlier), so that every export draws it from its begin."""
    return max(comp.begin_ns, comp.end_ns if comp.end_ns is not None else last_ns)


def micros(ns: int) -> float:
    """Nanoseconds as the microseconds a trace holds: the double nearest ``ns / 1000`` that is
    not below it, so that a reader that multiplies by 1000 and truncates (as Perfetto does)
    gets ``ns`` back exactly."""
    value = ns / 1000
    return math.nextafter(value, math.inf) if value * 1000 < ns else value


RANKLESS_SORT: Final = 1 << 20
"""Where processes without a rank sort, after every ranked one (in the order they appeared)."""


def process_title(process: ProcessNode) -> str:
    """A process of several in a trace's words: ``pid 4242 rank 3: python train.py``."""
    title = process.name if process.pid is not None else "process"
    if process.rank is not None:
        title += f" rank {process.rank}"
    return f"{title}: {process.command}" if process.command else title


def process_sort(processes: list[ProcessNode]) -> list[tuple[int, ProcessNode]]:
    """Each process with its number in a trace (its place among those that appeared, from 1),
    ordered by rank where known, the others after them in the order they appeared."""
    numbered = list(enumerate(processes, start=1))
    return sorted(numbered, key=lambda item: sort_index(item[1], item[0]))


def sort_index(process: ProcessNode, number: int) -> int:
    """Where a process sorts among the processes of a trace (see :func:`process_sort`)."""
    return process.rank if process.rank is not None and 0 <= process.rank < RANKLESS_SORT else RANKLESS_SORT + number
