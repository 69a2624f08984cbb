"""The flame view's layout, without Textual: which row shows what, and what each column of a row
shows for a time window. Rows: a band per block (a title row, then the rows of each warp, one
per nesting depth); columns: a shared time axis relative to the launch's first event.

Painting a row is vectorised: spans of one (block, warp, depth) never overlap, so the span
covering each column is found with one binary search over their start columns. Each bar
carries a colour as a palette index (chosen per event, or per block grouped by SM); which
colour an index is, is the view's stylesheet's business.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from iket_tui.model.launches import SPAN_NO_END, SPAN_NO_START, Spans

BLOCK: Final = "block"
LANE: Final = "lane"
SM: Final = "sm"
PALETTE_SIZE: Final = 12
"""Bar colours told apart: the events of one module never share one, up to this many."""


@dataclass(frozen=True)
class FlameRow:
    """One screen row: a block's title row (``level`` -1), one depth of one warp, or (grouped by
    SM) one level of the blocks that ran on SM ``block``."""

    kind: str
    block: int
    warp: int = 0
    level: int = 0


@dataclass(frozen=True)
class Window:
    """The time shown: ``columns`` columns from ``start_ns``, ``ns_per_column`` each."""

    start_ns: float
    ns_per_column: float
    columns: int

    @property
    def end_ns(self) -> float:
        return self.start_ns + self.ns_per_column * self.columns

    def column_of(self, t_ns: float) -> int:
        return math.floor((t_ns - self.start_ns) / self.ns_per_column)

    def time_of(self, column: int) -> float:
        return self.start_ns + (column + 0.5) * self.ns_per_column

    @classmethod
    def fit(cls, duration_ns: int, columns: int) -> Window:
        """The whole launch in ``columns`` columns."""
        columns = max(1, columns)
        return cls(0.0, max(1.0, (duration_ns + 1) / columns), columns)

    def zoomed(self, factor: float, around_column: int) -> Window:
        """Zoomed in by ``factor`` (out when below 1), keeping the time at ``around_column`` in place."""
        anchor = self.time_of(around_column)
        per_column = max(1.0, self.ns_per_column / factor)
        return Window(anchor - (around_column + 0.5) * per_column, per_column, self.columns)

    def panned(self, columns: int) -> Window:
        return Window(self.start_ns + columns * self.ns_per_column, self.ns_per_column, self.columns)

    def resized(self, columns: int) -> Window:
        return Window(self.start_ns, self.ns_per_column, max(1, columns))


OUTRUN: Final = 4.0
"""A block outruns the others when it ends later than this many times the median block's end."""


@dataclass(frozen=True)
class FitSpan:
    """The time a fitted view shows of a launch: where its blocks ran, leaving out the few that
    ran on far longer than the rest (a block that waited seconds would leave every other block
    a column wide), which are named so the view can say they run past its right edge."""

    ns: int
    """From the launch's first event to the end of the last block not left out."""
    beyond: tuple[int, ...]
    """Indices of the blocks left out, latest end first."""


def fit_span(spans: Spans, duration_ns: int) -> FitSpan:
    """The span a fitted view shows of a launch whose events are ``spans`` (see :class:`FitSpan`)."""
    ends = spans.block_end_ns
    if len(ends) < 2:
        return FitSpan(duration_ns, ())
    limit = OUTRUN * max(1.0, float(np.median(ends)))
    beyond = np.flatnonzero(ends > limit)
    if not len(beyond) or len(beyond) * 10 > len(ends):  # a tenth of the blocks or more: the launch's own shape
        return FitSpan(duration_ns, ())
    kept = ends[ends <= limit]
    order = beyond[np.argsort(-ends[beyond], kind="stable")]
    return FitSpan(int(kept.max()), tuple(int(block) for block in order))


@dataclass(frozen=True)
class Run:
    """Columns ``start`` to ``end`` (exclusive) of a painted row: ``text`` over ``what``, which
    is ``None`` (empty), ``("span", index)``, ``("mark", index)`` or ``("block", index)``."""

    start: int
    end: int
    text: str
    what: tuple[str, int] | None
    tone: int = -1
    """The bar's colour, an index below :data:`PALETTE_SIZE`; -1 for a mark or empty columns."""
    unbalanced: bool = False
    """The bar is a range that lacks its end or its start."""


