"""One watched session: every message of a stream, dispatched by type to the part of the model
it is about.

Compile and pass messages go to the :class:`~iket_tui.model.pass_tree.PassTree`, kernel
messages to the :class:`~iket_tui.model.kernels.KernelTimeline` of the process that sent them,
and the session's own traffic (hello, heartbeats, drops, checkpoints, bye) to the process row
and the stream's counters.
A stream that merges several processes' streams says whose messages follow with a ``process``
message: each process then has its row, its compiles and its own counters of what its agent
reported, and the session's counters are their sums. Applied on the app thread only, in
arrival order. Every message is untrusted: one with missing
keys or fields of the wrong type is counted as malformed and changes nothing, and so is one
that lies: a count no agent could have reached (below 0 or past
:data:`~iket_tui.model.fields.MAX_COUNT`), or a ``hello`` in the middle of a process's stream
naming another process or another major protocol version than the stream's first (a
reconnecting agent names the same); one of a type this version does not know is counted as
unknown. Applying is the hot path of a replay, so the
handlers are looked up in one dict built once.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable
from typing import Any

from iket_tui.model.counters import StreamCounters
from iket_tui.model.fields import (
    MALFORMED,
    MALFORMED_ERRORS,
    Malformed,
    count_field,
    int_field,
    opt_count_field,
    opt_str_field,
)
from iket_tui.model.kernels import DEFAULT_MAX_EVENTS, KernelMessageError, KernelTimeline, ProcessKernels
from iket_tui.model.nodes import ProcessNode
from iket_tui.model.pass_bound import DEFAULT_MAX_PASSES, bound_passes
from iket_tui.model.pass_tree import DEFAULT_STUCK_AFTER_NS, STUCK_FACTOR, PassTree
from iket_tui.protocol import messages as m

AGENT_COUNTS = (
    "backlog",
    "backlog_lost",
    "dropped",
    "filtered_passes",
    "observer_errors",
    "open_passes",
    "produced",
    "reconnections",
)
"""The counters each process's agent reports: kept per process, summed over the session."""
_NONE_COUNTED = (0,) * len(AGENT_COUNTS)


