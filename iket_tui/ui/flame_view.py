"""The per-block flame view of one launch: a Line API view over :class:`FlameLayout`.

Each screen row is painted from the layout's runs and cached under what it shows (the launch's
version, the row, the time window, the cursor column when the cursor is on it), so moving the
cursor repaints two rows and new records repaint only what they changed. Colours come from the
widget's component classes: the layout gives each bar a palette index, the stylesheet says
what each index looks like. While the launch runs, the label of each warp that has not ended
is marked (``▸w4``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widget import Widget

from iket_tui.durations import duration
from iket_tui.model.flame_layout import (
    BLOCK,
    LANE,
    PALETTE_SIZE,
    FitSpan,
    FlameLayout,
    FlameRow,
    Run,
    SmLayout,
    Window,
    event_of,
    fit_span,
)
from iket_tui.model.flame_text import describe_cursor, ruler
from iket_tui.model.flame_text import describe_row as describe_flame_row
from iket_tui.model.launches import Launch
from iket_tui.model.running_kernels import open_lanes

LABEL = 6
"""Columns for the warp label at the left of each lane row."""
ZOOM = 2.0


@dataclass(frozen=True)
class FlameStyles:
    """Rich styles of each part of a row, resolved from the view's component classes over its
    own style; ``cursor`` is added over whatever the cursor is on."""

    base: Style
    title: Style
    label: Style
    running: Style
    """The label of a warp that has not ended."""
    unmatched: Style
    mark: Style
    cursor: Style
    bars: tuple[Style, ...]
    """Per palette index, a bar of that colour."""
    unbalanced_bars: tuple[Style, ...]
    """Per palette index, a range of that colour that lacks its end or its start."""

    def of(self, run: Run) -> Style:
        """The style of a run that shows a span, mark or block."""
        if run.tone < 0:
            return self.mark
        return (self.unbalanced_bars if run.unbalanced else self.bars)[run.tone]


class FlameView(ScrollView, can_focus=True):
    """Blocks and warps of one launch on one time axis, with a cursor (a row and a column)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("down,j", "cursor_down", "Warp", key_display="↑↓"),
        Binding("up,k", "cursor_up", "Up", show=False),
        Binding("greater_than_sign,shift+down", "step_launch(1)", "Launch", key_display="<>"),
        Binding("less_than_sign,shift+up", "step_launch(-1)", "Newer launch", show=False),
        Binding("left,h", "cursor_left", "Earlier", show=False),
        Binding("right,l", "cursor_right", "Later", show=False),
        Binding("shift+left,H", "pan(-8)", "Pan left", show=False),
        Binding("shift+right,L", "pan(8)", "Pan right", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("i", "zoom(2.0)", "Zoom", key_display="i o"),
        Binding("o", "zoom(0.5)", "Zoom out", show=False),
        Binding("0", "fit", "Fit"),
        Binding("m", "toggle_grouping", "By SM"),
        Binding("b", "next_block(1)", "Next block", show=False),
        Binding("B", "next_block(-1)", "Previous block", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "flame-view--title",
        "flame-view--label",
        "flame-view--running",
        "flame-view--unmatched",
        "flame-view--mark",
        "flame-view--unbalanced",
        "flame-view--cursor",
        *(f"flame-view--bar-{tone}" for tone in range(PALETTE_SIZE)),
    }
    """``title``: a block's title row; ``label``: the warp or SM at the left of a row;
    ``unmatched``: events that do not match the search; ``mark``: a mark; ``unbalanced``: added
    over a range that lacks its end or its start; ``cursor``: the cell under the cursor;
    ``bar-N``: bars of palette index N."""

    DEFAULT_CSS = """
    FlameView {
        overflow-x: hidden;
        overflow-y: scroll;
        & > .flame-view--title { text-style: bold dim; }
        & > .flame-view--label { text-style: dim; }
        & > .flame-view--running { color: $warning; text-style: bold; }
        & > .flame-view--unmatched { text-style: dim; }
        & > .flame-view--mark { color: ansi_white; text-style: bold; }
        & > .flame-view--unbalanced { text-style: italic underline; }
        & > .flame-view--cursor { text-style: reverse bold; }
        & > .flame-view--bar-0 { background: #1f77b4; color: ansi_white; }
        & > .flame-view--bar-1 { background: #ff7f0e; color: ansi_white; }
        & > .flame-view--bar-2 { background: #2ca02c; color: ansi_white; }
        & > .flame-view--bar-3 { background: #d62728; color: ansi_white; }
        & > .flame-view--bar-4 { background: #9467bd; color: ansi_white; }
        & > .flame-view--bar-5 { background: #8c564b; color: ansi_white; }
        & > .flame-view--bar-6 { background: #e377c2; color: ansi_white; }
        & > .flame-view--bar-7 { background: #7f7f7f; color: ansi_white; }
        & > .flame-view--bar-8 { background: #bcbd22; color: ansi_white; }
        & > .flame-view--bar-9 { background: #17becf; color: ansi_white; }
        & > .flame-view--bar-10 { background: #3b5b92; color: ansi_white; }
        & > .flame-view--bar-11 { background: #b85c00; color: ansi_white; }
    }
    """

    @dataclass
    class CursorMoved(Message):
        """The cursor moved: what is under it may have changed."""

        view: FlameView

        @property
        def control(self) -> FlameView:
            return self.view

    @dataclass
    class LaunchStep(Message):
        """The user asked for the next launch (``direction`` 1: older) or the one before (-1)."""

        view: FlameView
        direction: int

        @property
        def control(self) -> FlameView:
            return self.view

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.launch: Launch | None = None
        self.flame: FlameLayout | SmLayout | None = None
        self.match = ""
        """Only ranges and marks whose event name holds this (any case) are drawn; empty: all."""
        self.by_sm = False
        """Rows are SMs (the blocks that ran on each, over time) rather than blocks and warps."""
        self.window = Window(0.0, 1.0, 1)
        self.cursor_row = 0
        self.cursor_column = 0
        self.fitted = True
        """The launch is fitted to the width; it stays so as the view is resized or records arrive."""
        self.whole = False
        """Fitted to the whole launch, rather than to where its blocks ran (:class:`FitSpan`)."""
        self.span = FitSpan(0, ())
        """What a fit shows of the launch shown."""
        self._version = -1
        self.running: frozenset[tuple[int, int]] = frozenset()
        """(block, warp) of the launch's warps that have not ended: their labels are marked."""
        self._cache: LRUCache[tuple[Any, ...], Strip] = LRUCache(2048)
        self._styles: FlameStyles | None = None

    # What is shown

    def show_launch(self, launch: Launch | None) -> None:
        """Show ``launch`` (fitted) or, for the launch already shown, catch up with new records."""
        shown = self.launch
        # Launches of two processes may share a key: the same one is the same key in the same process.
        same = launch is not None and shown is not None and (launch.key, launch.process) == (shown.key, shown.process)
        if same and launch is not None and launch.version == self._version:
            return
        self.launch = launch
        if launch is None:
            self.flame = None
            self.running = frozenset()
            self._version = -1
            self.virtual_size = Size(self._columns, 0)
            self.refresh()
            return
        self._version = launch.version
        self.flame = self._layout(launch)
        self.span = fit_span(launch.spans(), launch.duration_ns)
        self.running = open_lanes(launch.progress, launch.spans().blocks) if launch.running else frozenset()
        if not same:
            self.whole = False
        if not same or self.fitted:
            self.window = self._fitted_window()
            self.fitted = True
        if not same:
            self.cursor_row = min(1, len(self.flame.rows) - 1)
            self.cursor_column = 0
        self.virtual_size = Size(self.size.width, len(self.flame.rows))
        self._cache.clear()
        self.refresh()
        self.post_message(self.CursorMoved(self))

    def _layout(self, launch: Launch) -> FlameLayout | SmLayout:
        if self.by_sm:
            return SmLayout(launch.spans(), launch.duration_ns)
        return FlameLayout(launch.spans(), launch.duration_ns)

    def action_toggle_grouping(self) -> None:
        """Group rows by SM, or back by block and warp, keeping the block under the cursor."""
        self.by_sm = not self.by_sm
        launch, layout = self.launch, self.flame
        if launch is None or layout is None:
            return
        block = layout.rows[self.cursor_row].block if layout.rows and not isinstance(layout, SmLayout) else None
        if isinstance(layout, SmLayout) and (found := self.under_cursor()) is not None and found[0] == "block":
            block = found[1]
        self.flame = self._layout(launch)
        self.virtual_size = Size(self.size.width, len(self.flame.rows))
        self._cache.clear()
        self.cursor_row = 0
        if block is not None:
            self._move_to(self.flame.block_row[block] + (0 if self.by_sm else 1), self.cursor_column)
        self.refresh()
        self.post_message(self.CursorMoved(self))

    def set_match(self, text: str) -> None:
        """Draw only the events whose name holds ``text``."""
        self.match = text.lower()
        self._cache.clear()
        self.refresh()

    def matching_events(self) -> list[int]:
        launch = self.launch
        if launch is None or launch.module is None:
            return []
        return [event.event_id for event in launch.module.events if self.match in event.name.lower()]

    def next_match(self) -> bool:
        """Put the cursor on the next range of a matching event (reading order, wrapping)."""
        layout = self.flame
        if not isinstance(layout, FlameLayout) or not self.match:
            return False
        found = layout.next_span(np.array(self.matching_events()), self.cursor_row, self.cursor_time_ns())
        if found is None:
            return False
        span = layout.spans.spans[found]
        start = 0 if span["flags"] & 2 else int(span["start_ns"])
        row = int(layout.span_row[found])
        column = self.window.column_of(start + self.window.ns_per_column / 2)
        if not 0 <= column < self._columns:
            self.fitted = False
            self.window = Window(
                start - self._columns * self.window.ns_per_column / 4, self.window.ns_per_column, self._columns
            )
            self._cache.clear()
            column = self.window.column_of(start + self.window.ns_per_column / 2)
        self._move_to(row, column)
        self.refresh()
        return True

    def describe_row(self) -> list[str]:
        """Lines about the block, warp or SM of the cursor's row, for the detail pane."""
        return describe_flame_row(self.launch, self.flame, self.cursor_row)

    def under_cursor(self) -> tuple[str, int] | None:
        """The span or mark under the cursor: ``("span", index)`` or ``("mark", index)``."""
        if self.flame is None or not self.flame.rows:
            return None
        row = self.flame.rows[self.cursor_row]
        return self.flame.at(row, self.window.time_of(self.cursor_column), self.window.ns_per_column)

    def cursor_time_ns(self) -> float:
        return self.window.time_of(self.cursor_column)

    def describe_under_cursor(self) -> str:
        """One line about the cursor: where it is, and the bar or mark under it with its payload."""
        return describe_cursor(self.launch, self.flame, self.cursor_row, self.window, self.cursor_column)

    # Actions

    def action_cursor_up(self) -> None:
        self._move_to(self.cursor_row - 1, self.cursor_column)

    def action_cursor_down(self) -> None:
        self._move_to(self.cursor_row + 1, self.cursor_column)

    def action_page(self, direction: int) -> None:
        self._move_to(self.cursor_row + direction * max(1, self.size.height - 1), self.cursor_column)

    def action_cursor_left(self) -> None:
        if self.cursor_column == 0:
            self.action_pan(-max(1, self._columns // 4))
        else:
            self._move_to(self.cursor_row, self.cursor_column - 1)

    def action_cursor_right(self) -> None:
        if self.cursor_column >= self._columns - 1:
            self.action_pan(max(1, self._columns // 4))
        else:
            self._move_to(self.cursor_row, self.cursor_column + 1)

    def action_pan(self, columns: int) -> None:
        self.fitted = False
        self._set_window(self.window.panned(columns))

    def action_zoom(self, factor: float) -> None:
        self.fitted = False
        self._set_window(self.window.zoomed(factor, self.cursor_column))

    def action_fit(self) -> None:
        """Fit where the blocks ran; pressed again where some block ran on past that, the whole launch."""
        if self.launch is not None:
            time = self.cursor_time_ns()
            self.whole = self.fitted and not self.whole and bool(self.span.beyond)
            self.fitted = True
            self._set_window(self._fitted_window())
            self.cursor_column = max(0, min(self._columns - 1, self.window.column_of(time)))

    def _fitted_window(self) -> Window:
        launch = self.launch
        if launch is None:
            return self.window
        return Window.fit(launch.duration_ns if self.whole else self.span.ns, self._columns)

    def fit_note(self) -> str:
        """What a fit leaves out: the blocks that ran on past the right edge, and how to see them."""
        beyond, layout = self.span.beyond, self.flame
        if not self.fitted or self.whole or not beyond or layout is None:
            return ""
        spans = layout.spans
        named = ", ".join(
            "(" + ",".join(str(int(v)) for v in spans.blocks[block][: 3 if spans.blocks[block][2] else 2]) + ")"
            for block in beyond[:2]
        )
        more = f" and {len(beyond) - 2} more" if len(beyond) > 2 else ""
        end = duration(int(spans.block_end_ns[beyond[0]]))
        return (
            f"{'block' if len(beyond) == 1 else 'blocks'} {named}{more} ran on to t+{end},"
            " past the right edge: 0 shows the whole launch"
        )

    def action_step_launch(self, direction: int) -> None:
        self.post_message(self.LaunchStep(self, direction))

    def action_next_block(self, direction: int) -> None:
        if self.flame is None or not self.flame.rows:
            return
        current = self.flame.rows[self.cursor_row].block
        target = max(0, min(len(self.flame.block_row) - 1, current + direction))
        self.jump_to_block(target)

    def jump_to_block(self, block: int) -> bool:
        """Put the cursor on the first warp of block number ``block`` (in launch order)."""
        if self.flame is None or not 0 <= block < len(self.flame.block_row):
            return False
        row = self.flame.block_row[block]
        self._move_to(min(row + 1, len(self.flame.rows) - 1), self.cursor_column)
        self.scroll_to(y=row, animate=False)
        return True

    # Mouse

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        self.focus()
        self._move_to(self.scroll_offset.y + offset.y, max(0, offset.x - LABEL))

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        if event.ctrl:
            event.prevent_default()
            self.action_zoom(1 / ZOOM)

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        if event.ctrl:
            event.prevent_default()
            self.action_zoom(ZOOM)

    # Rendering

    @property
    def _columns(self) -> int:
        return max(1, self.scrollable_content_region.width - LABEL)

    def _flame_styles(self) -> FlameStyles:
        if self._styles is None:
            base = self.rich_style

            def part(name: str) -> Style:
                return self.get_component_rich_style(f"flame-view--{name}", partial=True)

            bars = tuple(base + part(f"bar-{tone}") for tone in range(PALETTE_SIZE))
            unbalanced = part("unbalanced")
            self._styles = FlameStyles(
                base=base,
                title=base + part("title"),
                label=base + part("label"),
                running=base + part("running"),
                unmatched=base + part("unmatched"),
                mark=base + part("mark"),
                cursor=part("cursor"),
                bars=bars,
                unbalanced_bars=tuple(bar + unbalanced for bar in bars),
            )
        return self._styles

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles = None
        self._cache.clear()

    def _on_resize(self, event: events.Resize) -> None:
        if self.launch is not None and self.window.columns != self._columns:
            self._set_window(self._fitted_window() if self.fitted else self.window.resized(self._columns))
        if self.flame is not None:
            self.virtual_size = Size(self.size.width, len(self.flame.rows))

    def _set_window(self, window: Window) -> None:
        self.window = window
        self.cursor_column = max(0, min(window.columns - 1, self.cursor_column))
        self._cache.clear()
        self.refresh()
        self.post_message(self.CursorMoved(self))

    def _move_to(self, row: int, column: int) -> None:
        if self.flame is None or not self.flame.rows:
            return
        row = max(0, min(len(self.flame.rows) - 1, row))
        column = max(0, min(self._columns - 1, column))
        old = self.cursor_row
        self.cursor_row, self.cursor_column = row, column
        self.refresh_line(old)
        self.refresh_line(row)
        top, height = self.scroll_offset.y, max(1, self.scrollable_content_region.height)
        if row < top:
            self.scroll_to(y=row, animate=False)
        elif row >= top + height:
            self.scroll_to(y=row - height + 1, animate=False)
        self.post_message(self.CursorMoved(self))

    def render_line(self, y: int) -> Strip:
        index = self.scroll_offset.y + y
        width = self.scrollable_content_region.width
        layout, launch = self.flame, self.launch
        styles = self._flame_styles()
        if layout is None or launch is None or not 0 <= index < len(layout.rows):
            return Strip.blank(width, styles.base)
        cursor = self.cursor_column if index == self.cursor_row else -1
        key = (index, self._version, self.window, width, cursor, self.has_focus)
        cached = self._cache.get(key)
        if cached is None:
            cached = self._paint(layout.rows[index], launch, layout, cursor, width, styles)
            self._cache[key] = cached
        return cached

    def _paint(
        self,
        row: FlameRow,
        launch: Launch,
        layout: FlameLayout | SmLayout,
        cursor: int,
        width: int,
        styles: FlameStyles,
    ) -> Strip:
        if row.kind == BLOCK:
            title = f" {layout.block_title(row.block)} "
            return Strip([Segment(title[:width].ljust(width), styles.title)], width)
        label = layout.label(row)
        if row.kind == LANE and label and (row.block, row.warp) in self.running:
            segments = [Segment(("▸" + label).rjust(LABEL - 1)[: LABEL - 1] + " ", styles.running)]
        else:
            segments = [Segment(label.rjust(LABEL - 1)[: LABEL - 1] + " ", styles.label)]
        for run in layout.paint(row, self.window, launch.event_name):
            style = styles.base
            if run.what is not None:
                if self.match:
                    event_id = event_of(layout.spans, run.what)
                    if event_id is None or self.match not in launch.event_name(event_id).lower():
                        text = " " * len(run.text) if run.what[0] != "block" else run.text
                        segments.append(Segment(text, styles.unmatched))
                        continue
                style = styles.of(run)
            if run.start <= cursor < run.end:
                before, at, after = (
                    run.text[: cursor - run.start],
                    run.text[cursor - run.start],
                    run.text[cursor - run.start + 1 :],
                )
                if before:
                    segments.append(Segment(before, style))
                segments.append(Segment(at if at != " " else "▏", style + styles.cursor))
                if after:
                    segments.append(Segment(after, style))
            else:
                segments.append(Segment(run.text, style))
        return Strip(segments, width).crop(0, width)


class TimeRuler(Widget):
    """The time axis above a :class:`FlameView`: ticks at round times since the launch began."""

    DEFAULT_CSS = """
    TimeRuler { height: 1; color: $text-muted; }
    """

    def __init__(self, view: FlameView, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.view = view

    def render(self) -> str:
        window = self.view.window
        return " " * LABEL + ruler(window.start_ns, window.ns_per_column, window.columns)