class FlameLayout:
    """The rows of one launch's spans, and an index from each lane row to its spans and marks."""

    def __init__(self, spans: Spans, duration_ns: int) -> None:
        self.spans = spans
        self.duration_ns = duration_ns
        table = spans.spans
        self._event = table["event"]
        self._flags = table["flags"]
        self._tone = event_tones(table["event"])
        max_warps = spans.max_warps
        lane_of = table["block"].astype(np.int64) * max_warps + table["warp"]
        key = lane_of * 256 + table["depth"]
        start = np.where(table["flags"] & SPAN_NO_START, 0, table["start_ns"])
        end = np.where(table["flags"] & SPAN_NO_END, duration_ns, table["end_ns"])
        order = np.lexsort((start, key))
        self._order = order
        self._key = key[order]
        self._start = start[order].astype(np.float64)
        self._end = end[order].astype(np.float64)
        marks = spans.marks
        mark_lane = marks["block"].astype(np.int64) * max_warps + marks["warp"]
        mark_order = np.lexsort((marks["t_ns"], mark_lane))
        self._mark_order = mark_order
        self._mark_lane = mark_lane[mark_order]
        self._mark_t = marks["t_ns"][mark_order].astype(np.float64)

        rows: list[FlameRow] = []
        self.block_row: list[int] = []
        for block in range(len(spans.blocks)):
            self.block_row.append(len(rows))
            rows.append(FlameRow(BLOCK, block, level=-1))
            for warp in range(int(spans.warps[block])):
                depth = max(1, int(spans.depth[block * max_warps + warp]))
                rows.extend(FlameRow(LANE, block, warp, level) for level in range(depth))
        self.rows = rows
        row_of = {(row.block, row.warp, row.level): index for index, row in enumerate(rows) if row.kind == LANE}
        self.span_row = np.array(
            [
                row_of[(int(b), int(w), int(d))]
                for b, w, d in zip(table["block"], table["warp"], table["depth"], strict=True)
            ],
            dtype=np.int64,
        )
        """The row of each span (indexed like ``spans.spans``)."""

    def label(self, row: FlameRow) -> str:
        return f"w{row.warp}" if row.kind == LANE and row.level == 0 else ""

    def next_span(self, events: np.ndarray[Any, Any], after_row: int, after_ns: float) -> int | None:
        """The first span of one of ``events`` (ids) after (``after_row``, ``after_ns``) in reading
        order (row, then time), wrapping around; its index in ``spans.spans``."""
        table = self.spans.spans
        candidates = np.flatnonzero(np.isin(table["event"], events))
        if not len(candidates):
            return None
        starts = np.where(table["flags"][candidates] & SPAN_NO_START, 0, table["start_ns"][candidates])
        order = np.lexsort((starts, self.span_row[candidates]))
        rows, starts, candidates = self.span_row[candidates][order], starts[order], candidates[order]
        later = np.flatnonzero((rows > after_row) | ((rows == after_row) & (starts > after_ns)))
        return int(candidates[later[0]] if len(later) else candidates[0])

    def block_title(self, block: int) -> str:
        x, y, z = (int(v) for v in self.spans.blocks[block])
        where = f"({x},{y},{z})" if z else f"({x},{y})"
        sms = self.spans.spans["sm"][self.spans.spans["block"] == block]
        sm = f" · SM {int(sms[0])}" if len(sms) else ""
        return f"block {where}{sm}"

    def paint(self, row: FlameRow, window: Window, name_of: Any) -> list[Run]:
        """The runs of a lane row over ``window``; ``name_of(event_id)`` names a span's event."""
        columns = window.columns
        if row.kind != LANE:
            return [Run(0, columns, "", None)]
        lane = row.block * self.spans.max_warps + row.warp
        key = lane * 256 + row.level
        lo, hi = np.searchsorted(self._key, [key, key + 1])
        owner = np.full(columns, -1, dtype=np.int64)
        first_col = np.zeros(0, dtype=np.int64)
        if hi > lo:
            starts, ends = self._start[lo:hi], self._end[lo:hi]
            first_col = np.floor((starts - window.start_ns) / window.ns_per_column).astype(np.int64)
            last_col = np.maximum(first_col + 1, np.ceil((ends - window.start_ns) / window.ns_per_column)).astype(
                np.int64
            )
            cols = np.arange(columns)
            found = np.searchsorted(first_col, cols, side="right") - 1
            inside = (found >= 0) & (cols < last_col[np.clip(found, 0, None)])
            owner[inside] = found[inside] + lo
        marks_at: dict[int, int] = {}
        if row.level == 0:
            mlo, mhi = np.searchsorted(self._mark_lane, [lane, lane + 1])
            if mhi > mlo:
                mcols = np.floor((self._mark_t[mlo:mhi] - window.start_ns) / window.ns_per_column).astype(np.int64)
                for offset in np.flatnonzero((mcols >= 0) & (mcols < columns)):
                    marks_at[int(mcols[offset])] = mlo + int(offset)
        runs: list[Run] = []
        pieces: dict[int, list[tuple[int, str, int]]] = {}  # per bar: (run, label, offset) of each piece
        column = 0
        while column < columns:
            if column in marks_at:
                runs.append(Run(column, column + 1, "│", ("mark", int(self._mark_order[marks_at[column]]))))
                column += 1
                continue
            current = int(owner[column])
            end = column + 1
            while end < columns and int(owner[end]) == current and end not in marks_at:
                end += 1
            if current < 0:
                runs.append(Run(column, end, " " * (end - column), None))
            else:
                index = int(self._order[current])
                flags = int(self._flags[index])
                label = _label(name_of(int(self._event[index])), flags)
                begins = max(0, int(first_col[current - lo]))
                if int(self._end[current]) - int(self._start[current]) > 2 * window.ns_per_column:
                    label = "▏" + label  # where a bar begins, so that bars side by side stay apart
                text = label[column - begins : end - begins]
                pieces.setdefault(current, []).append((len(runs), label, column - begins))
                runs.append(
                    Run(column, end, text.ljust(end - column), ("span", index), int(self._tone[index]), flags != 0)
                )
            column = end
        for cut in pieces.values():
            if len(cut) > 1:
                for (at, _, _), text in zip(cut, _labels_of_pieces(cut, runs), strict=True):
                    run = runs[at]
                    runs[at] = Run(
                        run.start, run.end, text.ljust(run.end - run.start), run.what, run.tone, run.unbalanced
                    )
        return runs

    def at(self, row: FlameRow, t_ns: float, tolerance_ns: float) -> tuple[str, int] | None:
        """The mark (within ``tolerance_ns``) or span of a lane row at ``t_ns``."""
        if row.kind != LANE:
            return None
        lane = row.block * self.spans.max_warps + row.warp
        if row.level == 0:
            mlo, mhi = np.searchsorted(self._mark_lane, [lane, lane + 1])
            if mhi > mlo:
                near = np.abs(self._mark_t[mlo:mhi] - t_ns)
                best = int(np.argmin(near))
                if near[best] <= tolerance_ns:
                    return ("mark", int(self._mark_order[mlo + best]))
        key = lane * 256 + row.level
        lo, hi = np.searchsorted(self._key, [key, key + 1])
        if hi > lo:
            found = int(np.searchsorted(self._start[lo:hi], t_ns, side="right")) - 1
            if found >= 0 and t_ns <= self._end[lo + found]:
                return ("span", int(self._order[lo + found]))
        return None


