"""The iket-tui app: a live (or replayed) pass tree with a header, a detail pane and keys.

A thread worker runs the source's blocking ``batches()`` and posts one message per batch;
the app applies each batch to the session on its own thread, lets each widget repaint what
changed, and tells the other screens with :class:`ModelChanged` (and every tick, as running
timers move). Answers to requests arrive in batches too and reach the screens as
:class:`ResponseArrived`. Time comes from an injectable clock, so tests and screenshots freeze it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from threading import BoundedSemaphore
from typing import TYPE_CHECKING, ClassVar

from rich.console import RenderableType
from textual import events, on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Input
from textual.worker import get_current_worker

from iket_tui.model.activity import Connection, StreamActivity
from iket_tui.model.behind import passes_behind
from iket_tui.model.clock import AgentClock
from iket_tui.model.collector import tune_for_large_trees
from iket_tui.model.kernels import KernelMessageError, KernelTimeline
from iket_tui.model.nodes import DONE, FAILED, RUNNING, CompileNode, Node, PassNode, ProcessNode
from iket_tui.model.pass_bound import DEFAULT_MAX_PASSES
from iket_tui.model.pass_search import PassSearch
from iket_tui.model.pass_timing import PassTiming
from iket_tui.model.session import Session
from iket_tui.model.visible_rows import VisibleRows
from iket_tui.protocol.messages import HEARTBEAT, KERNEL_MODULE, KERNEL_RECORDS, KERNEL_TRACING, Message, t_ns_of
from iket_tui.sources.base import (
    EventSource,
    HostState,
    PlaybackControl,
    SourceBatch,
    SourceError,
    SourceState,
)
from iket_tui.sources.checkpoints import Checkpoint, ReplayCheckpoints
from iket_tui.sources.reading import RecordingReader
from iket_tui.sources.replay import RecordingSource
from iket_tui.sources.timeline import RecordingTimeline, scan_timeline
from iket_tui.ui import units
from iket_tui.ui.detail_pane import DetailPane
from iket_tui.ui.footer import KeysFooter
from iket_tui.ui.header_bar import HeaderBar, HeaderState, failed_line, hosts_lost_line, kernels_quiet, stuck_line
from iket_tui.ui.help_screen import HelpScreen
from iket_tui.ui.messages import AskTarget, BatchArrived, ModelChanged, ResponseArrived, SampleRead, SourceFinished
from iket_tui.ui.pass_tree_view import ColumnHeader, PassTreeView
from iket_tui.ui.replay_jumps import JUMPS, ReplayJumps
from iket_tui.ui.search_bar import SearchBar
from iket_tui.ui.timeline_bar import TimelineBar

if TYPE_CHECKING:
    from iket_tui.ui.hang_screens import StuckPass

_TREE_ACTIONS = frozenset(
    {"toggle_details", "search", "search_next", "search_previous", "toggle_follow", "ir", "stacks", "timing"}
    | {"stuck_repro", "abort", "compare"}
)
"""Actions of the pass tree's screen, not offered over the kernels, stacks, timing or IR screens."""

SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 64.0, 256.0, 1024.0, 0.0)
"""Replay speeds the speed keys step through; 0 plays as fast as the recording can be read."""
TICK_S = 1.0
HINT_S = 30.0
"""How long the starting hint stays on screen."""
BATCHES_IN_FLIGHT = 16  # the reader waits when the app is this far behind
SAMPLE_TYPES = frozenset({KERNEL_TRACING, KERNEL_MODULE, KERNEL_RECORDS})
NARROW_BELOW = 120  # columns; narrower terminals get the detail pane below the tree


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


