"""One row of the pass tree as a strip of styled cells.

Kept apart from the widget so a row can be painted, and tested, without a running app: the
widget supplies the styles it resolved from its component classes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from iket_tui.model import timing
from iket_tui.model.compile_names import compile_note
from iket_tui.model.nodes import (
    FAILED,
    INCOMPLETE,
    CodegenNode,
    CompileNode,
    CompilerProcessNode,
    ContextNode,
    Node,
    PassNode,
    ProcessNode,
    Status,
)
from iket_tui.model.pass_tree import PassTree
from iket_tui.model.visible_rows import Row
from iket_tui.repro import first_diagnostic
from iket_tui.ui import units

GLYPHS: dict[str, str] = {
    "running": "●",
    "done": "✓",
    "failed": "✗",
    "incomplete": "◌",
    "mismatch": "≠",
    "stuck": "!",
}
EXPANDED = "▼ "
COLLAPSED = "▶ "
LEAF = "  "
INDENT = 2

STATUS_W = 10
PHASE_W = 13
TIME_W = 9
NAME_MIN = 48  # the name column keeps this much before a column is shown beside it
DROPPED_FIRST = ("self", "phase", "status", "total")
"""The columns beside the name, in the order a narrowing width drops them, each whole."""


PLAIN = Style()


@dataclass(frozen=True)
class RowStyles:
    """Rich styles for each part of a row, resolved from the widget's component classes."""

    base: Style = PLAIN
    cursor: Style = PLAIN
    attention: Style = PLAIN  # failed and incomplete rows
    arrow: Style = PLAIN
    dim: Style = PLAIN
    duration: Style = PLAIN
    match: Style = PLAIN
    process: Style = PLAIN
    compile: Style = PLAIN
    context: Style = PLAIN
    running: Style = PLAIN
    done: Style = PLAIN
    failed: Style = PLAIN
    incomplete: Style = PLAIN
    mismatch: Style = PLAIN
    stuck: Style = PLAIN
    unchanged: Style = PLAIN  # the name of a pass that changed nothing

    @classmethod
    def names(cls) -> list[str]:
        return [field.name for field in fields(cls)]

    def status(self, name: str) -> Style:
        style: Style = getattr(self, name)
        return style


@dataclass(frozen=True)
class Columns:
    """Where the columns go at a given width: the name takes what the others leave, and keeps
    at least :data:`NAME_MIN` cells while any other is shown; as the width shrinks, the self
    time goes first, then the phase, the status word (its glyph stays) and the total, each
    column whole, so that a duration is never shown without its unit."""

    width: int

    @property
    def shown(self) -> frozenset[str]:
        """The columns beside the name at this width."""
        for dropped in range(len(DROPPED_FIRST) + 1):
            kept = frozenset(DROPPED_FIRST[dropped:])
            if self.width - _right_width(kept) >= NAME_MIN:
                return kept
        return frozenset()

    @property
    def show_phase(self) -> bool:
        return "phase" in self.shown

    @property
    def show_status(self) -> bool:
        return "status" in self.shown

    @property
    def right_width(self) -> int:
        return _right_width(self.shown)

    @property
    def name_width(self) -> int:
        return max(1, self.width - self.right_width)

    def right(self, status: str, phase: str, total: str, own: str) -> str:
        shown = self.shown
        text = f" {status:<{STATUS_W}}" if "status" in shown else ""
        if "phase" in shown:
            text += f" {_fit(phase, PHASE_W):<{PHASE_W}}"
        if "total" in shown:
            text += f" {total:>{TIME_W}}"
        if "self" in shown:
            text += f" {own:>{TIME_W}}"
        return text

    def header(self) -> str:
        left = set_cell_size("  name", self.name_width)
        return left + self.right("status", "phase", "total", "self")


def _right_width(shown: frozenset[str]) -> int:
    widths = {"status": STATUS_W, "phase": PHASE_W, "total": TIME_W, "self": TIME_W}
    return sum(1 + widths[name] for name in shown)


