"""The detail pane: everything known about the node under the cursor."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.dom import NoScreen
from textual.widgets import Static

from iket_tui.model.nodes import RUNNING, CompileNode, Node, ProcessNode
from iket_tui.model.session import Session
from iket_tui.ui.details import Details, describe


class DetailPane(VerticalScroll):
    """Labelled fields, then the error and the full traceback of a failure (the error first where
    the pane is below the tree, a few lines high, so that it shows without scrolling)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "detail--title",
        "detail--key",
        "detail--error",
        "detail--traceback",
        "detail--alarm",
    }

    DEFAULT_CSS = """
    DetailPane {
        & > .detail--title { text-style: bold; }
        & > .detail--key { color: $text-muted; }
        & > .detail--error { color: $error; text-style: bold; }
        & > .detail--traceback { color: $text-muted; }
        & > .detail--alarm { color: $error; text-style: bold; }
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._shown: tuple[Any, ...] | None = None
        self._body = Static(id="detail-body")
        self.details: Details | None = None
        self.recording: Path | None = None
        """The file this session's stream is in (replayed, or written by --record): reproducers
        of its failures are made from it."""

    def compose(self) -> ComposeResult:
        yield self._body

    def show(self, session: Session, node: Node, now_ns: int) -> None:
        """Describe ``node``; a no-op when nothing it shows has changed, or while the pane is
        torn down (the app closing may still tick)."""
        if not (self.is_attached and self._body.is_attached):
            return
        if isinstance(node, ProcessNode):
            key: tuple[Any, ...] = (node, session.version)
        else:
            comp = node if isinstance(node, CompileNode) else node.compile
            key = (node, comp.version, comp.shape, now_ns if node.status is RUNNING else 0)
        key += (self._below_the_tree(),)
        if key == self._shown:
            return
        moved = self._shown is None or self._shown[0] is not node
        self._shown = key
        self.details = describe(session, node, now_ns, self.recording)
        self._body.update(self._render_details(self.details))
        if moved:
            self.scroll_home(animate=False)

    def _render_details(self, details: Details) -> Text:
        style = self.get_component_rich_style
        text = Text(details.title + "\n", style=style("detail--title"))
        error_first = self._below_the_tree()  # there the pane is a few lines high
        if details.error and error_first:
            text.append(details.error + "\n\n", style=style("detail--error"))
        width = max((len(key) for key, _ in details.fields), default=0)
        for key, value in details.fields:
            text.append(f"{key:>{width}}  ", style=style("detail--key"))
            alarm = key == "status" and details.alarming
            text.append(value + "\n", style=style("detail--alarm") if alarm else "")
        if details.error and not error_first:
            text.append("\n" + details.error + "\n", style=style("detail--error"))
        if details.traceback:
            text.append("\n" + details.traceback.rstrip() + "\n", style=style("detail--traceback"))
        return text

    def _below_the_tree(self) -> bool:
        """Whether the pane is laid out below the tree (a narrow terminal); not while the pane
        is off screen (the app's clock can tick as it closes)."""
        try:
            return self.screen.has_class("-narrow")
        except NoScreen:
            return False

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._shown = None
