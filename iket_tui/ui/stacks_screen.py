"""The stacks pane: the Python stacks of every thread of the live target, fetched through its
agent when the pane opens (``r`` again), and on ``n`` its native stacks, which the source reads
with py-spy of the process it is connected to. Both are requests through the app's source, their
answers :class:`ResponseArrived`; the pane runs nothing itself."""

from __future__ import annotations

import re
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import ScrollableContainer
from textual.screen import Screen
from textual.widgets import Static

from iket_tui.protocol import messages as m
from iket_tui.sources.base import NATIVE_STACKS, SourceError
from iket_tui.sources.stacks import INNERMOST_FIRST, stack_lines
from iket_tui.ui.footer import KeysFooter
from iket_tui.ui.messages import AskTarget, ResponseArrived

WAIT_S = 10.0
NATIVE_WAIT_S = 30.0  # py-spy's own bound on reading a process
_FRAME = re.compile(r'^(\s*File ")(.*)(", line \d+, in )(.*)$')


class StacksScreen(Screen[None]):
    """Stacks of the target's threads, each from its innermost frame."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,S", "app.pop_screen", "Passes"),
        Binding("r", "refresh_stacks", "Refresh"),
        Binding("n", "native", "Native (py-spy)"),
        Binding("a", "toggle_agent", "Agent threads"),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "stacks--thread",
        "stacks--file",
        "stacks--function",
        "stacks--innermost",
        "stacks--note",
    }

    DEFAULT_CSS = """
    StacksScreen {
        & #stacks-title { height: 1; background: $panel; text-style: bold; padding: 0 1; }
        & #stacks-scroll { height: 1fr; }
        & #stacks-body { width: auto; height: auto; padding: 0 1; }
        & > .stacks--thread { color: $text-accent; text-style: bold; }
        & > .stacks--file { color: $text-muted; }
        & > .stacks--function { color: $text-primary; text-style: bold; }
        & > .stacks--innermost { color: $text-warning; text-style: bold; }
        & > .stacks--note { color: $text-muted; text-style: italic; }
    }
    """

    def __init__(self, ask: AskTarget) -> None:
        super().__init__()
        self.ask = ask
        self.include_agent = False
        self.response: m.Message | None = None
        self.native: str | None = None
        self._asked: int | None = None  # the request for the Python stacks this screen waits for
        self._asked_native: int | None = None  # the request for the native stacks it waits for
        self._status = ""

    def compose(self) -> ComposeResult:
        yield Static(id="stacks-title", markup=False)
        with ScrollableContainer(id="stacks-scroll"):
            yield Static(id="stacks-body", markup=False)
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#stacks-scroll").focus()
        self.action_refresh_stacks()

    def body_text(self) -> str:
        return str(self.query_one("#stacks-body", Static).render())

    def title_text(self) -> str:
        return str(self.query_one("#stacks-title", Static).render())

    def action_refresh_stacks(self) -> None:
        try:
            self._asked = self.ask(m.WHAT_STACKS, timeout_s=WAIT_S)
        except SourceError as exc:
            self._show(f"no stacks: {exc}", self._lines())
            return
        self._show("asking the target for its stacks ...", self._lines())

    def action_toggle_agent(self) -> None:
        self.include_agent = not self.include_agent
        self._show(self._status, self._lines())

    def action_native(self) -> None:
        try:
            self._asked_native = self.ask(NATIVE_STACKS, timeout_s=NATIVE_WAIT_S)
        except SourceError as exc:
            self._show(f"no native stacks: {exc}", self._lines())
            return
        self._show("reading the target's native stacks with py-spy ...", self._lines())

    def _native_answered(self, message: ResponseArrived) -> None:
        self._asked_native = None
        found, why = message.outcome(unsaid="py-spy gave no reason")
        if found is None:
            self._show(f"no native stacks: {why}", self._lines())
            return
        self.native = str(found.get("text") or "")
        target = found.get("target") or f"pid {found.get('pid')}"
        self._show(f"native stacks of {target} (py-spy), then the Python stacks", self._lines())

    @on(ResponseArrived)
    def _answered(self, message: ResponseArrived) -> None:
        answer = message.answer
        if answer.request_id == self._asked_native:
            self._native_answered(message)
            return
        if answer.request_id != self._asked:
            return
        self._asked = None
        found, why = message.outcome(unsaid="the agent gave no reason")
        if found is None:
            self._show(f"no stacks: {why}", self._lines())
            return
        self.response = found
        threads = len(found.get("threads") or [])
        self._show(
            f"stacks of {threads} threads, {INNERMOST_FIRST} · r refreshes · n adds native frames", self._lines()
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
        self.query_one("#stacks-body", Static).update(self._styled(lines))

    def _styled(self, lines: list[str]) -> Text:
        """Threads stand out, and in each frame its function; a thread's innermost frame, where
        it is now, most of all."""
        style = self.get_component_rich_style
        thread, file, function = style("stacks--thread"), style("stacks--file"), style("stacks--function")
        innermost, note = style("stacks--innermost"), style("stacks--note")
        marked = _innermost(lines)
        text = Text(end="", no_wrap=True)
        for number, line in enumerate(lines):
            if number:
                text.append("\n")
            frame = _FRAME.match(line)
            if line.startswith("Thread "):
                text.append(line, thread)
            elif frame is not None:
                text.append(frame[1], file)
                text.append(frame[2], innermost if number in marked else file)
                text.append(frame[3], file)
                text.append(frame[4], innermost if number in marked else function)
            elif number in marked:
                text.append(line, innermost)
            elif line.startswith(("(", "  ... ")):
                text.append(line, note)
            else:
                text.append(line)
        return text


def _innermost(lines: list[str]) -> set[int]:
    """The lines of each thread's innermost frame: the frame right under the thread's line, and
    its code."""
    marked: set[int] = set()
    for number, line in enumerate(lines):
        if _FRAME.match(line) and number > 0 and lines[number - 1].startswith("Thread "):
            after = number + 1
            if after < len(lines) and lines[after].startswith("    "):
                after += 1
            marked.update(range(number, after))
    return marked