@dataclass(frozen=True)
class RowState:
    """Everything about a row besides its node that changes how it looks."""

    expanded: bool
    cursor: bool
    now_ns: int
    search: str = ""


def node_status(tree: PassTree, node: Node, now_ns: int) -> str:
    """The status word a user sees: a node's status, or ``stuck``."""
    if isinstance(node, PassNode) and tree.is_stuck(node, now_ns):
        return "stuck"
    if isinstance(node, CompilerProcessNode) and tree.is_process_stuck(node, now_ns):
        return "stuck"
    if isinstance(node, ProcessNode):
        return tree.process_status(node).value if tree.several else ""
    status: Status = node.status
    return status.value


def paint_row(tree: PassTree, row: Row, state: RowState, columns: Columns, styles: RowStyles) -> Strip:
    """The full-width strip for ``row``."""
    node = row.node
    status = node_status(tree, node, state.now_ns)
    needs_attention = status in (FAILED, INCOMPLETE, "stuck") and not isinstance(node, ContextNode)
    base = styles.base + styles.attention if needs_attention else styles.base
    if state.cursor:
        base = base + styles.cursor
    segments: list[Segment] = []
    used = 0

    def add(text: str, style: Style | None = None) -> None:
        nonlocal used
        if not text:
            return
        segments.append(Segment(text, base + style if style is not None else base))
        used += cell_len(text)

    status_style = None if state.cursor else styles.status(status) if status else None
    add(" " * (row.level * INDENT))
    add(EXPANDED if row.expandable and state.expanded else COLLAPSED if row.expandable else LEAF, styles.arrow)
    if status:
        add(GLYPHS[status] + " ", status_style)
    name, name_style, note = _title(tree, node, styles)
    if isinstance(node, ProcessNode):
        summary = _process_summary(tree, node, columns.width - used - min(cell_len(name), NAME_MIN) - 1)
        room = columns.width - used - len(summary) - 1
        add(_fit(name, room), name_style)
        room = columns.width - used - len(summary) - 1
        if note and room > 2:
            add(" " + _fit(note, room - 1), styles.dim)
        add(" " * max(1, columns.width - used - len(summary)))
        add(summary, styles.dim)
        return Strip(segments, used)
    room = columns.name_width - used
    _add_name(add, name, name_style, styles.match, state.search if isinstance(node, PassNode) else "", room)
    room = columns.name_width - used
    if note and room > 2:
        add(" " + _fit(note, room - 1), styles.dim)
    if used > columns.name_width:  # a row nested deeper than a narrow name column: cut, and say so
        kept = Strip(segments, used).crop(0, columns.name_width - 1)
        segments[:] = [*kept, Segment("…", base)]
        used = columns.name_width
    add(" " * max(0, columns.name_width - used))
    total = timing.inclusive_ns(node, state.now_ns)
    own = timing.self_ns(node, state.now_ns) if not isinstance(node, CodegenNode | CompilerProcessNode) else None
    phase = (node.phase or "") if isinstance(node, PassNode) else ""
    status_text = "" if status == "done" else status
    right = columns.right(status_text, phase, units.duration(total), units.duration(own))
    split = 0
    if columns.show_status:
        split = 1 + STATUS_W
        add(right[:split], status_style if status_text else None)
    if columns.show_phase:
        add(right[split : split + 1 + PHASE_W], styles.dim)
        split += 1 + PHASE_W
    add(right[split:], styles.duration)
    if used < columns.width:
        add(" " * (columns.width - used))
    return Strip(segments, max(used, columns.width))


