"""The timeline bar of a replay: one line under the header drawing the recording from its start
to its end, with its compiles, failures, stuck passes, quiet warps and process events marked
and where the replay stands; a click jumps there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from iket_tui.sources.timeline import MarkKind, RecordingTimeline

_GLYPHS: dict[MarkKind, str] = {
    MarkKind.FAILURE: "✗",
    MarkKind.STUCK: "!",
    MarkKind.QUIET: "~",
    MarkKind.PROCESS: "│",
    MarkKind.COMPILE: "·",
}
_RANK = (MarkKind.FAILURE, MarkKind.STUCK, MarkKind.QUIET, MarkKind.PROCESS, MarkKind.COMPILE)
"""Which mark a column shows when several fall in it: the first of these."""
_CLASS: dict[MarkKind, str] = {
    MarkKind.FAILURE: "timeline-bar--failure",
    MarkKind.STUCK: "timeline-bar--stuck",
    MarkKind.QUIET: "timeline-bar--quiet",
    MarkKind.PROCESS: "timeline-bar--process",
    MarkKind.COMPILE: "timeline-bar--compile",
}
PLAYED = "━"
AHEAD = "─"


@dataclass(frozen=True)
class Cell:
    """One column of the bar: its character and its component class."""

    text: str
    style: str


def time_label(timeline: RecordingTimeline | None, position_ns: int | None, playing: str = "") -> str:
    """Where the replay stands and how long the recording is, in seconds, as dump's time column
    reads, then how it plays (``speed 1x``, ``paused``): the header may have no room left for that."""
    tail = f" {playing} " if playing else " "
    if timeline is None:
        return f" reading the recording's timeline…{tail}"
    at = timeline.seconds(position_ns) if position_ns is not None else 0.0
    return f" {max(0.0, at):.1f} / {timeline.seconds(timeline.end_ns):.1f} s{tail}"


def track_cells(timeline: RecordingTimeline, position_ns: int | None, width: int) -> list[Cell]:
    """The track, ``width`` columns each covering an equal share of the recording, showing the
    weightiest mark that falls in it and, in its own style, the column where the replay stands."""
    if width <= 0:
        return []
    length = max(1, timeline.length_ns)
    found: list[MarkKind | None] = [None] * width
    for mark in timeline.marks:
        column = min(width - 1, max(0, (mark.t_ns - timeline.start_ns) * width // length))
        here = found[column]
        if here is None or _RANK.index(mark.kind) < _RANK.index(here):
            found[column] = mark.kind
    at = -1
    if position_ns is not None:
        at = min(width - 1, max(0, (position_ns - timeline.start_ns) * width // length))
    cells = []
    for column, kind in enumerate(found):
        if kind is not None:
            cell = Cell(_GLYPHS[kind], _CLASS[kind])
        elif column < at:
            cell = Cell(PLAYED, "timeline-bar--played")
        else:
            cell = Cell(AHEAD, "timeline-bar--track")
        if column == at:
            cell = Cell(cell.text if kind is not None else "●", "timeline-bar--position")
        cells.append(cell)
    return cells


def time_at(timeline: RecordingTimeline, column: int, width: int) -> int:
    """The recording's time at the middle of a column of a track ``width`` columns wide."""
    return timeline.start_ns + (2 * column + 1) * timeline.length_ns // (2 * max(1, width))


class TimelineBar(Widget):
    """The recording's timeline under the header; a click on the track posts :class:`Jump`."""

    DEFAULT_CSS = """
    TimelineBar {
        height: 1;
        background: $panel;
    }
    TimelineBar > .timeline-bar--label { color: $text-muted; }
    TimelineBar > .timeline-bar--track { color: $text-muted; }
    TimelineBar > .timeline-bar--played { color: $accent; }
    TimelineBar > .timeline-bar--compile { color: $text; }
    TimelineBar > .timeline-bar--process { color: $accent; text-style: bold; }
    TimelineBar > .timeline-bar--quiet { color: $warning; text-style: bold; }
    TimelineBar > .timeline-bar--stuck { color: $warning; text-style: bold; }
    TimelineBar > .timeline-bar--failure { color: $error; text-style: bold; }
    TimelineBar > .timeline-bar--position { background: $accent; color: $text; text-style: bold; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "timeline-bar--label",
        "timeline-bar--track",
        "timeline-bar--played",
        "timeline-bar--compile",
        "timeline-bar--process",
        "timeline-bar--quiet",
        "timeline-bar--stuck",
        "timeline-bar--failure",
        "timeline-bar--position",
    }

    class Jump(Message):
        """The user clicked the track: jump to ``t_ns``, the recording's time there."""

        def __init__(self, bar: TimelineBar, t_ns: int) -> None:
            super().__init__()
            self.bar = bar
            self.t_ns = t_ns

        @property
        def control(self) -> TimelineBar:
            return self.bar

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.timeline: RecordingTimeline | None = None
        self.position_ns: int | None = None
        self.playing = ""

    def show(self, timeline: RecordingTimeline | None, position_ns: int | None, playing: str = "") -> None:
        """Draw ``timeline`` with the replay at ``position_ns``, playing as ``playing`` says;
        repaints only on a change."""
        if timeline is self.timeline and position_ns == self.position_ns and playing == self.playing:
            return
        self.timeline = timeline
        self.position_ns = position_ns
        self.playing = playing
        self.refresh()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y != 0 or width <= 0:
            return Strip.blank(width, self.rich_style)
        label = time_label(self.timeline, self.position_ns, self.playing)
        segments = [Segment(label, self.get_component_rich_style("timeline-bar--label"))]
        if self.timeline is not None:
            cells = track_cells(self.timeline, self.position_ns, width - len(label) - 1)
            styles: dict[str, Style] = {}
            for cell in cells:
                style = styles.get(cell.style)
                if style is None:
                    style = styles[cell.style] = self.get_component_rich_style(cell.style)
                segments.append(Segment(cell.text, style))
        return Strip(segments).adjust_cell_length(width, self.rich_style)

    def on_click(self, event: events.Click) -> None:
        timeline = self.timeline
        if timeline is None:
            return
        label = len(time_label(timeline, self.position_ns, self.playing))
        width = self.size.width - label - 1
        column = event.x - label
        if 0 <= column < width:
            event.stop()
            self.post_message(self.Jump(self, time_at(timeline, column, width)))
