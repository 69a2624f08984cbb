"""The timing screen: where compile time goes, per pass name across every compile of the
session or recording (sortable by any column), and the slowest passes of one compile. It
follows the model the app keeps up to date, at most twice a second, keeping the cursors on
the pass and the compile they were on."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import DataTable, Static

from iket_tui.model.nodes import DONE, CompileNode
from iket_tui.model.pass_timing import SORT_KEYS, PassStats, PassTiming, TimingSummary, slowest_passes
from iket_tui.model.pass_tree import PassTree
from iket_tui.model.recompiles import compile_count
from iket_tui.ui import units
from iket_tui.ui.footer import KeysFooter
from iket_tui.ui.messages import ModelChanged
from iket_tui.ui.throttle import Throttle

REFRESH_S = 0.5
SLOWEST = 10
"""Passes shown for the selected compile."""
RUNNING_MARK = "▶ "
"""Before a pass name with a run still going (its times count that run so far)."""
NARROW_BELOW = 120
"""Columns; narrower screens get fewer columns in the compile tables."""
NARROW_COMPILES = 31
"""Width of the compile list on a narrow screen."""
ARROWS = {True: "▼", False: "▲"}
SCROLLBAR = 2


@dataclass(frozen=True)
class Column:
    """A table column: numbers are right-aligned in their width, which includes the gap
    before them; the one column of width 0 takes what the others leave, within bounds."""

    key: str
    label: str
    width: int
    right: bool = True


FLEX_MIN, FLEX_MAX = 12, 44

PASS_COLUMNS = (
    Column("name", "pass", 0, right=False),
    Column("count", "count", 7),
    Column("total", "total", 9),
    Column("self", "self", 9),
    Column("mean", "mean", 9),
    Column("max", "max", 9),
    Column("share", "share", 7),
    Column("unfinished", "failed", 7),
)
SORT_BINDINGS = {
    "name": "n",
    "count": "c",
    "total": "t",
    "self": "s",
    "mean": "m",
    "max": "x",
    "share": "percent_sign",
    "unfinished": "f",
}
"""The key that sorts by each column (pressed again, it reverses the order)."""

WIDE_COMPILE_COLUMNS = (
    Column("id", "#", 4),
    Column("kernel", "kernel", 0, right=False),
    Column("status", "status", 11, right=False),
    Column("time", "time", 9),
    Column("in_passes", "in passes", 11),
)
NARROW_COMPILE_COLUMNS = (Column("id", "#", 4), Column("kernel", "kernel", 0, right=False), Column("time", "time", 9))
WIDE_SLOWEST_COLUMNS = (
    Column("name", "", 0, right=False),
    Column("self", "self", 9),
    Column("total", "total", 9),
    Column("share", "of compile", 12),
)
NARROW_SLOWEST_COLUMNS = (Column("name", "", 0, right=False), Column("self", "self", 9), Column("share", "share", 8))


def fit(name: str, width: int) -> str:
    """``name`` cut in the middle to ``width`` characters (pass names differ at both ends)."""
    if len(name) <= width:
        return name
    tail = (width - 1) // 2
    return f"{name[: width - 1 - tail]}…{name[len(name) - tail :]}"


def _kernel_cell(comp: CompileNode) -> str:
    """A compile's kernel, and which of that kernel's compiles it is where there were several."""
    return f"{comp.shown_title} {compile_count(comp)}".rstrip()


def _percent(fraction: float) -> str:
    return f"{fraction * 100:.1f}%"


def _flex_width(columns: Sequence[Column], table_width: int, longest: int) -> int:
    fixed = sum(column.width for column in columns)
    return max(FLEX_MIN, min(FLEX_MAX, longest + 1, table_width - fixed - SCROLLBAR))


def _cell(column: Column, value: str, flex: int) -> Text:
    if column.right:
        return Text(value.rjust(column.width), no_wrap=True)
    width = column.width or flex
    return Text(" " + fit(value, width - 1), no_wrap=True)


def _set_columns(table: DataTable[Text], columns: Sequence[Column], flex: int, labels: dict[str, str]) -> None:
    """Replace the table's columns (and drop its rows)."""
    table.clear(columns=True)
    for column in columns:
        label = labels.get(column.key, column.label)
        table.add_column(_cell(column, label, flex), width=column.width or flex, key=column.key)


