"""The IR of one pass, fetched from the live target on request: before it, after it, and the
diff between the two, highlighted, saved to a file on ``w``."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from rich.syntax import Syntax
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from iket_tui.model.nodes import PassNode
from iket_tui.protocol import messages as m
from iket_tui.sources.base import EventSource
from iket_tui.sources.ir import view_of
from iket_tui.ui.asking import POLL_S, NotAsked, Question

WAIT_S = 30.0


class IRScreen(Screen[None]):
    """Before, after or diff of one pass (``b``, ``a``, ``d``)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,i", "app.pop_screen", "Passes"),
        Binding("b", "view('before')", "Before"),
        Binding("a", "view('after')", "After"),
        Binding("d", "view('diff')", "Diff"),
        Binding("w", "save", "Save"),
    ]

    DEFAULT_CSS = """
    IRScreen #ir-title { height: 1; background: $panel; text-style: bold; padding: 0 1; }
    IRScreen #ir-body { height: auto; }
    """

    def __init__(self, source: EventSource, node: PassNode, *, save_dir: Path | None = None) -> None:
        super().__init__()
        self.source = source
        self.node = node
        self.view = "diff"
        self.answer: m.Message | None = None
        self.text = ""
        self.save_dir = save_dir or Path.cwd()
        self._question: Question | None = None

    @property
    def what(self) -> str:
        node = self.node
        return f"{node.name} (pass {node.seq} of compile {node.compile.id})"

    def compose(self) -> ComposeResult:
        yield Static(id="ir-title", markup=False)
        with VerticalScroll(id="ir-scroll"):
            yield Static(id="ir-body")
        yield Footer()

    def on_mount(self) -> None:
        self.set_interval(POLL_S, self._poll)
        node = self.node
        try:
            self._question = Question.ask(
                self.source, m.WHAT_IR, wait_s=WAIT_S, compile=node.compile.id, seq=node.seq, which="both"
            )
        except NotAsked as exc:
            self._title(f"no IR of {self.what}: {exc}")
            return
        self._title(f"asking the target for the IR around {self.what} ...")

    def title_text(self) -> str:
        return str(self.query_one("#ir-title", Static).render())

    def action_view(self, view: str) -> None:
        self.view = view
        self._show()

    def action_save(self) -> None:
        if self.answer is None:
            self.notify("nothing to save yet", severity="warning")
            return
        suffix = "diff" if self.view == "diff" else "py"
        path = self.save_dir / f"iket-ir-c{self.node.compile.id}-p{self.node.seq}-{self.view}.{suffix}"
        try:
            path.write_text(self.text, encoding="utf-8")
        except OSError as exc:
            self.notify(f"cannot write {path}: {exc.strerror or exc}", severity="error")
            return
        self.notify(f"saved {path}")

    def _poll(self) -> None:
        if self._question is None:
            return
        try:
            found = self._question.answer()
        except NotAsked as exc:
            self._question = None
            self._title(f"no IR of {self.what}: {exc}")
            return
        if found is None:
            return
        self._question = None
        if not found.get("ok"):
            self._title(f"no IR of {self.what}: {found.get('error') or 'not available'}")
            return
        self.answer = found
        if not isinstance(found.get("after"), str):
            self.view = "before"  # a pass still running: only what it was given exists
        self._show()

    def _show(self) -> None:
        if self.answer is None:
            return
        self.text = view_of(self.answer, self.view)
        lexer = "diff" if self.view == "diff" else "python"
        self.query_one("#ir-body", Static).update(Syntax(self.text, lexer, line_numbers=self.view != "diff"))
        lines = self.text.count("\n")
        self._title(f"IR {self.view} {self.what} · {lines:,} lines · b before, a after, d diff, w save")

    def _title(self, text: str) -> None:
        self.query_one("#ir-title", Static).update(text)