class IketApp(App[int]):
    """Watch the compiler passes of one target, live or from a recording."""

    CSS_PATH = "app.tcss"
    TITLE = "iket-tui"
    ENABLE_COMMAND_PALETTE = False

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help"),
        Binding("slash", "search", "Search"),
        Binding("n", "search_next", "Next match", show=False),
        Binding("N", "search_previous", "Previous match", show=False),
        Binding("f", "toggle_follow", "Follow"),
        Binding("p", "toggle_pause", "Pause"),
        Binding("d", "toggle_details", "Details"),
        Binding("K", "kernels", "Kernels"),
        Binding("S", "stacks", "Stacks"),
        Binding("i", "ir", "IR", show=False),
        Binding("T", "timing", "Timing"),
        Binding("D", "compare", "Compare", show=False),
        Binding("R", "stuck_repro", "Repro", show=False),
        Binding("A", "abort", "Abort", show=False),
        Binding("space", "playback_pause", "Pause", show=False, priority=True),
        Binding("s,full_stop", "step", "Step"),
        Binding("left_square_bracket", "slower", "Slower"),
        Binding("right_square_bracket", "faster", "Faster"),
        Binding("minus", "slower", "Slower", show=False, priority=True),
        Binding("plus", "faster", "Faster", show=False, priority=True),
        Binding("x", "jump('next_failure')", "Next failure", show=False),
        Binding("X", "jump('previous_failure')", "Previous failure", show=False),
        Binding("w", "jump('next_stuck')", "Next stuck pass", show=False),
        Binding("W", "jump('previous_stuck')", "Previous stuck pass", show=False),
        Binding("u", "jump('next_quiet')", "Next quiet warp", show=False),
        Binding("U", "jump('previous_quiet')", "Previous quiet warp", show=False),
        Binding("o", "jump('next_process')", "Next process event", show=False),
        Binding("O", "jump('previous_process')", "Previous process event", show=False),
        Binding("g", "jump('next_compile')", "Next compile", show=False),
        Binding("G", "jump('previous_compile')", "Previous compile", show=False),
        Binding("backspace", "jump_back", "Back", show=False),
    ]

    def __init__(
        self,
        source: EventSource,
        *,
        stuck_after_s: float = 30.0,
        kernel_stuck_after_s: float = 2.0,
        follow: bool = True,
        clock: Callable[[], float] = time.monotonic,
        tick_s: float = TICK_S,
        sample_kernels: Path | None = None,
        by_rank: bool = False,
        max_passes: int = DEFAULT_MAX_PASSES,
        hint: str | None = None,
    ) -> None:
        """``clock`` gives local monotonic seconds (tests freeze it); ``tick_s`` is how often
        running timers and rates refresh. ``hint``: what to try first, shown as a notification
        as the app starts (the demo's tour). ``kernel_stuck_after_s``: a kernel launch with warps
        that have not ended and no event for longer is marked quiet on the kernels screen.
        ``sample_kernels`` is a recording whose kernels the kernels screen shows when the target
        traces none on a GPU (the demo's). ``max_passes``: pass nodes the tree keeps, past which
        the oldest finished compiles keep only their summary."""
        super().__init__()
        self.source = source
        self.sample_path = sample_kernels
        self.hint = hint
        self.sample_kernels = KernelTimeline() if sample_kernels is not None else None
        """The sample recording's kernels, filled once a worker has read it."""
        self._timing: PassTiming | None = None  # kept between openings of the timing screen
        self.playback = source if isinstance(source, PlaybackControl) else None
        self.clock = clock
        self.tick_s = tick_s
        self.session = Session(stuck_after_ns=int(stuck_after_s * 1e9), by_rank=by_rank, max_passes=max_passes)
        self.session.kernels.stuck_after_ns = int(kernel_stuck_after_s * 1e9)
        self.pass_tree = self.session.tree
        self.rows = VisibleRows(self.pass_tree)
        self.pass_search = PassSearch(self.pass_tree)
        self.activity = StreamActivity()
        self.agent_clock = AgentClock()
        self.following = follow
        self.paused = False  # a live display frozen by the user
        self.source_state = SourceState.CONNECTING
        self.source_error: str | None = None
        self.notes: list[str] = []
        self.recording_stopped: str | None = None  # why recording the stream to a file stopped early
        self.hosts: tuple[HostState, ...] = ()  # the machines of a job across machines, as last said
        self.batches_received = 0
        self._held: list[tuple[Message, ...]] = []
        self._paused_now_ns = 0
        self._first_t_ns: int | None = None
        self._seen_failed: set[CompileNode] = set()
        self._search_origin = 0
        self._source_closed = False
        self._in_flight = BoundedSemaphore(BATCHES_IN_FLIGHT)
        # The main screen's widgets, kept so that they are reachable while another screen
        # (the help) is on top.
        self.header = HeaderBar(id="header")
        self.view = PassTreeView(self.pass_tree, self.rows, id="tree")
        self.detail = DetailPane(id="detail")
        self.search_bar = SearchBar(id="search")
        self.seekable = source if isinstance(source, RecordingSource) and source.seekable else None
        """The replay that jumps (the timeline bar and the jump keys), or None."""
        self.timeline_bar = TimelineBar(id="timeline")
        self.jumps = ReplayJumps()
        self.checkpoints = (
            ReplayCheckpoints(self.seekable.path, self._new_session) if self.seekable is not None else None
        )
        """The replay's model kept at points of the recording, for its jumps (made on a thread)."""

    # Layout

    def compose(self) -> ComposeResult:
        yield self.header
        if self.seekable is not None:
            yield self.timeline_bar
        with Horizontal(id="main"):
            with Vertical(id="tree-pane"):
                yield ColumnHeader(self.view, id="columns")
                yield self.view
            yield self.detail
        yield self.search_bar
        yield KeysFooter()

    def on_mount(self) -> None:
        tune_for_large_trees()
        self.search_bar.display = False
        self.view.focus()
        self._layout_for(self.size.width)
        self.set_interval(self.tick_s, self._tick, name="tick")
        self.refresh_views()
        self.read_source()
        if self.seekable is not None:
            self.read_timeline(self.seekable.path)
        if self.checkpoints is not None:
            self.keep_checkpoints(self.checkpoints)
        if self.sample_path is not None:
            self.read_sample(self.sample_path)
        if self.hint is not None:
            self.notify(self.hint, title="Try this", timeout=HINT_S, markup=False)

    def on_resize(self, event: events.Resize) -> None:
        self._layout_for(event.size.width)  # the new width (the app's size may still be the last one)

    def _layout_for(self, width: int) -> None:
        self.view.screen.set_class(width < NARROW_BELOW, "-narrow")

    # The source

    @work(thread=True, exclusive=True, exit_on_error=False, group="source", description="read events from the source")
    def read_source(self) -> None:
        """Runs the source's blocking loop; posts each batch to the app thread."""
        worker = get_current_worker()
        error: str | None = None
        try:
            for batch in self.source.batches():
                while not self._in_flight.acquire(timeout=0.1):
                    if worker.is_cancelled:
                        return
                if worker.is_cancelled:
                    return
                self.post_message(BatchArrived(batch))
        except Exception as exc:  # any failure of the source ends it; what arrived stays on screen
            error = _one_line(exc)
        self.post_message(SourceFinished(error))

    @work(thread=True, exclusive=True, exit_on_error=False, group="timeline", description="read the replay's timeline")
    def read_timeline(self, path: Path) -> None:
        """Reads the recording once for its timeline (the marks the jump keys go to); sets it on the app thread."""
        session = self.session
        try:
            timeline = scan_timeline(
                path, stuck_after_ns=session.tree.stuck_after_ns, kernel_stuck_after_ns=session.kernels.stuck_after_ns
            )
        except SourceError as exc:
            self.call_from_thread(self.notify, f"no timeline: {exc}", severity="warning")
            return
        self.call_from_thread(self._timeline_read, timeline)

    @work(thread=True, exclusive=True, exit_on_error=False, group="checkpoints", description="keep the model at points")
    def keep_checkpoints(self, checkpoints: ReplayCheckpoints) -> None:
        """Reads the recording once into a model of its own, kept at points for the jumps."""
        checkpoints.build()

    def _timeline_read(self, timeline: RecordingTimeline) -> None:
        self.jumps.timeline = timeline
        self._show_timeline()

    def _show_timeline(self) -> None:
        if self.seekable is not None:
            self.timeline_bar.show(self.jumps.timeline, self.seekable.position_t_ns, self._playing())

    @work(thread=True, exclusive=True, exit_on_error=False, group="sample", description="read the sample kernels")
    def read_sample(self, path: Path) -> None:
        """Reads the kernel messages of the sample recording; posts them to the app thread."""
        try:
            kept = tuple(msg for msg in RecordingReader(path) if msg.get("type") in SAMPLE_TYPES)
        except SourceError as exc:
            self.post_message(SampleRead((), error=str(exc)))
            return
        self.post_message(SampleRead(kept))

    @on(SampleRead)
    def _sample_read(self, message: SampleRead) -> None:
        sample = self.sample_kernels
        if sample is None:
            return
        if message.error:
            self.notify(f"no sample kernels: {message.error}", severity="warning")
        for msg in message.messages:
            try:
                sample.apply(msg)
            except KernelMessageError:
                continue  # a damaged sample shows what it can
        self._tell_screens(ModelChanged)

    def request(self, what: str, *, timeout_s: float, **fields: object) -> int:
        """Ask the target through the source (an :class:`~iket_tui.ui.messages.AskTarget`); the
        answer reaches every screen as :class:`ResponseArrived`. Raises ``SourceError``."""
        if self._source_closed:
            raise SourceError("the source is closed")
        return self.source.request(what, timeout_s=timeout_s, **fields)

    def ask_process_of(self, node: Node) -> AskTarget:
        """How to ask the agent of the process ``node`` belongs to: in a session of several
        processes, each request names its process; in a session of one, it is :meth:`request`."""
        if not self.pass_tree.several:
            return self.request
        pid = self._process_of(node).pid
        return partial(self.request, process=pid)

    def _process_under_cursor(self) -> ProcessNode:
        return self._process_of(self.view.cursor)

    def _process_of(self, node: Node) -> ProcessNode:
        if isinstance(node, ProcessNode):
            return node
        comp = node if isinstance(node, CompileNode) else node.compile
        return self.pass_tree.process_of(comp)

    def _tell_screens(self, make: Callable[[], ModelChanged | ResponseArrived]) -> None:
        """Post a message of its own to every screen above the pass tree's (which the app refreshes itself)."""
        for screen in self.screen_stack[1:]:
            screen.post_message(make())

    def close_source(self) -> None:
        if not self._source_closed:
            self._source_closed = True
            self.source.close()
            if self.checkpoints is not None:
                self.checkpoints.close()

    @on(BatchArrived)
    def _batch_arrived(self, message: BatchArrived) -> None:
        self._in_flight.release()
        if self._source_closed:
            return  # the app is closing: what is still in flight has nowhere to be shown
        self.batches_received += 1
        batch = message.batch
        if batch.restart:
            self._restart_model(batch.resumed_from)
        now_s = self.clock()
        self._observe(batch, now_s)
        if batch.state is not None:
            self.source_state = batch.state
        if batch.error:
            self.source_error = batch.error
        self.notes += batch.notes
        if batch.recording_stopped:
            self.recording_stopped = batch.recording_stopped
        if batch.hosts is not None:
            self.hosts = batch.hosts
        messages = batch.messages
        if self.paused:
            self._held.append(messages)
            events = sum(1 for msg in messages if not isinstance(msg, dict) or msg.get("type") != HEARTBEAT)
        else:
            before = self.session.counters.events
            self._apply(messages)
            events = self.session.counters.events - before
        self.activity.record(now_s, events=events, messages=len(messages))
        if self.source_state in (SourceState.ENDED, SourceState.FAILED):
            self.activity.end()
            if not self.paused:
                self._end_stream()
        self.refresh_views()
        self._show_timeline()
        if messages and not self.paused:
            self._tell_screens(ModelChanged)
        for answer in batch.answers:
            self._tell_screens(partial(ResponseArrived, answer))

    @on(SourceFinished)
    def _source_finished(self, message: SourceFinished) -> None:
        if self._source_closed:
            return
        if message.error:
            self.source_error = message.error
            self.source_state = SourceState.FAILED
        elif self.source_state not in (SourceState.ENDED, SourceState.FAILED):
            self.source_state = SourceState.ENDED
        self.activity.end()
        if not self.paused:
            self._end_stream()
        self.refresh_views()

    def _observe(self, batch: SourceBatch, now_s: float) -> None:
        messages = batch.messages
        if messages:
            t = t_ns_of(messages[-1])
            if t is not None:
                self.agent_clock.observe(t, now_s)
                if self._first_t_ns is None:
                    self._first_t_ns = next((first for first in map(t_ns_of, messages) if first is not None), t)

    def _apply(self, messages: tuple[Message, ...]) -> None:
        tree = self.pass_tree
        watch = list(tree.open_compiles)
        known = len(tree.compiles)
        self.session.apply(messages)
        for comp in [*watch, *tree.compiles[known:]]:
            if comp.status is FAILED and comp not in self._seen_failed:
                self._seen_failed.add(comp)
                self.rows.reveal(comp.failing or comp.failed_codegen or comp)

    def _new_session(self) -> Session:
        """A model with the settings of this one (thresholds, ranks, bound on passes)."""
        old = self.session
        session = Session(stuck_after_ns=old.tree.stuck_after_ns, by_rank=old.tree.by_rank, max_passes=old.max_passes)
        session.kernels.stuck_after_ns = old.kernels.stuck_after_ns
        return session

    def _restart_model(self, start: Checkpoint | None = None) -> None:
        """The replay jumped back, or far ahead: the model is built anew from the recording's
        start, with the same settings, or from the checkpoint the jump reads on from."""
        self.session = self._new_session() if start is None else start.session()
        self.pass_tree = self.session.tree
        self.rows = VisibleRows(self.pass_tree)
        self.pass_search = PassSearch(self.pass_tree)
        self.agent_clock = AgentClock()
        if start is not None:  # the clock as the messages before the checkpoint left it
            self.agent_clock.observe(self.session.last_t_ns, self.clock())
        self.notes = []
        self._held = []
        self._first_t_ns = None if start is None else start.first_t_ns
        self._seen_failed = set()
        self._timing = None
        for comp in self.pass_tree.compiles:  # as a replay from the start would have shown them
            if comp.status is FAILED:
                self._seen_failed.add(comp)
                self.rows.reveal(comp.failing or comp.failed_codegen or comp)
        self.view.show_tree(self.pass_tree, self.rows)

    def _jump_to(self, t_ns: int, words: str) -> None:
        """Jump the replay to ``t_ns``, remembering where it stood for the back key."""
        replay = self.seekable
        if replay is None:
            return
        here = replay.position_t_ns
        if here is None and self.jumps.timeline is not None:
            here = self.jumps.timeline.start_ns  # nothing played yet: back is the start
        if here is not None:
            self.jumps.leave(here)
        replay.set_paused(True)  # to look at what it jumped to; space plays on
        replay.seek(t_ns, self._checkpoint_for(t_ns))
        timeline = self.jumps.timeline
        at = f" at {timeline.seconds(t_ns):.3f} s" if timeline is not None else ""
        self.notify(f"{words}{at}", timeout=3)

    def _checkpoint_for(self, t_ns: int) -> Checkpoint | None:
        """Where a jump to ``t_ns`` reads on from, if not from where the replay stands or the start."""
        if self.checkpoints is None or self.seekable is None:
            return None
        return self.checkpoints.start_for(t_ns, self.seekable.position_t_ns)

    @on(TimelineBar.Jump)
    def _timeline_clicked(self, message: TimelineBar.Jump) -> None:
        self._jump_to(message.t_ns, "jumped")

    def action_jump(self, name: str) -> None:
        """Jump the replay to the next or previous mark of a kind (see :data:`~iket_tui.ui.replay_jumps.JUMPS`)."""
        jump = JUMPS[name]
        replay = self.seekable
        if replay is None:
            return
        timeline = self.jumps.timeline
        here = replay.position_t_ns
        if here is None:
            here = timeline.start_ns if timeline is not None else 0
        mark = self.jumps.target(jump, here)
        if mark is None:
            self.notify(self.jumps.none_said(jump), timeout=3)
            return
        self._jump_to(mark.t_ns, mark.what)

    def action_jump_back(self) -> None:
        """Jump the replay back to where it stood before its last jump."""
        back = self.jumps.back() if self.seekable is not None else None
        if back is None:
            if self.seekable is not None:
                self.notify("no jump to go back from", timeout=3)
            return
        replay = self.seekable
        assert replay is not None
        replay.set_paused(True)
        replay.seek(back, self._checkpoint_for(back))
        timeline = self.jumps.timeline
        self.notify(f"back to {timeline.seconds(back):.3f} s" if timeline is not None else "back", timeout=3)

    def _end_stream(self) -> None:
        if self.session.ended is not None:
            return
        if self.source_state is SourceState.FAILED:
            reason = f"the source failed: {self.source_error or 'unknown error'}"
        elif self.session.process.exit_reason:
            reason = f"the target exited ({self.session.process.exit_reason})"
        elif self.playback is not None:
            reason = "the recording ended"
        else:
            reason = "the connection closed"
        self.session.end_stream(reason)

    # Clock and refresh

    def now_ns(self) -> int:
        """The agent's time now, as far as the display is concerned."""
        if self.paused:
            return self._paused_now_ns
        ended = self.session.ended is not None
        if self.playback is not None:
            frozen = ended or self.playback.paused
            return self.agent_clock.now_ns(self.clock(), rate=self.playback.speed, frozen=frozen)
        return self.agent_clock.now_ns(self.clock(), frozen=ended)

    def _tick(self) -> None:
        self.refresh_views()
        self._tell_screens(ModelChanged)

    def refresh_views(self) -> None:
        """Bring every widget up to date with the model and the clock (also done each tick)."""
        now_ns = self.now_ns()
        view = self.view
        view.set_now(now_ns)
        if self.following and not self.paused:
            self._follow()
        view.sync()
        self._show_details()
        self.header.show(self._header_state())
        self._show_timeline()

    def _follow(self) -> None:
        tree = self.pass_tree
        if not tree.compiles:
            return
        newest = tree.compiles[-1]
        self.rows.follow(newest)
        self.view.sync()
        target: Node | None = _newest_running(newest)
        if target is None:
            cursor = self.view.cursor
            inside = cursor is newest or getattr(cursor, "compile", None) is newest
            target = cursor if inside else newest
        self.view.select(target)

    def _show_details(self) -> None:
        self.detail.show(self.session, self.view.cursor, self.view.now_ns)

    def _header_state(self) -> HeaderState:
        now_s = self.clock()
        session = self.session
        process = session.process
        target = self.source.description
        if process.pid is not None and not self.pass_tree.several:
            pid = f"pid {process.pid}"
            watched = f"{pid}  {process.command}" if pid not in target else process.command
            if self.playback is None:
                target = f"{pid}  {process.command}"
            elif process.command not in target:  # a recording names what it recorded in its description
                target = f"{target}  ·  {watched}"
        ended = self.source_state is SourceState.ENDED or session.ended is not None
        connection = self.activity.connection(
            now_s,
            ended=ended and self.source_state is not SourceState.FAILED,
            failed=self.source_state is SourceState.FAILED,
        )
        if connection is Connection.ENDED:
            shown = "ended" if self.playback is not None else "disconnected"
        elif self.playback is not None and connection is not Connection.FAILED:
            shown = ""  # a recording plays or waits paused (its target and mode say so): not live, not unresponsive
            connection = Connection.LIVE
        else:
            shown = connection.value
        message = self.source_error or self._behind_line() or (self.notes[-1] if self.notes else "")
        agent_now_ns = self.now_ns()
        return HeaderState(
            target=target,
            connection=shown,
            events=self.activity.received,
            rate=units.rate(self.activity.rate(now_s)),
            dropped=session.counters.dropped,
            backlog_lost=session.counters.backlog_lost,
            skipped=session.counters.malformed + session.counters.unknown,
            filtered=session.counters.filtered_passes,
            reconnections=session.counters.reconnections,
            mode=self._mode(),
            message=message,
            message_is_error=self.source_error is not None,
            recording=self.recording_stopped or "",
            kernels=session.kernel_processes.headline(agent_now_ns),
            kernels_quiet=kernels_quiet(session.kernel_processes, agent_now_ns),
            silent_for=self._silent_for(now_s) if connection is Connection.SILENT else "",
            processes=self._processes_line(),
            stuck=stuck_line(self.pass_tree, self.view.now_ns),
            hosts_lost=hosts_lost_line(self.hosts, now_s),
            failed=failed_line(self.pass_tree),
        )

    def _behind_line(self) -> str:
        """In a session of several processes, the pass one of them is furthest behind the others
        in, compared with them, and how many more are behind; empty when none is."""
        if not self.pass_tree.several:
            return ""
        behind = sorted(passes_behind(self.pass_tree, self.view.now_ns), key=lambda found: -found.spent_ns)
        if not behind:
            return ""
        more = f"  ·  {len(behind) - 1} more behind" if len(behind) > 1 else ""
        return behind[0].text + more

    def _processes_line(self) -> str:
        """How many processes a session of several watches, and how many are live, ended, failed."""
        tree = self.pass_tree
        if not tree.several:
            return ""
        states = [tree.process_status(process) for process in tree.processes]
        parts = [f"{len(states)} processes"]
        ranks = sum(1 for process in tree.processes if process.rank is not None)
        if tree.by_rank and ranks:
            parts[0] += f" ({ranks} ranks)"
        for status, word in ((RUNNING, "live"), (DONE, "ended"), (FAILED, "failed")):
            count = states.count(status)
            if count:
                parts.append(f"{count} {word}")
        return parts[0] + ": " + ", ".join(parts[1:])

    def _silent_for(self, now_s: float) -> str:
        """How long nothing came, not even a heartbeat, and since when on the wall clock."""
        last = self.activity.last_message_s
        if last is None:
            return ""
        quiet_s = max(0.0, now_s - last)
        since = time.strftime("%H:%M:%S", time.localtime(time.time() - quiet_s))
        return f"for {units.duration(int(quiet_s * 1e9))} (since {since})"

    def _playing(self) -> str:
        """How a replay plays: ``speed 1x``, ``speed max``, then ``paused`` where it is."""
        playback = self.playback
        if playback is None:
            return ""
        speed = "speed max" if playback.speed == 0 else f"speed {playback.speed:g}x"
        return f"{speed}  paused" if playback.paused else speed

    def _mode(self) -> str:
        parts: list[str] = []
        playback = self.playback
        if playback is not None:
            last = self.session.last_t_ns
            position = last - (self._first_t_ns or last)
            parts.append(f"at {units.duration(position) or '0 ns'}")
            parts.append(self._playing())
        elif self.paused:
            held = sum(len(messages) for messages in self._held)
            parts.append(f"paused ({held:,} held)" if held else "paused")
        if self.following:
            parts.append("follow")
        return "  ".join(parts)

    # Cursor and follow

    @on(PassTreeView.CursorMoved)
    def _cursor_moved(self, message: PassTreeView.CursorMoved) -> None:
        if message.by_user and self.following:
            self.following = False
            self.header.show(self._header_state())
        self._show_details()

    def action_toggle_follow(self) -> None:
        self.following = not self.following
        self.refresh_views()

    def action_toggle_details(self) -> None:
        detail = self.detail
        detail.display = not detail.display

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_ir(self) -> None:
        """The IR before and after the pass under the cursor, and the diff (i again, or Escape, comes back)."""
        from iket_tui.ui.ir_screen import IRScreen

        if len(self.screen_stack) > 1:
            return  # only from the pass tree
        node = self.view.cursor
        if not isinstance(node, PassNode):
            self.notify("IR is shown for a pass: put the cursor on one", severity="warning")
            return
        self.push_screen(IRScreen(self.ask_process_of(node), node))

    def action_timing(self) -> None:
        """Pass timings across every compile, and the slowest passes of each (T again, or Escape, comes back)."""
        from iket_tui.model.pass_timing import PassTiming
        from iket_tui.ui.timing_screen import TimingScreen

        if isinstance(self.screen, TimingScreen):
            return
        if self._timing is None:
            self._timing = PassTiming(self.pass_tree)
        self.push_screen(TimingScreen(self.pass_tree, now_ns=self.now_ns, timing=self._timing))

    def action_stuck_repro(self) -> None:
        """A reproducer of the running pass under the cursor (or of its compile), written to a directory."""
        from iket_tui.ui.hang_screens import ReproPane

        stuck = self._running_pass()
        if stuck is not None:
            process = self._process_under_cursor()
            program = f"pid {process.pid}: {process.command}"
            ask = self.ask_process_of(self.view.cursor)
            self.push_screen(ReproPane(ask, stuck, program=program, recording=self.detail.recording))

    def action_abort(self) -> None:
        """Abort the compile of the running pass under the cursor, once confirmed."""
        from iket_tui.ui.hang_screens import AbortPane

        stuck = self._running_pass()
        if stuck is not None:
            self.push_screen(AbortPane(self.ask_process_of(self.view.cursor), stuck))

    def _running_pass(self) -> StuckPass | None:
        """The pass under the cursor if it runs, else the running pass of the compile under it."""
        from iket_tui.ui.hang_screens import StuckPass

        node = self.view.cursor
        comp = node if isinstance(node, CompileNode) else getattr(node, "compile", None)
        running = node if isinstance(node, PassNode) and node.status is RUNNING else None
        if running is None and isinstance(comp, CompileNode):
            newest = _newest_running(comp)
            running = newest if isinstance(newest, PassNode) else None
        if running is None:
            self.notify("put the cursor on a running pass, or on its compile", severity="warning")
            return None
        running_ns = max(0, self.now_ns() - running.start_ns)
        stuck = StuckPass(running.compile.id, running.seq, running.name, running.compile.kernel, running_ns)
        if self.pass_tree.several:
            process = self.pass_tree.process_of(running.compile)
            stuck = replace(stuck, pid=process.pid, who=self.pass_tree.process_label(process))
        return stuck

    def action_stacks(self) -> None:
        """The stacks of the target's threads (S again, or Escape, comes back)."""
        from iket_tui.ui.stacks_screen import StacksScreen

        if not isinstance(self.screen, StacksScreen):
            node = self.view.cursor
            self.push_screen(StacksScreen(self.ask_process_of(node)))

    def action_compare(self) -> None:
        """The compile under the cursor compared with the previous compile of its kernel, in a pane
        (c there chooses another; D again, or Escape, comes back)."""
        from iket_tui.ui.compare_screen import compile_comparison

        node = self.view.cursor
        comp = node if isinstance(node, CompileNode) else getattr(node, "compile", None)
        if not isinstance(comp, CompileNode):
            self.notify("put the cursor on a compile, or one of its passes, to compare it", severity="warning")
            return
        found = compile_comparison(self.pass_tree, comp)
        if isinstance(found, str):
            self.notify(found, severity="warning")
        else:
            self.push_screen(found)

    def action_kernels(self) -> None:
        """The launches of traced kernels and the flame view (K again, or Escape, comes back)."""
        from iket_tui.ui.kernels_screen import KernelsScreen

        if not isinstance(self.screen, KernelsScreen):
            sample = None
            if self.sample_kernels is not None and self.sample_path is not None:
                sample = (self.sample_kernels, self.sample_path.name)
            self.push_screen(KernelsScreen(self.session, sample=sample, now_ns=self.now_ns))

    # Pause and playback

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Replay keys exist only in a replay; the pass tree's keys only on its screen; none of the
        single keys act while typing a search."""
        if action in ("playback_pause", "step", "slower", "faster") and self.playback is None:
            return False
        if action in ("jump", "jump_back") and (self.seekable is None or len(self.screen_stack) > 1):
            return False
        if action in _TREE_ACTIONS and len(self.screen_stack) > 1:
            return False
        return not (isinstance(self.focused, Input) and action in _SINGLE_KEY_ACTIONS)

    def action_playback_pause(self) -> None:
        self.action_toggle_pause()

    def action_toggle_pause(self) -> None:
        if self.playback is not None:
            self.playback.set_paused(not self.playback.paused)
        else:
            self._toggle_live_pause()
        self.refresh_views()

    def _toggle_live_pause(self) -> None:
        if not self.paused:
            self._paused_now_ns = self.now_ns()
            self.paused = True
            return
        self.paused = False
        held, self._held = self._held, []
        for messages in held:
            self._apply(messages)
        if self.source_state in (SourceState.ENDED, SourceState.FAILED):
            self._end_stream()
        self._tell_screens(ModelChanged)

    def action_step(self) -> None:
        if self.playback is not None:
            if not self.playback.paused:
                self.playback.set_paused(True)
            self.playback.step()
            self.refresh_views()

    def action_faster(self) -> None:
        if self.playback is not None:
            current = _speed_rank(self.playback.speed)
            faster = [speed for speed in SPEEDS if _speed_rank(speed) > current]
            self.playback.set_speed(faster[0] if faster else SPEEDS[-1])
            self.refresh_views()

    def action_slower(self) -> None:
        if self.playback is not None:
            current = _speed_rank(self.playback.speed)
            slower = [speed for speed in SPEEDS if _speed_rank(speed) < current]
            self.playback.set_speed(slower[-1] if slower else SPEEDS[0])
            self.refresh_views()

    # Search

    def action_search(self) -> None:
        self._search_origin = _order(self.view.cursor)
        self.search_bar.begin(self.pass_search.term)

    @on(SearchBar.Changed)
    def _search_changed(self, message: SearchBar.Changed) -> None:
        self.pass_search.set_term(message.term)
        self.view.set_search(message.term)
        if message.term:
            self._jump(self.pass_search.first_from(self._search_origin))
        else:
            self._show_search_count()

    @on(SearchBar.Closed)
    def _search_closed(self, message: SearchBar.Closed) -> None:
        if not message.kept:
            self.pass_search.set_term("")
            self.view.set_search("")
        self.view.focus()

    def action_search_next(self) -> None:
        if self.pass_search.term:
            self._jump(self.pass_search.next_after(_order(self.view.cursor)))

    def action_search_previous(self) -> None:
        if self.pass_search.term:
            self._jump(self.pass_search.previous_before(_order(self.view.cursor)))

    def _jump(self, node: PassNode | None) -> None:
        if node is not None:
            self.following = False
            self.rows.reveal(node)
            self.view.sync()
            self.view.select(node, center=True)
        self._show_search_count()
        self.refresh_views()

    def _show_search_count(self) -> None:
        matches = len(self.pass_search.matches)
        cursor = self.view.cursor
        position = self.pass_search.position(cursor) if isinstance(cursor, PassNode) else None
        if not self.pass_search.term:
            text = ""
        elif not matches:
            text = "no match"
        elif position is None:
            text = f"{matches:,} matches"
        else:
            text = f"{position:,} of {matches:,}"
        self.search_bar.show_count(text)

    # Exit

    async def action_quit(self) -> None:
        self.exit(0)

    def action_help_quit(self) -> None:
        """Ctrl-C quits, as in any terminal program (where text is selected, it copies it first)."""
        self.exit(0)

    def exit(self, result: int | None = None, return_code: int = 0, message: RenderableType | None = None) -> None:
        """Close the source first: its reader thread has to end before the process can."""
        self.close_source()
        super().exit(result, return_code, message)

    def on_unmount(self) -> None:
        self.close_source()


_SINGLE_KEY_ACTIONS = frozenset(
    {"playback_pause", "slower", "faster", "step", "toggle_pause", "toggle_follow", "toggle_details", "search_next"}
)


def _speed_rank(speed: float) -> float:
    return math.inf if speed == 0 else speed


def _order(node: Node) -> int:
    return getattr(node, "order", 0)


def _newest_running(comp: CompileNode) -> Node | None:
    """What ``comp`` is busy with: the innermost pass still running in its latest pass
    context, else a codegen step still running (nvcc can take seconds)."""
    if comp.context_order:
        for node in reversed(comp.context_order[-1].passes.values()):
            if node.status is RUNNING:
                return node
    return next((step for step in reversed(comp.codegen_steps) if step.status is RUNNING), None)