class Session:
    """The pass tree, the kernel timeline and the stream's health, from one stream's messages.

    ``version`` changes after every :meth:`apply`; ``ended`` says why the stream ended once it has.
    """

    def __init__(
        self,
        *,
        stuck_after_ns: int = DEFAULT_STUCK_AFTER_NS,
        stuck_factor: float = STUCK_FACTOR,
        by_rank: bool = False,
        max_kernel_events: int = DEFAULT_MAX_EVENTS,
        max_passes: int = DEFAULT_MAX_PASSES,
    ) -> None:
        """``by_rank``: the processes are ranks of a distributed launch, named and ordered by rank.
        ``max_kernel_events``: kernel events kept at most, over every process (the oldest
        launches beyond it keep only their summary).
        ``max_passes``: pass nodes kept at most, over every process, after each batch applied
        (the oldest finished compiles beyond it keep only their summary)."""
        self.max_passes = max_passes
        self.tree = PassTree(stuck_after_ns=stuck_after_ns, stuck_factor=stuck_factor)
        self.tree.by_rank = by_rank
        self.kernels = KernelTimeline(max_kernel_events, process=self.tree.process)
        """The first process's kernel timeline: the session's, where it watches one process."""
        self.kernel_processes = ProcessKernels(self.kernels)
        """Every process's kernel timeline: a stream of several processes routes each one's
        kernel messages to its own (their rings and modules are numbered per process)."""
        self.counters = StreamCounters()
        self.tree.process.counters = self.counters  # one process: its counts are the session's
        self.version = 0
        self.ended: str | None = None
        self._last_t_ns = 0
        self._session_messages = 0  # handled messages that are not compile or pass events
        self._majors: dict[ProcessNode, object] = {}  # the protocol major of each process's first hello
        self._counted: dict[ProcessNode, tuple[int, ...]] = {}  # several processes: what each added to the sums
        self._touched: set[ProcessNode] = set()  # processes whose counts may have changed since the sums
        self._row_handlers = self.tree.row_handlers
        own: dict[str, Callable[[dict[str, Any]], None]] = {
            m.HELLO: self._hello,
            m.HEARTBEAT: self._heartbeat,
            m.SYNC: self._sync,
            m.DROPPED: self._dropped,
            m.BYE: self._bye,
            m.CHECKPOINT: self._checkpoint,
            m.KERNEL_TRACING: self._kernel,
            m.KERNEL_MODULE: self._kernel,
            m.KERNEL_RECORDS: self._kernel,
            m.COMPILE_FAILURE: self._compile_failure,
            m.REQUEST: self._ignore,
            m.RESPONSE: self._ignore,
            m.RECORDING: self._ignore,
            m.END: self._ignore,
            m.PROCESS: self._process,
        }
        self._handlers = {**self.tree.handlers, **own}

    @property
    def process(self) -> ProcessNode:
        """The watched process: the pass tree's root row."""
        return self.tree.process

    @property
    def session_messages(self) -> int:
        """Messages applied that are the stream's own traffic rather than compile or pass events
        (hello, sync, drops, checkpoints, bye, kernel messages, ...): with ``counters.events``,
        ``counters.heartbeats``, ``counters.malformed`` and ``counters.unknown``, every message
        applied is counted once."""
        return self._session_messages

    @property
    def last_t_ns(self) -> int:
        """The latest agent time the stream carried."""
        return max(self._last_t_ns, self.tree.last_t_ns)

    # Applying messages

    def apply(self, messages: Iterable[Any]) -> None:
        """Apply messages and pass rows, mixed in any way, in arrival order; bad ones are
        counted and skipped.

        The cyclic garbage collector is paused meanwhile: every node made here lives as long
        as the session, and collections triggered by a burst of them were most of the cost.
        """
        collecting = gc.isenabled()
        gc.disable()
        try:
            self._apply(messages)
        finally:
            if collecting:
                gc.enable()

    def _apply(self, messages: Iterable[Any]) -> None:
        handlers = self._handlers
        row_handlers = self._row_handlers
        counters = self.counters
        bad = (Malformed, *MALFORMED_ERRORS)
        applied = 0
        session = counters.heartbeats + self._session_messages
        msg: Any = None
        skipped: Any = None  # the latest message counted as unknown or malformed
        items = messages if type(messages) is list or type(messages) is tuple else list(messages)
        take_packed = self.tree.take_packed
        at, count = 0, len(items)
        while at < count:
            msg = items[at]
            if type(msg) is list:
                reached = take_packed(items, at)  # a run of pass rows, in one loop
                if reached > at:
                    applied += reached - at
                    msg = items[reached - 1]
                    at = reached
                    continue
            at += 1
            try:
                handler = row_handlers.get(msg[0]) if type(msg) is list else handlers.get(msg["type"])
            except MALFORMED_ERRORS:
                counters.malformed += 1
                skipped = msg
                continue
            if handler is None:
                if type(msg) is not list and type(msg["type"]) is str:
                    counters.unknown += 1
                else:
                    counters.malformed += 1
                skipped = msg
                continue
            try:
                handler(msg)
            except bad:
                counters.malformed += 1
                skipped = msg
            else:
                applied += 1
        counters.events += applied - (counters.heartbeats + self._session_messages - session)
        if self.tree.several:
            self._touched.add(self.tree.current)
            self._sum_agent_counts()
        if msg is not skipped:
            try:
                t = msg[8] if type(msg) is list and len(msg) == m.PASS_ROW_LEN else msg["t_ns"]
            except MALFORMED_ERRORS:
                t = None
            if type(t) is int and t > self._last_t_ns:
                self._last_t_ns = t  # messages arrive in time order; the handlers of rare ones track it too
        if self.tree.pass_count > self.max_passes and bound_passes(self.tree, self.max_passes):
            self.tree.shape += 1  # compiles lost their rows below
        self.tree.version += 1
        self.version += 1

    def _sum_agent_counts(self) -> None:
        """Bring the session's sums up to date with the processes whose counts may have changed
        (only the process messages were applied to changes its counts)."""
        total = self.counters
        for process in self._touched:
            now = tuple(getattr(process.counters, name) for name in AGENT_COUNTS)
            before = self._counted.get(process, _NONE_COUNTED)
            if now != before:
                for name, value, was in zip(AGENT_COUNTS, now, before, strict=True):
                    setattr(total, name, getattr(total, name) + value - was)
                self._counted[process] = now
        self._touched.clear()

    def end_stream(self, reason: str) -> None:
        """The stream ended: whatever is still open will never be reported finished, so it is
        marked incomplete at the last time seen."""
        if self.ended is not None:
            return
        self.ended = reason
        for process in self.tree.processes:
            if process.stream_end is None:
                process.stream_end = reason
        self.tree.abandon_open(self.last_t_ns, reason)
        for timeline in self.kernel_processes.timelines.values():
            timeline.end_stream()
        self.version += 1

    # Handlers: the session's own traffic

    def _seen(self, t: int) -> None:
        if t > self._last_t_ns:
            self._last_t_ns = t

    # Each handler reads and checks every field it needs before it changes anything or counts
    # the message: a malformed one is counted once, as malformed, and leaves the session as it was.

    def _hello(self, msg: dict[str, Any]) -> None:
        if msg.get("role", "agent") != "agent":
            self._session_messages += 1
            return
        pid = int_field(msg["pid"])
        argv = msg.get("argv") or []
        if not isinstance(argv, list) or not all(type(arg) is str for arg in argv):
            raise MALFORMED
        version = opt_str_field(msg.get("version"))
        ppid = msg.get("ppid")
        rank = msg.get("rank")
        process = self.tree.current
        start_time = msg.get("start_time")
        proto = msg.get("proto")
        major = proto[0] if isinstance(proto, list) and proto else None
        if process.pid is not None and pid != process.pid:
            raise MALFORMED  # another process's hello in this one's stream
        if process.seen_hello and (
            (type(start_time) is int and process.start_time is not None and start_time != process.start_time)
            or major != self._majors.get(process)
        ):
            raise MALFORMED  # not this process's agent again: another one, or another protocol
        self._majors.setdefault(process, major)
        if process.seen_hello:
            process.counters.reconnected()  # the agent again, after a gap (docs/protocol.md "Reconnecting")
        process.exit_reason = None
        process.pid = pid
        process.argv = argv
        process.start_time = start_time if type(start_time) is int else None
        process.version = version
        caps = msg.get("caps")
        process.capabilities = [cap for cap in caps if type(cap) is str] if isinstance(caps, list) else []
        process.seen_hello = True
        process.rank = rank if type(rank) is int else None
        if type(ppid) is int:
            self.tree.place(process, ppid)
        t = msg.get("t_ns")
        if type(t) is int:
            self._seen(t)
        self._session_messages += 1

    def _heartbeat(self, msg: dict[str, Any]) -> None:
        t = int_field(msg["t_ns"])
        produced = count_field(msg["produced"])
        dropped = count_field(msg["dropped"])
        open_passes = opt_count_field(msg.get("open_passes"))
        observer_errors = opt_count_field(msg.get("observer_errors"))
        filtered = opt_count_field(msg.get("filtered_passes"))
        self.counters.heartbeats += 1
        counters = self.tree.current.counters
        counters.produced = max(counters.produced, produced)
        counters.saw_dropped(dropped)
        if open_passes is not None:
            counters.open_passes = open_passes
        if observer_errors is not None and observer_errors > counters.observer_errors:
            counters.observer_errors = observer_errors
        counters.saw_filtered(filtered)
        self._seen(t)

    def _sync(self, msg: dict[str, Any]) -> None:
        backlog = count_field(msg["backlog"])
        lost = count_field(msg["backlog_lost"])
        t = int_field(msg["t_ns"])
        filtered = opt_count_field(msg.get("filtered_passes"))
        counters = self.tree.current.counters
        counters.backlog += backlog
        counters.backlog_lost += lost
        counters.saw_filtered(filtered)
        self._seen(t)
        self._session_messages += 1

    def _dropped(self, msg: dict[str, Any]) -> None:
        total = count_field(msg["total"])
        count_field(msg["count"])
        t = int_field(msg["t_ns"])
        self.tree.current.counters.saw_dropped(total)
        self._seen(t)
        self._session_messages += 1

    def _checkpoint(self, msg: dict[str, Any]) -> None:
        dropped = count_field(msg["dropped"])
        if len(self.tree.processes) == 1:  # of several, the recorder's count is their sum
            self.tree.current.counters.saw_dropped_in_all(dropped)
        self._session_messages += 1

    def _bye(self, msg: dict[str, Any]) -> None:
        dropped = count_field(msg["dropped"])
        t = int_field(msg["t_ns"])
        filtered = opt_count_field(msg.get("filtered_passes"))
        reason = msg.get("reason")
        self.tree.current.exit_reason = reason if type(reason) is str else "exited"
        counters = self.tree.current.counters
        counters.saw_dropped(dropped)
        counters.saw_filtered(filtered)
        self._seen(t)
        self._session_messages += 1

    def _process(self, msg: dict[str, Any]) -> None:
        """Whose messages follow, in a stream of several processes; or that its stream ended."""
        pid = int_field(msg["pid"])
        start_time = msg.get("start_time")
        state = msg.get("state")
        reason = opt_str_field(msg.get("reason"))
        host = opt_str_field(msg.get("host"))
        if state not in (None, m.PROCESS_ENDED, m.PROCESS_FAILED):
            raise MALFORMED
        process = self.select_process(pid, host)
        if type(start_time) is int and process.start_time is None:
            process.start_time = start_time
        if state is not None and process.stream_end is None:
            process.stream_end = reason or state
            process.stream_failed = state == m.PROCESS_FAILED
            self.tree.abandon_open(self.last_t_ns, process.stream_end, process=process)
            timeline = self.kernel_processes.timelines.get(process)
            if timeline is not None:
                timeline.end_stream()
        self._session_messages += 1

    def select_process(self, pid: int, host: str | None = None) -> ProcessNode:
        """The process ``pid`` (on ``host``) of a stream of several, from now on the one messages are applied to."""
        tree = self.tree
        one = not tree.several
        self._touched.add(tree.current)
        process = tree.select_process(pid, host)
        if one and tree.several:  # a second process: the first one's counts become its own
            first = StreamCounters()
            for name in AGENT_COUNTS:
                setattr(first, name, getattr(self.counters, name))
            tree.process.counters = first
            self._counted[tree.process] = tuple(getattr(first, name) for name in AGENT_COUNTS)
        self._touched.add(process)
        return process

    def _compile_failure(self, msg: dict[str, Any]) -> None:
        self.tree.compile_failure(msg)
        self._session_messages += 1

    def _ignore(self, msg: dict[str, Any]) -> None:
        self._session_messages += 1

    def _kernel(self, msg: dict[str, Any]) -> None:
        """Kernel tracing traffic: to the kernel timeline of the process that sent it, not
        counted as pass events."""
        try:
            self.kernel_processes.of(self.tree.current).apply(msg)
        except KernelMessageError:
            raise MALFORMED from None
        self._session_messages += 1
        t = msg.get("t_ns")
        if type(t) is int:
            self._seen(t)

    # Derived state

    def compile_label(self, compile_id: int | None) -> str:
        """A compile in the user's words (``"3: gemm"``), for views that name the compile a
        kernel came from; empty for none, the bare id for a compile this stream never showed."""
        if compile_id is None:
            return ""
        node = self.tree.compile(compile_id)
        return f"{node.id}: {node.kernel or node.label}" if node is not None else str(compile_id)