def _title(tree: PassTree, node: Node, styles: RowStyles) -> tuple[str, Style | None, str]:
    """The name on a row, its style, and a dimmed note after it."""
    if isinstance(node, PassNode):
        return node.name, styles.unchanged if node.changed is False else None, ""
    if isinstance(node, CompileNode):
        note = compile_note(node)
        if node.status is FAILED and node.error:
            note = headline(node.error)
        elif node.summary is not None:
            note = summarised_note(node.summary.runs)
        return node.shown_title, styles.compile, note
    if isinstance(node, ContextNode):
        if node.compile.summary is not None:
            return f"pass context {node.id}", styles.context, SUMMARISED_ROW
        count = len(node.passes)
        return f"pass context {node.id}", styles.context, f"{count} pass{'es' if count != 1 else ''}"
    if isinstance(node, CodegenNode):
        return node.title, styles.context, headline(node.error or "")
    if isinstance(node, CompilerProcessNode):
        return node.name, None, process_note(node)
    process = node
    if process.pid is None:
        return "waiting for the target…", styles.process, ""
    if process.rank is not None and tree.several and tree.by_rank:
        host = f"{process.host}/" if process.host is not None else ""  # a job across machines
        return f"{host}rank {process.rank}  pid {process.pid}", styles.process, process.command
    return process.name, styles.process, process.command


SUMMARISED_PASSES = "its passes were let go to stay within the bound on passes (--max-passes)"
"""What a summarised compile says in place of its passes."""
SUMMARISED_ROW = "passes let go (--max-passes)"
"""The same, on the row of one of its pass contexts."""


def summarised_note(runs: int) -> str:
    """A summarised compile's note: how many pass runs it had, and that they were let go."""
    return f"{runs:,} pass{'es' if runs != 1 else ''} summarised"


def process_note(node: CompilerProcessNode) -> str:
    """What a compiler process's row says after its name: its pid and the CPU time it used
    (how long it ran is the row's total), and how it ended when that was not well."""
    note = f"pid {node.pid}  cpu {units.duration(node.cpu_ns)}"
    if node.status is FAILED and node.exit is not None:
        note += f"  {'killed by signal ' + str(-node.exit) if node.exit < 0 else 'exit ' + str(node.exit)}"
    return note


def headline(error: str) -> str:
    """One line that says what went wrong: the first line, unless it only introduces the
    compiler output that follows (``Compilation error:``), then the first line there that
    reports an error, without the temporary directory of the file it names."""
    lines = [line.strip() for line in error.splitlines() if line.strip()]
    if not lines:
        return ""
    first = lines[0]
    if first.endswith(":"):
        reported = first_diagnostic("\n".join(lines[1:]))
        if reported is not None:
            kind = first.split(":", 1)[0]
            return f"{kind}: {reported}"
    return first


def _process_summary(tree: PassTree, process: ProcessNode, room: int) -> str:
    """The compiles of the session, or of ``process`` in a session of several, in at most
    ``room`` cells: its last parts are dropped whole where they do not fit, and all of it
    where its first does not."""
    if tree.several:
        compiles = len(process.compiles)
        failed = sum(1 for comp in process.compiles if comp.status is FAILED)
        running = sum(1 for comp in process.compiles if comp in tree.open_compiles)
        summarised = sum(1 for comp in process.compiles if comp.summary is not None) if tree.summarised else 0
    else:
        compiles = len(tree.compiles)
        failed = tree.failed_compiles
        running = len(tree.open_compiles)  # none once the stream ended: they became incomplete
        summarised = tree.summarised
    text = f"{compiles} compile{'s' if compiles != 1 else ''}"
    if failed:
        text += f", {failed} failed"
    if running:
        text += f", {running} running"
    if summarised:
        text += f", {summarised:,} earlier summarised (passes let go)"
    parts = text.split(", ")
    while parts and cell_len(", ".join(parts)) + 1 > room:
        parts.pop()
    return ", ".join(parts) + " " if parts else ""


def _fit(text: str, width: int) -> str:
    if width <= 0:
        return ""
    if cell_len(text) <= width:
        return text
    return set_cell_size(text, width - 1) + "…"


def _add_name(
    add: Callable[[str, Style | None], None], name: str, style: Style | None, match_style: Style, search: str, room: int
) -> None:
    shown = _fit(name, room)
    at = shown.lower().find(search.lower()) if search else -1
    if at < 0:
        add(shown, style)
        return
    end = at + len(search)
    add(shown[:at], style)
    add(shown[at:end], match_style if style is None else style + match_style)
    add(shown[end:], style)