class TimingScreen(Screen[None]):
    """Per pass name: count, total, self, mean, max, share of compile time, failures; and the
    slowest passes of the compile selected below."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,T", "app.pop_screen", "Passes"),
        Binding("o", "next_sort", "Sort"),
        Binding("r", "reverse_sort", "Reverse"),
        *(
            Binding(SORT_BINDINGS[column.key], f"sort('{column.key}')", f"Sort by {column.label}", show=False)
            for column in PASS_COLUMNS
        ),
    ]

    DEFAULT_CSS = """
    TimingScreen #timing-title {
        height: 1; background: $panel; text-style: bold; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis;
    }
    TimingScreen #pass-names { height: 2fr; min-height: 5; }
    TimingScreen #pass-detail { height: 1; background: $panel; padding: 0 1; }
    TimingScreen #per-compile { height: 1fr; min-height: 5; }
    TimingScreen #slowest { width: 1fr; border-left: solid $panel-lighten-2; }
    """

    def __init__(self, tree: PassTree, *, now_ns: Callable[[], int], timing: PassTiming | None = None) -> None:
        """``now_ns`` gives the agent's time now, to time running passes. ``timing`` is the
        tree's :class:`PassTiming` if the caller keeps one, so that opening the screen again
        does not time every compile again."""
        super().__init__()
        self.pass_tree = tree
        self.timing = timing if timing is not None and timing.tree is tree else PassTiming(tree)
        self.sort_by = "self"
        self.descending = True
        self.selected: CompileNode | None = None
        self.follow = True
        """Keep the newest compile selected while the cursor is on it."""
        self._now_ns = now_ns
        self._throttle = Throttle(self, self.sync, REFRESH_S)
        self._width = 0
        self._summary: TimingSummary | None = None
        self._stats: list[PassStats] = []  # the pass table's rows, in order
        self._names: list[str] = []
        self._name_cells: list[tuple[str, ...]] = []
        self._name_flex = 0
        self._rebuild_names = True
        self._compile_columns: tuple[Column, ...] = WIDE_COMPILE_COLUMNS
        self._compile_flex = 0
        self._rebuild_compiles = True
        self._compile_keys: list[tuple[int, int]] = []  # (version, shape) of each compile when its row was made
        self._open_rows: list[int] = []  # positions of compiles whose times still move
        self._compiles_seen = -1  # the tree version the compile rows show
        self._slowest_columns: tuple[Column, ...] = WIDE_SLOWEST_COLUMNS
        self._slowest_flex = 0
        self._slowest_of: CompileNode | None = None
        self._slowest_cells: list[tuple[str, ...]] = []

    def compose(self) -> ComposeResult:
        yield Static(id="timing-title", markup=False)
        yield DataTable(id="pass-names", cursor_type="row", zebra_stripes=True, cell_padding=0)
        yield Static(id="pass-detail", markup=False)
        with Horizontal(id="per-compile"):
            yield DataTable(id="compiles", cursor_type="row", zebra_stripes=True, cell_padding=0)
            yield DataTable(id="slowest", cursor_type="row", zebra_stripes=True, cell_padding=0)
        yield KeysFooter()

    def on_mount(self) -> None:
        self.sync()
        self.query_one("#pass-names", DataTable).focus()

    @on(ModelChanged)
    def _model_changed(self) -> None:
        """Sync now, or once when ``REFRESH_S`` has passed since the last sync."""
        self._throttle.ask()

    def on_resize(self, event: Resize) -> None:
        self.sync()

    # Following the model

    def now_ns(self) -> int:
        return self._now_ns()

    def sync(self) -> None:
        """Catch up with the model and the clock."""
        self._throttle.ran()
        now = self.now_ns()
        summary = self.timing.summary(now)
        self._summary = summary
        self._lay_out(self.size.width or self.app.size.width, summary)
        self.query_one("#timing-title", Static).update(self._title(summary))
        self._sync_names(summary)
        self._sync_compiles(now)
        self._sync_slowest(now)
        self._show_detail()

    def _lay_out(self, width: int, summary: TimingSummary) -> None:
        """Fit the columns to the screen; a table whose columns change is rebuilt."""
        longest = max((len(name) for name in summary.by_name), default=0) + len(RUNNING_MARK)
        name_flex = _flex_width(PASS_COLUMNS, width - 1, longest)
        if name_flex != self._name_flex:
            self._name_flex = name_flex
            self._rebuild_names = True
        if width == self._width:
            return
        self._width = width
        narrow = width < NARROW_BELOW
        compiles_width = NARROW_COMPILES if narrow else width // 2
        self.query_one("#compiles", DataTable).styles.width = compiles_width
        self._compile_columns = NARROW_COMPILE_COLUMNS if narrow else WIDE_COMPILE_COLUMNS
        kernels = max((len(_kernel_cell(comp)) for comp in self.pass_tree.compiles), default=0)
        self._compile_flex = _flex_width(self._compile_columns, compiles_width, kernels)
        self._rebuild_compiles = True
        self._slowest_columns = NARROW_SLOWEST_COLUMNS if narrow else WIDE_SLOWEST_COLUMNS
        self._slowest_flex = _flex_width(self._slowest_columns, width - compiles_width - 1, FLEX_MAX)
        self._slowest_of = None

    def _title(self, summary: TimingSummary) -> str:
        compiles = summary.compiles
        if not compiles:
            return "timing: no compile yet"
        text = (
            f"{compiles} compile{'' if compiles == 1 else 's'}, {summary.runs:,} passes,"
            f" {units.duration(summary.compile_ns) or '0 ns'}: passes {_percent(summary.share(summary.pass_ns))},"
            f" codegen {_percent(summary.share(summary.codegen_ns))}, other {_percent(summary.share(summary.other_ns))}"
        )
        running = f" · {RUNNING_MARK}{summary.running} running, timed so far" if summary.running else ""
        if self._width < NARROW_BELOW:  # what does not fit whole is left out, never cut mid-word
            return text + running if cell_len(text + running) + 2 <= self._width else text
        return f"timing: {text}{running}"

    def _sync_names(self, summary: TimingSummary) -> None:
        table: DataTable[Text] = self.query_one("#pass-names", DataTable)
        rows = summary.rows(self.sort_by, descending=self.descending)
        names = [stats.name for stats in rows]
        cells = [self._pass_cells(stats, summary) for stats in rows]
        self._stats = rows
        flex = self._name_flex
        if names == self._names and not self._rebuild_names:
            for name, new, old in zip(names, cells, self._name_cells, strict=True):
                for column, value, was in zip(PASS_COLUMNS, new, old, strict=True):
                    if value != was:
                        table.update_cell(name, column.key, _cell(column, value, flex))
            self._name_cells = cells
            return
        on = self._names[table.cursor_row] if 0 <= table.cursor_row < len(self._names) else None
        label = next(column.label for column in PASS_COLUMNS if column.key == self.sort_by)
        _set_columns(table, PASS_COLUMNS, flex, {self.sort_by: f"{label} {ARROWS[self.descending]}"})
        for name, row in zip(names, cells, strict=True):
            table.add_row(
                *(_cell(column, value, flex) for column, value in zip(PASS_COLUMNS, row, strict=True)), key=name
            )
        self._names, self._name_cells = names, cells
        self._rebuild_names = False
        if on in names:
            table.move_cursor(row=names.index(on), animate=False)

    def _pass_cells(self, stats: PassStats, summary: TimingSummary) -> tuple[str, ...]:
        return (
            (RUNNING_MARK if stats.running else "") + stats.name,
            units.count(stats.count),
            units.duration(stats.total_ns),
            units.duration(stats.self_ns),
            units.duration(stats.mean_ns),
            units.duration(stats.max_ns),
            _percent(summary.share(stats.self_ns)),
            units.count(stats.unfinished) if stats.unfinished else "",
        )

    def _sync_compiles(self, now: int) -> None:
        table: DataTable[Text] = self.query_one("#compiles", DataTable)
        compiles = self.pass_tree.compiles
        columns, flex = self._compile_columns, self._compile_flex
        if self._rebuild_compiles:
            _set_columns(table, columns, flex, {})
            self._compile_keys, self._open_rows = [], []
            self._rebuild_compiles = False
        keys = self._compile_keys
        stale = set(self._open_rows)
        if self.pass_tree.version != self._compiles_seen:
            self._compiles_seen = self.pass_tree.version
            stale.update(
                position
                for position, key in enumerate(keys)
                if (compiles[position].version, compiles[position].shape) != key
            )
        self._open_rows = []
        for position in sorted(stale):
            comp = compiles[position]
            for column, value in zip(columns, self._compile_cells(comp, now), strict=True):
                table.update_cell(str(position), column.key, _cell(column, value, flex))
            keys[position] = (comp.version, comp.shape)
            if comp.end_ns is None:
                self._open_rows.append(position)
        for position in range(len(keys), len(compiles)):
            comp = compiles[position]
            row = self._compile_cells(comp, now)
            table.add_row(
                *(_cell(column, value, flex) for column, value in zip(columns, row, strict=True)), key=str(position)
            )
            keys.append((comp.version, comp.shape))
            if comp.end_ns is None:
                self._open_rows.append(position)
        if not compiles:
            return
        if self.follow or self.selected is None:
            self.selected = compiles[-1]
        if table.cursor_row != self.selected.position:
            table.move_cursor(row=self.selected.position, animate=False)

    def _compile_cells(self, comp: CompileNode, now: int) -> tuple[str, ...]:
        times = self.timing.compile_times(comp, now)
        values = {
            "id": str(comp.id),
            "kernel": _kernel_cell(comp),
            "status": str(comp.status),
            "time": units.duration(times.compile_ns),
            "in_passes": units.duration(times.pass_ns),
        }
        return tuple(values[column.key] for column in self._compile_columns)

    def _sync_slowest(self, now: int) -> None:
        table: DataTable[Text] = self.query_one("#slowest", DataTable)
        comp = self.selected
        if comp is None:
            return
        compile_ns = self.timing.compile_times(comp, now).compile_ns
        cells = [
            self._slowest_cells_of(
                (RUNNING_MARK if run.running else "") + run.node.name,
                units.duration(run.self_ns),
                units.duration(run.inclusive_ns),
                _percent(run.self_ns / compile_ns) if compile_ns else "",
            )
            for run in slowest_passes(comp, now, SLOWEST)
        ]
        if comp is self._slowest_of and cells == self._slowest_cells:
            return
        columns, flex = self._slowest_columns, self._slowest_flex
        label = f"#{comp.id} {comp.title}" + ("" if comp.status is DONE else f" ({comp.status})")
        if len(label) + len("slowest in ") < flex:
            label = f"slowest in {label}"
        _set_columns(table, columns, flex, {"name": label})
        for row in cells:
            table.add_row(*(_cell(column, value, flex) for column, value in zip(columns, row, strict=True)))
        self._slowest_of, self._slowest_cells = comp, cells

    def _slowest_cells_of(self, name: str, own: str, inclusive: str, share: str) -> tuple[str, ...]:
        values = {"name": name, "self": own, "total": inclusive, "share": share}
        return tuple(values[column.key] for column in self._slowest_columns)

    def _show_detail(self) -> None:
        """The pass under the cursor in words: its full name, where its longest run was."""
        table = self.query_one("#pass-names", DataTable)
        detail = self.query_one("#pass-detail", Static)
        row = table.cursor_row
        if not 0 <= row < len(self._stats):
            detail.update("no pass has run yet")
            return
        stats = self._stats[row]
        text = f"{stats.name}: {stats.count:,} run{'' if stats.count == 1 else 's'}"
        where = stats.max_compile
        if where is not None:
            text += f", longest {units.duration(stats.max_ns)} in #{where.id} {where.title}"
        if stats.failed:
            text += f", {stats.failed} failed"
        if stats.incomplete:
            text += f", {stats.incomplete} never finished"
        if stats.running:
            text += f", {stats.running} running"
        detail.update(text)

    # Events and keys

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "pass-names":
            self._show_detail()
        elif event.data_table.id == "compiles" and event.data_table.has_focus:
            self._select_compile(event.cursor_row)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "compiles":
            self._select_compile(event.cursor_row)

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        if event.data_table.id == "pass-names" and event.column_key.value in SORT_KEYS:
            self.action_sort(event.column_key.value)

    def _select_compile(self, row: int) -> None:
        compiles = self.pass_tree.compiles
        if not 0 <= row < len(compiles):
            return
        self.follow = row == len(compiles) - 1
        if compiles[row] is not self.selected:
            self.selected = compiles[row]
            self._sync_slowest(self.now_ns())

    def action_sort(self, column: str) -> None:
        """Sort the pass names by ``column`` (most first, names from a); again, the other way."""
        if column == self.sort_by:
            self.descending = not self.descending
        else:
            self.sort_by = column
            self.descending = column != "name"
        self._rebuild_names = True
        if self._summary is not None:
            self._sync_names(self._summary)
            self._show_detail()

    def action_next_sort(self) -> None:
        """Sort by the next column, cycling."""
        order = [column.key for column in PASS_COLUMNS]
        self.action_sort(order[(order.index(self.sort_by) + 1) % len(order)])

    def action_reverse_sort(self) -> None:
        self.action_sort(self.sort_by)
