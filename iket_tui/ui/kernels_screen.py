"""The kernels screen: the launches of traced kernels, newest first, and the flame view of the
selected one, with what is under its cursor. It follows the session the app keeps up to date,
told by :class:`~iket_tui.ui.messages.ModelChanged`, redrawing at most 10 times a second.

A launch with warps that have not ended is marked running, with how long it has run on its
device's clock; once one of those warps has run no event for longer than the threshold
(``--kernel-stuck-after``), however busy the others are, it is marked with that warp's quiet,
and for the selected one the warps that have not ended are listed with their last events above
the flame view. A clock tick (a ``ModelChanged`` with no new records) repaints only those marks
and times.

Each launch's status says whether all of it arrived: ``complete``, ``running``, ``partial 62%``
(the share of its warps that arrived whole) or ``not traced``; for a selected launch that is not
complete, the line above its flame view (and its statistics) says so in words (``partial: 62%
of warps whole, lapped``) and what it lost: which blocks did not arrive whole, and per reason
the warps and events lost.

Watching several processes that trace kernels, each launch row names its process (``pid 123
(rank 3)``), the title says which processes trace kernels, on which ring, with the launches and
losses of each, and the summary of a launch's unfinished warps begins with its process.

Following, the screen shows the newest launch that has finished (its flame view whole; one still
running is marked in the table), or, once one has a warp quiet past the threshold, that one.
The footer names the keys between warps (up/down) and between launches (``<`` ``>``), which
work whatever has focus, and the launch table keeps its cursor visible while the flame view has
focus. Above the flame view, a line says why the selected launch has unbalanced ranges (the
producer warps of a Hopper warp-specialised kernel named as such) and which blocks ran on past
the fitted view's right edge. A narrow terminal leaves out whole columns of the launch table,
numbers first, and whole items of the line under the cursor, never part of a cell or a word."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Input, Static

from iket_tui.durations import duration as format_ns
from iket_tui.model.kernels import KernelTimeline, ProcessKernels, process_label
from iket_tui.model.launches import Launch, event_stats
from iket_tui.model.session import Session
from iket_tui.model.unbalanced import Unbalanced, unbalanced_of
from iket_tui.ui.flame_view import FlameView, TimeRuler
from iket_tui.ui.footer import KeysFooter
from iket_tui.ui.messages import ModelChanged
from iket_tui.ui.running_warps import RunningWarps
from iket_tui.ui.throttle import Throttle
from iket_tui.ui.wrapping import wrapped

REFRESH_S = 0.1


class KernelsScreen(Screen[None]):
    """Launches and the per-block flame view of the selected launch."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("greater_than_sign,shift+down", "step_launch(1)", "Launch", key_display="<>"),
        Binding("less_than_sign,shift+up", "step_launch(-1)", "Newer launch", show=False),
        Binding("a", "toggle_stats", "Stats"),
        Binding("enter", "toggle_detail", "Details"),
        Binding("escape,K", "app.pop_screen", "Passes"),
        Binding("g", "goto_block", "Go to block"),
        Binding("slash", "find", "Find event"),
        Binding("f", "toggle_follow", "Follow"),
        Binding("n", "find_next", "Next", show=False),
        Binding("D", "compare", "Compare", show=False),
        Binding("tab", "app.focus_next", "Next pane", show=False),
    ]

    AUTO_FOCUS = "#flame"
    COMPONENT_CLASSES: ClassVar[set[str]] = {"kernels-screen--running", "kernels-screen--quiet"}

    DEFAULT_CSS = """
    KernelsScreen #kernels-title { height: auto; max-height: 2; background: $panel; text-style: bold; padding: 0 1; }
    KernelsScreen #launches { height: auto; max-height: 30%; }
    KernelsScreen #launches:blur > .datatable--cursor { background: $primary 50%; text-style: bold; }
    KernelsScreen #launch-status { height: auto; display: none; padding: 0 1; background: $warning-muted; }
    KernelsScreen #launch-status.-shown { display: block; }
    KernelsScreen #launch-notes { height: auto; display: none; padding: 0 1; color: $text-muted; }
    KernelsScreen #launch-notes.-shown { display: block; }
    KernelsScreen #flame-area { height: 1fr; }
    KernelsScreen #flame { height: 1fr; width: 1fr; }
    KernelsScreen #flame-detail { width: 44; display: none; padding: 0 1; border-left: solid $panel-lighten-2; }
    KernelsScreen.-detail #flame-detail { display: block; }
    KernelsScreen #under-cursor { height: auto; max-height: 2; background: $panel; padding: 0 1; }
    KernelsScreen #stats { height: 1fr; display: none; }
    KernelsScreen.-stats #stats { display: block; }
    KernelsScreen.-stats #flame-area, KernelsScreen.-stats #ruler { display: none; }
    KernelsScreen #goto { display: none; }
    KernelsScreen #goto.-shown { display: block; }
    """

    def __init__(
        self,
        session: Session,
        *,
        sample: tuple[KernelTimeline, str] | None = None,
        now_ns: Callable[[], int] | None = None,
    ) -> None:
        """``now_ns`` gives the agent's time now as the app sees it (frozen when paused or
        ended; the stream's time in a replay); without it, the latest time the stream carried."""
        super().__init__()
        self.session = session
        self.now_ns = now_ns if now_ns is not None else (lambda: session.last_t_ns)
        self.kernels = session.kernel_processes
        """The kernels on screen: the session's processes', or the sample's."""
        self.sample = sample
        """Kernels of a recording (and its file name) to show instead while the target traces
        no kernels on a GPU (the demo's)."""
        self.showing_sample = False
        self._throttle = Throttle(self, self.sync, REFRESH_S)
        self._asking = "goto"
        self.follow = True
        self.selected: Launch | None = None
        self._shown_columns: tuple[str, ...] = ()  # the launches' columns the width holds
        self._duration_width = 0  # the widest duration cell when they were chosen
        self._version = -1
        self._rows: list[Launch] = []
        self._stable: dict[str, int] = {}  # launch versions at the last look, by row key
        self._marked: set[str] = set()  # row keys of the launches whose duration cell says running
        self._unbalanced: tuple[tuple[str, int], Unbalanced] | None = None  # the selected launch's, by version

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(id="kernels-title", markup=False)
            table: DataTable[str | Text] = DataTable(id="launches", cursor_type="row", zebra_stripes=True)
            yield table
            yield RunningWarps(id="running")
            yield Static(id="launch-status", markup=False)
            yield Static(id="launch-notes", markup=False)
            flame = FlameView(id="flame")
            yield TimeRuler(flame, id="ruler")
            with Horizontal(id="flame-area"):
                yield flame
                yield Static(id="flame-detail", markup=False)
            stats: DataTable[str] = DataTable(id="stats", cursor_type="row", zebra_stripes=True)
            yield stats
            yield Static(id="under-cursor", markup=False)
            yield Input(placeholder="block number (0 = first block of the launch), Enter to go", id="goto")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.sync()
        self.query_one(FlameView).focus()

    def _table_width(self) -> int:
        """The cells the launches' table can show without scrolling sideways (its vertical
        scrollbar kept free)."""
        return self.size.width - TABLE_SCROLLBAR

    def on_resize(self) -> None:
        """Columns dropped for a narrow terminal come back on a wide one, and the other way."""
        self._version = -1
        self.sync()

    # Following the model

    @on(ModelChanged)
    def _model_changed(self) -> None:
        """Sync now, or once when ``REFRESH_S`` has passed since the last sync."""
        self._throttle.ask()

    def sync(self) -> None:
        """Catch up with the launches and records that arrived."""
        self._throttle.ran()
        self._choose_source()
        kernels = self.kernels
        now = self._agent_now()
        title = self.query_one("#kernels-title", Static)
        if kernels.version == self._version and all(
            launch.unbalanced_if_known() is not None or launch.evicted for launch in self._rows
        ):
            title.update(self._fitted_title(now))
            if not self.follow or self._followed(self._rows, now) is self.selected:
                self._show_running(now)  # the clock moved: only the marks and their times
                return
        self._version = kernels.version
        launches = kernels.newest_first()
        table = self.query_one("#launches", DataTable)
        first_ns = min((launch.first_ns for launch in launches if launch.version), default=0)
        if self.follow or self.selected is None:
            self.selected = self._followed(launches, now)
        if self.selected is not None:
            self.selected.spans()  # drawn now anyway
        stable = self._stable
        self._stable = {_row_key(launch): launch.version for launch in launches}
        self._marked = set()
        rows: list[dict[str, str | Text]] = []
        for launch in launches:
            if stable.get(_row_key(launch)) == launch.version:
                launch.spans()  # no records came since the last look: pair it once (cached after)
            unbalanced = launch.unbalanced_if_known()
            rows.append(
                {
                    "process": process_label(launch.process),
                    "kernel": launch.kernel,
                    "grid": "x".join(str(n) for n in launch.grid()),
                    "start": f"+{format_ns(launch.first_ns - first_ns)}" if launch.version else "",
                    "duration": self._duration_cell(launch, now),
                    "status": launch.status().short(),
                    "records": f"{launch.records:,}" + (" (summarised)" if launch.evicted else ""),
                    "unbalanced": "" if unbalanced is None else f"{unbalanced:,}",
                    "compile": self._compile_label(launch),
                }
            )
        shown = fitting_columns(COLUMNS if kernels.several else COLUMNS[1:], rows, self._table_width())
        table.clear(columns=True)  # the columns again: their widths are those of the cells they hold now
        for label in shown:
            table.add_column(label, key=label, width=column_width(label, rows))
        for launch, cells in zip(launches, rows, strict=True):
            table.add_row(*(cells[label] for label in shown), key=_row_key(launch))
        self._shown_columns = shown
        self._duration_width = max([len("duration"), *(cell_len(str(cells["duration"])) for cells in rows)])
        self._rows = launches
        title.update(self._fitted_title(now))
        if self.selected is not None and self.selected in launches:
            table.move_cursor(row=launches.index(self.selected), animate=False)
        self.query_one(FlameView).show_launch(self.selected)
        self._show_status()
        self._show_notes()
        self._show_unfinished(now)
        self._show_under_cursor()
        self._show_stats()

    # Launches that run

    def _agent_now(self) -> int:
        """The agent's time now: the app's clock for the session; for a sample, the time of its last records."""
        if self.showing_sample:
            return self.kernels.latest_batch_t_ns()
        return self.now_ns()

    def _duration_cell(self, launch: Launch, now: int) -> str | Text:
        """How long the launch ran; for one still running, ``running`` and how long it has run
        on its device's clock (``running 12.4 s``), and once a warp of it has run no event for
        longer than the threshold, how long the longest quiet one has (``, warp quiet 12.4 s``)."""
        if not launch.running:
            return format_ns(launch.duration_ns)
        self._marked.add(_row_key(launch))
        kernels = self.kernels
        text = f"running {format_ns(kernels.running_ns(launch, now))}"
        if kernels.running_past(launch, now):
            return Text(
                f"{text}, warp quiet {format_ns(kernels.quiet_ns(launch, now))}",
                style=self.get_component_rich_style("kernels-screen--quiet", partial=True),
            )
        return Text(text, style=self.get_component_rich_style("kernels-screen--running", partial=True))

    def _followed(self, launches: list[Launch], now: int) -> Launch | None:
        """The launch a following screen shows: the newest with a warp quiet past the threshold,
        whose warps are what a live view is for; else the newest that has finished, so that its
        flame view is whole; else the newest."""
        kernels = self.kernels
        quiet = next((launch for launch in launches if launch.running and kernels.running_past(launch, now)), None)
        finished = next((launch for launch in launches if not launch.running), None)
        return quiet or finished or (launches[0] if launches else None)

    def _show_running(self, now: int) -> None:
        """Repaint what the clock changes: the running launches' marks and the unfinished warps' times."""
        table = self.query_one("#launches", DataTable)
        cells = {
            key: self._duration_cell(launch, now) for launch in self._rows if (key := _row_key(launch)) in self._marked
        }
        if self._duration_width < max((cell_len(str(cell)) for cell in cells.values()), default=0):
            self._version = -1  # a wider cell ("warp quiet"): the columns the width holds again
            self.sync()
            return
        for key, cell in cells.items():
            if "duration" in self._shown_columns:
                table.update_cell(key, "duration", cell)
        self._show_unfinished(now)

    def _show_unfinished(self, now: int) -> None:
        """The selected launch's warps that have not ended, while it runs past the threshold."""
        launch = self.selected
        shown = launch is not None and self.kernels.running_past(launch, now)
        running = self.query_one(RunningWarps)
        if launch is None or not shown:
            running.show(None, 0)
            return
        running.show(self.kernels.unfinished(launch, now), launch.blocks())

    def _show_status(self) -> None:
        """The title of the selected launch's flame view where it is not complete (``partial:
        62% of warps whole, lapped``), with what it lost; nothing for a complete or running one."""
        shown = self.query_one("#launch-status", Static)
        launch = self.selected
        title = launch.status().words() if launch is not None else ""
        if launch is None or not title:
            shown.remove_class("-shown")
            return
        shown.update(wrapped(f"{title}\n{launch.coverage.detail()}", self.size.width - LINE_PADDING))
        shown.add_class("-shown")

    def _compile_label(self, launch: Launch) -> str:
        """The compile that built the launch's kernel; a sample's compiles are not this session's."""
        if self.showing_sample:
            return "" if launch.compile is None else f"{launch.compile} (recorded)"
        return self.session.compile_label(launch.compile)

    def _show_stats(self) -> None:
        if not self.has_class("-stats"):
            return
        stats = self.query_one("#stats", DataTable)
        rows: list[dict[str, str | Text]] = []
        for row in event_stats(self.selected) if self.selected is not None else []:
            times = (row.mean_ns, row.p50_ns, row.p99_ns, row.max_ns)
            rows.append(
                {
                    "event": row.name,
                    "kind": row.kind,
                    "count": f"{row.count:,}",
                    "unbalanced": f"{row.unbalanced:,}",
                    **{
                        label: format_ns(v) if v is not None else "" for label, v in zip(STAT_TIMES, times, strict=True)
                    },
                    "payload min": f"{row.payload_min:g}" if row.payload_min is not None else "",
                    "payload max": f"{row.payload_max:g}" if row.payload_max is not None else "",
                }
            )
        shown = fitting_columns(STAT_COLUMNS, rows, self._table_width(), STAT_DROPPED_FIRST)
        stats.clear(columns=True)
        for label in shown:
            stats.add_column(label, key=label, width=column_width(label, rows))
        for cells in rows:
            stats.add_row(*(cells[label] for label in shown))

    def action_compare(self) -> None:
        """The selected launch compared with the previous launch of its kernel, in a pane (c there
        chooses another; D again, or Escape, comes back)."""
        from iket_tui.ui.compare_screen import launch_comparison

        if self.selected is None:
            self.notify("no launch to compare", severity="warning")
            return
        found = launch_comparison(self.kernels, self.session.tree, self.selected)
        if isinstance(found, str):
            self.notify(found, severity="warning")
        else:
            self.app.push_screen(found)

    def action_toggle_stats(self) -> None:
        """Per event name of the selected launch: counts, durations, payload ranges (or back to the flame view)."""
        self.toggle_class("-stats")
        self._show_stats()
        self._show_notes()
        (self.query_one("#stats", DataTable) if self.has_class("-stats") else self.query_one(FlameView)).focus()

    def _choose_source(self) -> None:
        """The live target's kernels, or the sample's while the target has no ring and no launch."""
        live = self.session.kernel_processes
        want_sample = self.sample is not None and not live.has_ring
        if want_sample == self.showing_sample:
            return
        self.kernels = ProcessKernels(self.sample[0]) if want_sample and self.sample is not None else live
        self.showing_sample = want_sample
        self._version = -1

    def _fitted_title(self, now: int) -> str:
        """The title in the screen's width: whole items left out, and a title of one item (a
        recorded run's) wrapped rather than cut."""
        width = self.size.width - TITLE_PADDING
        return wrapped(fitting_title(self._title(now), width), width)

    def _title(self, now: int) -> str:
        if self.showing_sample and self.sample is not None:
            sample, name = self.sample
            if sample.tracing is None:
                return f"kernels: no GPU here; reading a recorded run ({name}) ..."
            return f"kernels: no GPU here; showing a recorded run on {sample.tracing.device or 'a GPU'} ({name})"
        return self.kernels.title(following=self.follow, quiet=len(self.kernels.quiet(now)))

    # Events

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self._select(event.cursor_row)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if self.query_one("#launches", DataTable).has_focus:
            self._select(event.cursor_row)

    def _select(self, row: int) -> None:
        if 0 <= row < len(self._rows):
            launch = self._rows[row]
            if launch is not self.selected:
                self.selected = launch
                self.follow = launch is self._followed(self._rows, self._agent_now()) and self.follow
                self.query_one(FlameView).show_launch(launch)
                self._show_status()
                self._show_notes()
                self._show_unfinished(self._agent_now())
                self._show_under_cursor()
                self._show_stats()

    def on_flame_view_cursor_moved(self, event: FlameView.CursorMoved) -> None:
        self._show_under_cursor()
        self._show_notes()
        self.query_one(TimeRuler).refresh()

    def on_flame_view_launch_step(self, event: FlameView.LaunchStep) -> None:
        self.action_step_launch(event.direction)

    def action_step_launch(self, direction: int) -> None:
        """The next launch down the table (older, ``direction`` 1) or up it (newer, -1), whatever has focus."""
        rows = self._rows
        if not rows:
            return
        row = next((index for index, launch in enumerate(rows) if launch is self.selected), 0)
        row = max(0, min(len(rows) - 1, row + direction))
        self._select(row)
        self.query_one("#launches", DataTable).move_cursor(row=row, animate=False)

    def _show_notes(self) -> None:
        """Why the selected launch has unbalanced ranges, and what the flame view's fit leaves out."""
        shown = self.query_one("#launch-notes", Static)
        launch = self.selected
        lines = []
        if launch is not None and not launch.evicted:
            key = (_row_key(launch), launch.version)
            if self._unbalanced is None or self._unbalanced[0] != key:
                self._unbalanced = (key, unbalanced_of(launch))
            lines.append(self._unbalanced[1].words(running=launch.running))
            if not self.has_class("-stats"):
                lines.append(self.query_one(FlameView).fit_note())
        text = "\n".join(line for line in lines if line)
        shown.update(wrapped(text, self.size.width - LINE_PADDING))
        shown.set_class(bool(text), "-shown")

    def _show_under_cursor(self) -> None:
        flame = self.query_one(FlameView)
        self.query_one("#under-cursor", Static).update(
            fitting_line(flame.describe_under_cursor(), self.size.width - UNDER_CURSOR_PADDING)
        )
        if self.has_class("-detail"):
            self.query_one("#flame-detail", Static).update("\n".join(flame.describe_row()))

    def action_toggle_detail(self) -> None:
        """The block, warp or SM under the cursor in a pane beside the flame view."""
        self.toggle_class("-detail")
        self._show_under_cursor()

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow
        self._version = -1
        self.sync()

    def action_goto_block(self) -> None:
        self._ask("goto", "block number (0 = the launch's first block), enter to go")

    def action_find(self) -> None:
        """Ask for an event name: only matching ranges and marks are drawn, n goes to the next."""
        self._ask("find", "event name (part of it): only those are drawn; enter, then n for the next; empty: all")

    def action_find_next(self) -> None:
        flame = self.query_one(FlameView)
        if flame.match and not flame.next_match():
            self.notify(f"no range of an event named like {flame.match!r} here", severity="warning")

    def _ask(self, purpose: str, placeholder: str) -> None:
        prompt = self.query_one("#goto", Input)
        prompt.add_class("-shown")
        prompt.placeholder = placeholder
        prompt.value = ""
        self._asking = purpose
        prompt.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.input.remove_class("-shown")
        flame = self.query_one(FlameView)
        if self._asking == "find":
            flame.set_match(event.value.strip())
            if flame.match:
                self.action_find_next()
            flame.focus()
            return
        try:
            block = int(event.value)
        except ValueError:
            block = -1
        if not flame.jump_to_block(block):
            self.notify(f"no block {event.value!r} in this launch", severity="warning")
        flame.focus()