def _labels_of_pieces(cut: list[tuple[int, str, int]], runs: list[Run]) -> list[str]:
    """The text of each piece of a bar cut by marks (``cut``: its runs, its label, and how far
    into the bar each begins): the name whole in the first piece wide enough for it, the bar's
    begin mark kept in the first; where no piece is wide enough, the label goes on from piece
    to piece. Marks thus never leave a name unreadable where there is room for it."""
    label, first_offset = cut[0][1], cut[0][2]
    name = label.removeprefix("▏")
    widths = [runs[at].end - runs[at].start for at, _, _ in cut]
    whole = [label if index == 0 and first_offset == 0 else name for index in range(len(cut))]
    home = next((index for index, width in enumerate(widths) if width >= len(whole[index])), None)
    if home is None:
        texts, drawn = [], first_offset
        for width in widths:
            texts.append(label[drawn : drawn + width])
            drawn += width
        return texts
    begin = label[:1] if first_offset == 0 and label.startswith("▏") else ""
    return [whole[home] if index == home else begin if index == 0 else "" for index in range(len(cut))]


def _label(name: str, flags: int) -> str:
    if flags & SPAN_NO_START:
        return f"…{name}"
    if flags & SPAN_NO_END:
        return f"{name}…"
    return name


def event_tones(events: np.ndarray[Any, Any]) -> np.ndarray[Any, np.dtype[np.int64]]:
    """The bar colour of each event id (a palette index): consecutive ids, as a module numbers
    its events, get different colours."""
    return (events.astype(np.int64) - 1) % PALETTE_SIZE


