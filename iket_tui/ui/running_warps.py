"""The warps of a launch that have not ended, shown over the flame view while the launch runs
past the threshold: a summary line, then per block the warps grouped by their last event, the
longest quiet first. Painted from :class:`~iket_tui.model.running_kernels.Unfinished`; a clock
tick repaints only the "ago" times, the data comes with the model."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.widgets import Static

from iket_tui.model.running_kernels import Unfinished
from iket_tui.ui.wrapping import wrapped

ROWS = 8
"""Groups listed at most; the line after them says how many more."""
PADDING = 2
"""The cells the widget's padding takes (one each side)."""


class RunningWarps(Static):
    """A summary line and the unfinished warps of the selected launch (hidden while it has none
    running past the threshold)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"running-warps--summary", "running-warps--stuck", "running-warps--quiet"}

    DEFAULT_CSS = """
    RunningWarps { height: auto; max-height: 12; padding: 0 1; display: none; }
    RunningWarps.-shown { display: block; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, markup=False)
        self.summary = ""
        """The summary line shown, empty while hidden."""
        self.rows: list[str] = []
        """The rows shown under it, as plain text."""

    def show(self, found: Unfinished | None, total_blocks: int) -> None:
        """Show ``found`` (None or no groups: hide)."""
        if found is None or not found.groups:
            self.summary, self.rows = "", []
            self.remove_class("-shown")
            self.update("")
            return
        self.summary = found.summary(total_blocks)
        columns = [group.columns() for group in found.groups[:ROWS]]
        widths = [max(len(row[i]) for row in columns) for i in range(3)]
        self.rows = ["  ".join(row[i].ljust(widths[i]) if i < 3 else row[i] for i in range(4)) for row in columns]
        hidden = found.group_count - len(columns)
        summary = wrapped(self.summary, self.screen.size.width - PADDING)
        text = Text(summary, style=self.get_component_rich_style("running-warps--summary", partial=True), end="")
        stuck = self.get_component_rich_style("running-warps--stuck", partial=True)
        quiet = self.get_component_rich_style("running-warps--quiet", partial=True)
        for group, row in zip(found.groups, self.rows, strict=False):
            text.append("\n  ")
            text.append(row, style=stuck if group.stuck else quiet)
        if hidden > 0:
            more = f"  ... {hidden} more group{'s' if hidden != 1 else ''} of warps"
            self.rows.append(more.strip())
            text.append("\n" + more, style=quiet)
        self.add_class("-shown")
        self.update(text)
