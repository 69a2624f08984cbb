"""Where things happen in a recording: its start and end, and the times of its compiles,
failures, stuck passes, quiet warps and process events, found by one read of the file.

The read builds the model as a replay from the start does, at full speed, so that a stuck pass
or a quiet warp is marked where the UI would call it so: at the first heartbeat or checkpoint
(about one a second) at which the model says it is. A replay jumps to these times
(:meth:`~iket_tui.sources.replay.RecordingSource.seek`); the timeline bar draws them.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from iket_tui.model.nodes import PassNode
from iket_tui.model.session import Session
from iket_tui.protocol import messages as m
from iket_tui.sources.reading import RecordingReader


class MarkKind(StrEnum):
    """What a mark on the timeline is, in the user's words."""

    COMPILE = "compile"
    FAILURE = "failure"
    STUCK = "stuck pass"
    QUIET = "quiet warp"
    PROCESS = "process event"


@dataclass(frozen=True, order=True)
class Mark:
    """One moment worth jumping to: ``t_ns`` on the recording's clock, and what happened."""

    t_ns: int
    kind: MarkKind = field(compare=False)
    what: str = field(compare=False)


@dataclass(frozen=True)
class RecordingTimeline:
    """A recording's span on its own clock and its marks, in time order."""

    start_ns: int
    end_ns: int
    marks: tuple[Mark, ...] = ()

    @property
    def length_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)

    def seconds(self, t_ns: int) -> float:
        """``t_ns`` as seconds from the recording's start, as dump's time column reads."""
        return (t_ns - self.start_ns) / 1e9

    def next_mark(self, kinds: Iterable[MarkKind], after_ns: int) -> Mark | None:
        """The first mark of one of ``kinds`` later than ``after_ns``."""
        wanted = frozenset(kinds)
        times = [mark.t_ns for mark in self.marks]
        for mark in self.marks[bisect.bisect_right(times, after_ns) :]:
            if mark.kind in wanted:
                return mark
        return None

    def previous_mark(self, kinds: Iterable[MarkKind], before_ns: int) -> Mark | None:
        """The last mark of one of ``kinds`` earlier than ``before_ns``."""
        wanted = frozenset(kinds)
        times = [mark.t_ns for mark in self.marks]
        for mark in reversed(self.marks[: bisect.bisect_left(times, before_ns)]):
            if mark.kind in wanted:
                return mark
        return None


PASSES_KEPT = 100_000
"""Passes the reading's own model keeps (the oldest finished compiles summarised past it): it is
asked only what runs at each beat, and should not hold a second copy of a long recording's tree
beside the replay's."""
_SAMPLED = frozenset({m.HEARTBEAT, m.CHECKPOINT, m.END, m.BYE})
"""Messages at which the model is asked what is stuck or quiet: the recording's steady beats."""


def scan_timeline(
    path: Path, *, stuck_after_ns: int | None = None, kernel_stuck_after_ns: int | None = None
) -> RecordingTimeline:
    """Read the recording at ``path`` once and mark where things happen in it, with the UI's
    thresholds for a stuck pass and a quiet warp (the model's defaults when None). Raises
    :class:`~iket_tui.sources.base.SourceError` for a file that is not a readable recording."""
    if stuck_after_ns is None:
        session = Session(max_passes=PASSES_KEPT)
    else:
        session = Session(stuck_after_ns=stuck_after_ns, max_passes=PASSES_KEPT)
    if kernel_stuck_after_ns is not None:
        session.kernels.stuck_after_ns = kernel_stuck_after_ns
    marks: list[Mark] = []
    stuck: set[PassNode] = set()
    quiet: set[Any] = set()
    start: int | None = None
    end = 0
    names: dict[tuple[Any, Any], str] = {}  # (process, compile): what its compile_begin named it
    process: Any = None
    for chunk in RecordingReader(path, rows=True).chunks():
        applied = 0
        for index, item in enumerate(chunk):
            if isinstance(item, list):  # a pass row: marked, if stuck, at the next beat
                t = item[8]
                if type(t) is int and t > end:
                    end = t
                    if start is None and t > 0:
                        start = t
                continue
            t = item.get("t_ns")
            if type(t) is not int or t <= 0:
                continue
            if start is None:
                start = t
            end = max(end, t)
            kind = item.get("type")
            if kind == m.PROCESS or (kind == m.HELLO and process is None):
                process = item.get("pid")
            elif kind == m.COMPILE_BEGIN:
                names[(process, item.get("compile"))] = _name(item)
            mark = _mark_of(item, kind, t, names.get((process, item.get("compile"))))
            if mark is not None:
                marks.append(mark)
            if kind in _SAMPLED:
                session.apply(chunk[applied : index + 1])
                applied = index + 1
                _sample(session, t, marks, stuck, quiet)
        session.apply(chunk[applied:] if applied else chunk)
    if start is None:
        return RecordingTimeline(0, 0, ())
    _sample(session, end, marks, stuck, quiet)
    marks.sort()
    return RecordingTimeline(start, end, tuple(marks))


def _mark_of(msg: m.Message, kind: object, t: int, name: str | None) -> Mark | None:
    """The mark a message makes by itself, if any; ``name``: its compile's, as it began."""
    if kind == m.COMPILE_BEGIN:
        return Mark(t, MarkKind.COMPILE, f"compile {_name(msg)} began")
    if kind == m.COMPILE_END and msg.get("ok") is False:
        return Mark(t, MarkKind.FAILURE, f"compile {name or _name(msg)} failed")
    if kind == m.HELLO and msg.get("role", "agent") == "agent":
        return Mark(t, MarkKind.PROCESS, f"process {msg.get('pid')} connected")
    if kind == m.BYE:
        return Mark(t, MarkKind.PROCESS, f"the process said bye ({msg.get('reason')})")
    if kind == m.PROCESS and msg.get("state") is not None:
        return Mark(t, MarkKind.PROCESS, f"process {msg.get('pid')}'s stream {msg.get('state')}")
    return None


def _name(msg: m.Message) -> str:
    kernel = msg.get("kernel")
    if isinstance(kernel, str) and kernel:
        return kernel
    label = msg.get("label")
    return label if isinstance(label, str) and label else str(msg.get("compile"))


def _sample(session: Session, t: int, marks: list[Mark], stuck: set[PassNode], quiet: set[Any]) -> None:
    """Mark the passes that became stuck and the launches that went quiet by agent time ``t``."""
    tree = session.tree
    for node in tree.running_passes():
        if node not in stuck and tree.is_stuck(node, t):
            stuck.add(node)
            marks.append(Mark(t, MarkKind.STUCK, f"{node.name} stuck in compile {node.compile.title}"))
    for timeline in session.kernel_processes.timelines.values():
        for launch in timeline.quiet(t):
            key = (launch.process, launch.key)
            if key not in quiet:
                quiet.add(key)
                marks.append(Mark(t, MarkKind.QUIET, f"a warp of {launch.kernel} went quiet"))