def event_of(spans: Spans, what: tuple[str, int]) -> int | None:
    """The event id of a span or mark (``what`` as in :class:`Run`); ``None`` for a block."""
    kind, index = what
    if kind == "span":
        return int(spans.spans["event"][index])
    if kind == "mark":
        return int(spans.marks["event"][index])
    return None


class SmLayout:
    """The same launch grouped by SM: a row per SM (more where blocks ran there at the same
    time), each block a bar from its first event to its last, named by its coordinates."""

    def __init__(self, spans: Spans, duration_ns: int) -> None:
        self.spans = spans
        self.duration_ns = duration_ns
        starts, ends, sms = spans.block_start_ns, spans.block_end_ns, spans.block_sm
        rows: list[FlameRow] = []
        self._bars: list[np.ndarray[Any, np.dtype[np.int64]]] = []  # per row: block indices by start
        self.block_row: list[int] = [0] * len(spans.blocks)
        for sm in sorted({int(v) for v in sms}):
            blocks = np.flatnonzero(sms == sm)
            blocks = blocks[np.argsort(starts[blocks], kind="stable")]
            level_end: list[int] = []
            level_blocks: list[list[int]] = []
            for block in blocks.tolist():
                level = next((i for i, end in enumerate(level_end) if end < starts[block]), len(level_end))
                if level == len(level_end):
                    level_end.append(0)
                    level_blocks.append([])
                level_end[level] = int(ends[block])
                level_blocks[level].append(block)
            for level, members in enumerate(level_blocks):
                for block in members:
                    self.block_row[block] = len(rows)
                rows.append(FlameRow(SM, sm, 0, level))
                self._bars.append(np.asarray(members, dtype=np.int64))
        self.rows = rows
        self._index = {row: index for index, row in enumerate(rows)}
        self._tone = np.arange(len(spans.blocks), dtype=np.int64) % PALETTE_SIZE

    def label(self, row: FlameRow) -> str:
        return f"SM{row.block}" if row.level == 0 else ""

    def block_title(self, block: int) -> str:
        x, y, z = (int(v) for v in self.spans.blocks[block])
        return f"block ({x},{y},{z})" if z else f"block ({x},{y})"

    def paint(self, row: FlameRow, window: Window, name_of: Any) -> list[Run]:
        index = self._index.get(row)
        members = self._bars[index] if index is not None else np.zeros(0, dtype=np.int64)
        columns = window.columns
        owner = np.full(columns, -1, dtype=np.int64)
        first_col = np.floor((self.spans.block_start_ns[members] - window.start_ns) / window.ns_per_column)
        end_col = np.ceil((self.spans.block_end_ns[members] - window.start_ns) / window.ns_per_column)
        first = first_col.astype(np.int64)
        last = np.maximum(first + 1, end_col.astype(np.int64))
        cols = np.arange(columns)
        found = np.searchsorted(first, cols, side="right") - 1
        inside = (found >= 0) & (cols < last[np.clip(found, 0, None)])
        owner[inside] = found[inside]
        runs: list[Run] = []
        column = 0
        while column < columns:
            current = int(owner[column])
            end = column + 1
            while end < columns and int(owner[end]) == current:
                end += 1
            if current < 0:
                runs.append(Run(column, end, " " * (end - column), None))
            else:
                block = int(members[current])
                x, y, z = (int(v) for v in self.spans.blocks[block])
                label = f"▏{x},{y}" + (f",{z}" if z else "")
                begins = max(0, int(first[current]))
                text = label[column - begins : end - begins].ljust(end - column)
                runs.append(Run(column, end, text, ("block", block), int(self._tone[block])))
            column = end
        return runs

    def at(self, row: FlameRow, t_ns: float, tolerance_ns: float) -> tuple[str, int] | None:
        index = self._index.get(row)
        if index is None:
            return None
        for block in self._bars[index].tolist():
            if self.spans.block_start_ns[block] - tolerance_ns <= t_ns <= self.spans.block_end_ns[block] + tolerance_ns:
                return ("block", block)
        return None