COLUMNS: tuple[str, ...] = (
    "process",
    "kernel",
    "grid",
    "start",
    "duration",
    "status",
    "records",
    "unbalanced",
    "compile",
)
"""The launches' columns, in order; ``process`` only with several processes tracing kernels."""
DROPPED_FIRST: tuple[str, ...] = ("records", "start", "grid", "compile", "unbalanced", "duration")
"""Where the width is short, the columns left out, in this order: numbers before names, and
what the title and the flame view say too before what only the table says."""
CELL_PADDING = 2
TABLE_SCROLLBAR = 2


STAT_TIMES = ("mean", "p50", "p99", "max")
STAT_COLUMNS = ("event", "kind", "count", "unbalanced", *STAT_TIMES, "payload min", "payload max")
"""The statistics' columns, in order."""
STAT_DROPPED_FIRST = ("p99", "mean", "max", "payload min", "payload max", "unbalanced")
"""Where the width is short, the statistics' columns left out, in this order: p50 stays for the
times, the event's name and kind always."""


def column_width(label: str, rows: list[dict[str, str | Text]]) -> int:
    """The cells column ``label`` needs for its header and its cells in ``rows``: given to the
    table, not measured by it later, so that a table built again is never drawn with the widths
    of its headers alone."""
    return max([cell_len(label), *(cell_len(str(row[label])) for row in rows)])


