"""The header bar: what is wrong first (a stuck pass, failed compiles, a launch with a quiet
warp), then how the connection is, what is watched, how fast events come, what was lost.

Items are shown whole, in that order, as many as the width holds: a narrow terminal drops them
from the end (the target first falls back to shorter forms of itself), never cuts one mid-word.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.widgets import Static

from iket_tui.durations import duration
from iket_tui.model.kernels import ProcessKernels
from iket_tui.model.pass_tree import PassTree
from iket_tui.sources.base import HostState

ITEM_PADDING = 2
"""Cells around each item of the status line (one each side)."""


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
    failed: str = ""  # how many compiles failed
    kernels_quiet: bool = False  # a launch runs with a warp quiet past the threshold (said in kernels)
    hosts_lost: str = ""  # machines of a job whose connection is lost: "node3: lost, reconnecting (2 s)"

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

    def items(self) -> list[HeaderItem]:
        """The status line's items in the order they matter, those with something to say."""
        items = [
            HeaderItem("stuck", (self.stuck,)),
            HeaderItem("failed", (self.failed,)),
            HeaderItem("hosts", (self.hosts_lost, self.hosts_lost.partition(", reconnecting")[0])),
            HeaderItem("kernels-quiet", (self.kernels if self.kernels_quiet else "",)),
            HeaderItem("connection", (self.connection_text, self.connection)),
            HeaderItem("target", shorter_forms(self.target)),
            HeaderItem("processes", (self.processes,)),
            HeaderItem("rate", (f"{self.rate} ev/s  {self.events:,} events", f"{self.events:,} events")),
            HeaderItem("dropped", (self.loss,)),
            HeaderItem("kernels", ("" if self.kernels_quiet else self.kernels,)),
            HeaderItem("mode", (self.mode,)),
        ]
        return [item for item in items if item.forms[0]]

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


@dataclass(frozen=True)
class HeaderItem:
    """One item of the status line: its name (``#header-<name>``) and its text, then shorter
    forms of it, each of whole words."""

    name: str
    forms: tuple[str, ...]


def shorter_forms(text: str) -> tuple[str, ...]:
    """``text``, then ``text`` less its last part, and so on down to its first: parts are what
    two spaces (or `` · ``) set apart (``pid 4242  python demo.py`` gives ``pid 4242``); last,
    the first part up to a colon (``recording run.msgpack of pid 471: python demo.py`` gives
    ``recording run.msgpack of pid 471``)."""
    parts = [part for part in text.replace("  ·  ", "  ").split("  ") if part]
    forms = [text]
    for end in range(len(parts) - 1, 0, -1):
        forms.append("  ".join(parts[:end]))
    if parts and ": " in parts[0]:
        forms.append(parts[0].split(": ", 1)[0])
    return tuple(dict.fromkeys(forms))


def fit_items(items: list[HeaderItem], width: int) -> list[tuple[str, str]]:
    """The items a status line ``width`` cells wide shows, as (name, text): as many as fit in
    their shortest forms, up to the first that does not (dropped with those after it); then,
    in order, each in the longest of its forms that the room left holds. The first item is
    always shown (cut with an ellipsis where even its shortest form does not fit), since it is
    the one that matters most."""
    shown: list[HeaderItem] = []
    left = width
    for item in items:
        need = cell_len(item.forms[-1]) + ITEM_PADDING
        if need > left and shown:
            break
        shown.append(item)
        left -= need
    texts: list[tuple[str, str]] = []
    for item in shown:
        shortest = cell_len(item.forms[-1])
        form = next((form for form in item.forms if cell_len(form) - shortest <= left), item.forms[-1])
        left -= cell_len(form) - shortest
        texts.append((item.name, form))
    return texts


ITEM_NAMES: tuple[str, ...] = ("stuck", "failed", "hosts", "kernels-quiet", "connection", "target", "processes")
ITEM_NAMES += ("rate",)
ITEM_NAMES += ("dropped", "kernels", "mode")
"""The status line's items, in the order they are laid out (that of :meth:`HeaderState.items`)."""


class HeaderBar(Vertical):
    """Two lines: the status line, and a message line shown only when there is one."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.state: HeaderState | None = None
        self._shown: dict[str, str] = {}
        self._width = 0  # laid out for no width yet: every item is shown until the bar has one

    def compose(self) -> ComposeResult:
        with Horizontal(id="header-status"):
            for name in ITEM_NAMES:
                item = Static(id=f"header-{name}", markup=False)
                item.display = False
                yield item
        yield Static(id="header-message", markup=False)

    def on_resize(self, event: events.Resize) -> None:
        self._width = event.size.width  # the new width (the bar's size may still be the last one)
        if self.state is not None:
            try:
                self._fit(self.state)
            except NoMatches:
                return

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
        if old is None or old.processes != state.processes:
            self.query_one("#header-processes", Static).set_class("failed" in state.processes, "-nonzero")
        if old is None or old.connection != state.connection:
            self.query_one("#header-connection", Static).set_classes(f"-{state.connection}")
        dropped = state.dropped + state.backlog_lost + state.skipped > 0
        self.query_one("#header-dropped", Static).set_class(dropped, "-nonzero")
        lost = "lost" in state.kernels
        self.query_one("#header-kernels", Static).set_class(lost, "-nonzero")
        if old is None or (old.message_line, old.message_line_is_error) != (
            state.message_line,
            state.message_line_is_error,
        ):
            widget = self.query_one("#header-message", Static)
            widget.update(state.message_line)
            widget.display = bool(state.message_line)
            widget.set_class(state.message_line_is_error, "-error")
        self._fit(state)

    def _fit(self, state: HeaderState) -> None:
        """Show the items the width holds, whole, and hide the rest."""
        width = self._width
        items = state.items()
        shown = dict(fit_items(items, width) if width else ((item.name, item.forms[0]) for item in items))
        for name in ITEM_NAMES:
            text = shown.get(name)
            if text == self._shown.get(name):
                continue
            widget = self.query_one(f"#header-{name}", Static)
            widget.display = text is not None
            if text is not None:
                widget.update(text)
        self._shown = shown

    def shown_text(self) -> str:
        """The status line as the user reads it at the bar's width: the items that fit."""
        return "  ".join(self._shown.values())

    def text(self) -> str:
        """The header as plain text (what a user reads)."""
        state = self.state
        if state is None:
            return ""
        parts = [item.forms[0] for item in state.items()] + [state.message_line]
        return "  ".join(part for part in parts if part)


def failed_line(tree: PassTree) -> str:
    """How many compiles failed (``2 compiles failed``); empty when none did."""
    count = tree.failed_compiles
    if not count:
        return ""
    return f"{count:,} compile{'' if count == 1 else 's'} failed"


def kernels_quiet(kernels: ProcessKernels, now_ns: int) -> bool:
    """Whether a launch runs with a warp quiet past the threshold now, in any process."""
    return bool(kernels.quiet(now_ns))


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


def hosts_lost_line(hosts: Sequence[HostState], now_s: float) -> str:
    """The machines of a job across machines whose ssh connection is lost, and for how long the
    one lost longest has been reconnecting: ``node3: lost, reconnecting (2 s)``; empty while
    every one is up."""
    lost = [host for host in hosts if host.lost_at_s is not None]
    if not lost:
        return ""
    names = ", ".join(host.host for host in lost[:3]) + (f" and {len(lost) - 3} more" if len(lost) > 3 else "")
    since = min(host.lost_at_s for host in lost if host.lost_at_s is not None)
    return f"{names}: lost, reconnecting ({max(0, int(now_s - since))} s)"
