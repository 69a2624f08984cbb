"""The header bar: what is watched, what runs stuck, how the connection is, how fast events come,
what was lost."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.widgets import Static

from iket_tui.durations import duration
from iket_tui.model.pass_tree import PassTree


@dataclass(frozen=True)
class HeaderState:
    target: str
    connection: str  # live, quiet, silent, disconnected, ended, failed, connecting
    events: int
    rate: str
    dropped: int
    backlog_lost: int = 0  # events too old for the catch-up a late client receives
    skipped: int = 0  # malformed or unknown messages
    filtered: int = 0  # passes this client's filter left out: asked for, not lost
    reconnections: int = 0  # times the agent came back after a gap
    mode: str = ""  # follow, paused, replay position and speed
    message: str = ""  # the source's error or note, one line
    message_is_error: bool = False
    kernels: str = ""  # kernel tracing: events read and lost, or why there is no ring
    silent_for: str = ""  # with connection "silent": for how long, and since when
    recording: str = ""  # why recording to a file stopped, once it did; shown until the end
    processes: str = ""  # several processes: how many, and how many are live, ended and failed
    stuck: str = ""  # what runs stuck (passes, the compiler's processes): the longest, and how many

    @property
    def message_line(self) -> str:
        """The message line: a stopped recording (after the source's error, if any), else the
        source's error or latest note."""
        if self.message and self.recording and self.message_is_error:
            return f"{self.message}  ·  {self.recording}"
        return self.recording or self.message

    @property
    def message_line_is_error(self) -> bool:
        return self.message_is_error or bool(self.recording)

    @property
    def connection_text(self) -> str:
        if self.connection == "silent" and self.silent_for:
            return f"unresponsive {self.silent_for}"
        return self.connection

    @property
    def loss(self) -> str:
        """What was lost, as one short phrase: always the drops, the rest only when nonzero."""
        text = f"{self.dropped:,} dropped"
        if self.backlog_lost:
            text += f", {self.backlog_lost:,} missed before attach"
        if self.skipped:
            text += f", {self.skipped:,} bad messages"
        if self.filtered:
            text += f", {self.filtered:,} passes filtered"
        if self.reconnections:
            text += f", {self.reconnections:,} reconnection{'' if self.reconnections == 1 else 's'}"
        return text


class HeaderBar(Vertical):
    """Two lines: the status line, and a message line shown only when there is one."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.state: HeaderState | None = None

    def compose(self) -> ComposeResult:
        with Horizontal(id="header-status"):
            yield Static(id="header-target", markup=False)
            yield Static(id="header-processes", markup=False)
            yield Static(id="header-stuck", markup=False)
            yield Static(id="header-connection", markup=False)
            yield Static(id="header-rate", markup=False)
            yield Static(id="header-dropped", markup=False)
            yield Static(id="header-kernels", markup=False)
            yield Static(id="header-mode", markup=False)
        yield Static(id="header-message", markup=False)

    def show(self, state: HeaderState) -> None:
        """Update what changed since the last state shown. Before the bar's lines are mounted, or
        while they are being removed (a tick of the app's clock may come then), nothing is shown
        and the next call shows the state."""
        old = self.state
        if state == old:
            return
        try:
            self._show(old, state)
        except NoMatches:
            return
        self.state = state

    def _show(self, old: HeaderState | None, state: HeaderState) -> None:
        if old is None or old.target != state.target:
            self.query_one("#header-target", Static).update(state.target)
        if old is None or old.processes != state.processes:
            widget = self.query_one("#header-processes", Static)
            widget.update(state.processes)
            widget.display = bool(state.processes)
            widget.set_class("failed" in state.processes, "-nonzero")
        if old is None or old.stuck != state.stuck:
            widget = self.query_one("#header-stuck", Static)
            widget.update(state.stuck)
            widget.display = bool(state.stuck)
        if old is None or (old.connection, old.silent_for) != (state.connection, state.silent_for):
            widget = self.query_one("#header-connection", Static)
            widget.update(state.connection_text)
            widget.set_classes(f"-{state.connection}")
        if old is None or (old.rate, old.events) != (state.rate, state.events):
            self.query_one("#header-rate", Static).update(f"{state.rate} ev/s  {state.events:,} events")
        if old is None or (old.dropped, old.backlog_lost, old.skipped, old.filtered, old.reconnections) != (
            state.dropped,
            state.backlog_lost,
            state.skipped,
            state.filtered,
            state.reconnections,
        ):
            widget = self.query_one("#header-dropped", Static)
            widget.update(state.loss)
            widget.set_class(state.dropped + state.backlog_lost + state.skipped > 0, "-nonzero")
        if old is None or old.kernels != state.kernels:
            widget = self.query_one("#header-kernels", Static)
            widget.update(state.kernels)
            widget.display = bool(state.kernels)
            widget.set_class("lost" in state.kernels, "-nonzero")
        if old is None or old.mode != state.mode:
            widget = self.query_one("#header-mode", Static)
            widget.update(state.mode)
            widget.display = bool(state.mode)
        if old is None or (old.message_line, old.message_line_is_error) != (
            state.message_line,
            state.message_line_is_error,
        ):
            widget = self.query_one("#header-message", Static)
            widget.update(state.message_line)
            widget.display = bool(state.message_line)
            widget.set_class(state.message_line_is_error, "-error")

    def text(self) -> str:
        """The header as plain text (what a user reads)."""
        state = self.state
        if state is None:
            return ""
        parts = [state.target, state.processes, state.stuck, state.connection_text]
        parts += [f"{state.rate} ev/s", f"{state.events:,} events"]
        parts += [state.loss, state.kernels, state.mode, state.message_line]
        return "  ".join(part for part in parts if part)


def stuck_line(tree: PassTree, now_ns: int) -> str:
    """What runs stuck now, passes and the compiler's processes alike: how many, and the one
    stuck longest (``stuck: ptxas pid 4242 1m 02s``) of those with nothing stuck inside them,
    since a pass or a process waiting on a stuck one is stuck as long and says less; empty
    when nothing is."""
    passes = tree.stuck_passes(now_ns)
    processes = tree.stuck_processes(now_ns)
    waiting = {id(node.parent) for node in passes if node.parent is not None}
    waiting |= {id(node.parent) for node in processes if node.parent is not None}
    innermost = [(node.start_ns, node.name) for node in passes if id(node) not in waiting]
    innermost += [(node.start_ns, f"{node.name} pid {node.pid}") for node in processes if id(node) not in waiting]
    if not innermost:
        return ""
    start, what = min(innermost)
    longest = f"{what} {duration(now_ns - start)}"
    count = len(passes) + len(processes)
    return f"stuck: {longest}" if count == 1 else f"{count} stuck, longest {longest}"