def fitting_columns(
    columns: tuple[str, ...],
    rows: list[dict[str, str | Text]],
    width: int,
    dropped_first: tuple[str, ...] = DROPPED_FIRST,
) -> tuple[str, ...]:
    """Those of ``columns`` that fit in ``width`` cells with the cells of ``rows``, whole columns
    left out in the order of ``dropped_first`` (a cell is never cut)."""

    kept = list(columns)
    for label in dropped_first:
        if sum(column_width(name, rows) + CELL_PADDING for name in kept) <= width:
            break
        if label in kept:
            kept.remove(label)
    return tuple(kept)


TITLE_PADDING = 2
FOLLOWING = "  follow"


def fitting_title(title: str, width: int) -> str:
    """The title (items joined by `` · ``, then ``  follow`` while following) in ``width``
    cells, whole items left out, never cut: ``follow`` first, then the items after the counts of
    launches and events (said elsewhere on the screen too: a quiet launch's cell and its
    unfinished warps), then where the ring is, then the items from the end."""
    following = title.endswith(FOLLOWING)
    items = title.removesuffix(FOLLOWING).split(" · ")

    def fits(text: str) -> bool:
        return cell_len(text) <= width

    if following and fits(" · ".join(items) + FOLLOWING):
        return " · ".join(items) + FOLLOWING
    while len(items) > 3 and not fits(" · ".join(items)):
        items.pop()
    head, _, ring = items[0].partition(": ")
    if len(items) > 1 and ring and not fits(" · ".join(items)):
        items = [f"{head}: {items[1]}", *items[2:]]
    while len(items) > 1 and not fits(" · ".join(items)):
        items.pop()
    return " · ".join(items)


LINE_PADDING = 2
"""The cells the lines above the flame view leave free at their sides."""


UNDER_CURSOR_PADDING = 2
DROPPED_FROM_LINE = ("/col", "t+")
"""Where the line about the cursor is too long, its items left out, in this order: the scale,
then the cursor's time (the bar under it keeps its own)."""


def fitting_line(line: str, width: int) -> str:
    """``line`` (items joined by `` · ``) without the items of :data:`DROPPED_FROM_LINE` it does
    not have room for, whole items left out, never cut; what is still too long wraps."""
    items = line.split(" · ")
    for marker in DROPPED_FROM_LINE:
        if cell_len(" · ".join(items)) <= width:
            break
        items = [item for item in items if marker not in item or item.startswith(("range", "mark", "block", "SM"))]
    return " · ".join(items)


def _row_key(launch: Launch) -> str:
    """The launch's row in the table: its process and its key, told apart across processes."""
    process = launch.process
    return f"{process.pid if process is not None else ''}:{launch.key}"
