"""The stacks pane: the Python stacks of every thread of the live target, fetched through its
agent when the pane opens (``r`` again), and its native stacks through py-spy on ``n``."""

from __future__ import annotations

from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from iket_tui.protocol import messages as m
from iket_tui.sources.base import EventSource
from iket_tui.sources.stacks import native_stacks, stack_lines
from iket_tui.ui.asking import POLL_S, NotAsked, Question

WAIT_S = 10.0


class StacksScreen(Screen[None]):
    """Stacks of the target's threads, innermost frame last."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,S", "app.pop_screen", "Passes"),
        Binding("r", "refresh_stacks", "Refresh"),
        Binding("n", "native", "Native (py-spy)"),
        Binding("a", "toggle_agent", "Agent threads"),
    ]

    DEFAULT_CSS = """
    StacksScreen #stacks-title { height: 1; background: $panel; text-style: bold; padding: 0 1; }
    StacksScreen #stacks-body { height: 1fr; padding: 0 1; }
    """

    def __init__(self, source: EventSource, pid: int | None) -> None:
        super().__init__()
        self.source = source
        self.pid = pid
        self.include_agent = False
        self.response: m.Message | None = None
        self.native: str | None = None
        self._question: Question | None = None
        self._status = ""

    def compose(self) -> ComposeResult:
        yield Static(id="stacks-title", markup=False)
        with VerticalScroll(id="stacks-scroll"):
            yield Static(id="stacks-body", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.set_interval(POLL_S, self._poll)
        self.action_refresh_stacks()

    def body_text(self) -> str:
        return str(self.query_one("#stacks-body", Static).render())

    def title_text(self) -> str:
        return str(self.query_one("#stacks-title", Static).render())

    def action_refresh_stacks(self) -> None:
        try:
            self._question = Question.ask(self.source, m.WHAT_STACKS, wait_s=WAIT_S)
        except NotAsked as exc:
            self._show(f"no stacks: {exc}", self._lines())
            return
        self._show("asking the target for its stacks ...", self._lines())

    def action_toggle_agent(self) -> None:
        self.include_agent = not self.include_agent
        self._show(self._status, self._lines())

    def action_native(self) -> None:
        if self.pid is None:
            self._show("no pid known for the target yet", self._lines())
            return
        self._show(f"reading native stacks of pid {self.pid} with py-spy ...", self._lines())
        self._read_native(self.pid)

    @work(thread=True, exclusive=True, group="native-stacks")
    def _read_native(self, pid: int) -> None:
        found = native_stacks(pid)
        self.app.call_from_thread(self._native_done, found.text, found.why)

    def _native_done(self, text: str | None, why: str | None) -> None:
        if text is None:
            self._show(f"no native stacks: {why}", self._lines())
            return
        self.native = text
        self._show(f"native stacks of pid {self.pid} (py-spy), then the Python stacks", self._lines())

    def _poll(self) -> None:
        if self._question is None:
            return
        try:
            found = self._question.answer()
        except NotAsked as exc:
            self._question = None
            self._show(f"no stacks: {exc}", self._lines())
            return
        if found is None:
            return
        self._question = None
        self.response = found
        threads = len(found.get("threads") or [])
        self._show(
            f"stacks of {threads} threads, innermost frame last · r refreshes · n adds native frames", self._lines()
        )

    def _lines(self) -> list[str]:
        lines: list[str] = []
        if self.native is not None:
            lines += [*self.native.rstrip().splitlines(), ""]
        if self.response is not None:
            lines += stack_lines(self.response, include_agent=self.include_agent)
        return lines

    def _show(self, status: str, lines: list[str]) -> None:
        self._status = status
        self.query_one("#stacks-title", Static).update(status)
        self.query_one("#stacks-body", Static).update("\n".join(lines))
