"""The pass tree: every compile, pass context, codegen step and pass the agent reported.

:class:`~iket_tui.model.session.Session` hands it the compile and pass messages of a stream
in arrival order, on the app thread only, through :attr:`PassTree.handlers` and
:attr:`PassTree.row_handlers`. Every message is untrusted: a handler raises
:data:`~iket_tui.model.fields.MALFORMED` for one with missing keys or fields of the wrong type
before it changes anything. Applying is the hot path of a replay, so handlers validate with
plain type checks and allocate nothing but the new node. Pass events are handled as pass rows
(the positional form of ``docs/protocol.md``): a reader that keeps rows builds no map per
event, and a pass event that arrives as a map is turned into a row first.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from iket_tui.model.compile_names import origin_of
from iket_tui.model.fields import ABSENT as _ABSENT
from iket_tui.model.fields import MALFORMED as _MALFORMED
from iket_tui.model.fields import int_field as _int
from iket_tui.model.fields import opt_str_field as _opt_str
from iket_tui.model.nodes import (
    DONE,
    FAILED,
    INCOMPLETE,
    MISMATCH,
    NO_CHILDREN,
    RUNNING,
    CodegenNode,
    CompileNode,
    CompilerProcessNode,
    ContextNode,
    PassNode,
    ProcessNode,
    Status,
)
from iket_tui.model.packed_passes import (
    CHILD_NS,
    DURATION,
    END,
    FIELDS,
    LIMIT,
    LOW,
    NAME,
    NONE,
    PACK,
    PARENT,
    PackedPasses,
    Packing,
)
from iket_tui.model.recompiles import Recompiles
from iket_tui.model.typical import TypicalDurations
from iket_tui.protocol import messages as m

if TYPE_CHECKING:
    from iket_tui.model.pass_timing import PassStats

STUCK_FACTOR = 10.0
"""A running pass is stuck when it has run this many times its usual (median) duration..."""
DEFAULT_STUCK_AFTER_NS = 30_000_000_000
"""...and in any case longer than this (the user's ``--stuck-after``)."""
MAX_PROCESS_DEPTH = 32
"""How many processes deep a process is looked for above another when it is put under its
parent: real process trees are shallow, and no stream can make placing a process walk a chain
of thousands."""


class PassTree:
    """Compiles, pass contexts and passes of the watched process, under its process row; in a
    session of several processes, of each of them, under a row per process.

    Messages are applied to the process :meth:`select_process` chose last (the first one until
    another is chosen): each process numbers its compiles its own way.

    ``version`` changes after every batch that the session applied; each compile has its own
    ``version`` (any change below it) and ``shape`` (a node added below it), so a view
    re-renders only what changed.
    """

    def __init__(self, *, stuck_after_ns: int = DEFAULT_STUCK_AFTER_NS, stuck_factor: float = STUCK_FACTOR) -> None:
        self.process = ProcessNode()
        """The root row; the session fills it from the agent's hello and bye. In a session of
        several processes, the first one seen."""
        self.processes: list[ProcessNode] = [self.process]
        """Every process, in the order they appeared."""
        self.current = self.process
        """The process the messages being applied come from."""
        self.process_shape = 0  # bumped when a process is added or placed under its parent
        self.by_rank = False
        """Processes are named and ordered by the rank their hello names (``run --ranks``)."""
        self.compiles: list[CompileNode] = []
        self._passes: list[PassNode] = []  # in tree order once :attr:`passes` is read
        self.pass_count = 0
        """Passes held, packed or as nodes (those of summarised compiles are not)."""
        self.pass_list_version = 0
        """Bumped when :attr:`passes` is rebuilt rather than appended to."""
        self.packing = Packing()
        """What the contexts whose passes are packed share (:mod:`~iket_tui.model.packed_passes`)."""
        self.late_events = 0
        self.summarised = 0
        """Finished compiles whose passes were let go to stay within the bound on passes."""
        self.summarised_stats: dict[str, PassStats] = {}
        """Their pass runs by name, folded in before their passes were let go."""
        self.summarise_from = 0
        """Compiles before this position are summarised or can never be (failed)."""
        """Pass and codegen events of a compile already :attr:`~CompileNode.forgotten`: not kept."""
        self.open_compiles: dict[CompileNode, None] = {}  # compiles not yet ended, oldest first
        self.recompiles = Recompiles()
        """The compiles of each kernel, for what a repeat says changed."""
        self.typical = TypicalDurations()
        self.process_typical = TypicalDurations()
        """How long the compiler's processes of each name (``ptxas``) usually run."""
        self.stuck_after_ns = stuck_after_ns
        self.stuck_factor = stuck_factor
        self.version = 0
        self.shape = 0  # bumped when a compile is added
        self.failed_compiles = 0
        self.last_t_ns = 0  # the latest agent time the rare handlers saw; the session tracks the rest
        self._by_id: dict[int, CompileNode] = self.process.by_id  # the current process's compiles
        self._by_pid: dict[tuple[str | None, int], ProcessNode] = {}  # by (host, pid): hosts may share pids
        self._root_claimed = False  # the root row has become a process of a ``process`` message
        self._orphans: dict[tuple[str | None, int], list[ProcessNode]] = {}  # by (host, ppid): parent not here yet
        self._samples = self.typical.samples
        self._order = 0
        self.row_handlers: dict[str, Callable[[m.PassRow], None]] = {
            m.PASS_START: self._pass_start,
            m.PASS_END: self._pass_end,
            m.PASS_INCOMPLETE: self._pass_incomplete,
        }
        """Handlers of pass events as pass rows, by row kind."""
        self.handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            m.PASS_START: self._pass_map,
            m.PASS_END: self._pass_map,
            m.PASS_INCOMPLETE: self._pass_map,
            m.PASS_CONTEXT_ENTER: self._context_enter,
            m.PASS_CONTEXT_EXIT: self._context_exit,
            m.COMPILE_BEGIN: self._compile_begin,
            m.COMPILE_END: self._compile_end,
            m.CODEGEN_BEGIN: self._codegen_begin,
            m.CODEGEN_END: self._codegen_end,
            m.CALLBACK_MISMATCH: self._callback_mismatch,
            m.COMPILE_PROCESS: self._compile_process,
        }
        """Handlers of compile and pass messages as maps, by message type."""

    @property
    def passes(self) -> list[PassNode]:
        """Every pass held, in tree order (packed ones are made into nodes first)."""
        packing = self.packing
        if packing.contexts:
            packing.unpack_all()
        made = packing.made
        if made:
            packing.made = []
            in_order = self._passes[-1].order < min(map(_order_of, made)) if self._passes else True
            self._passes += made
            if not in_order or any(made[at].order > made[at + 1].order for at in range(len(made) - 1)):
                self._passes.sort(key=_order_of)
                self.pass_list_version += 1  # not only appended to: a search scans it again
        return self._passes

    def drop_summarised_passes(self) -> None:
        """Take the passes of summarised compiles out of :attr:`passes`, and out of the count
        (late ones of a compile summarised before were counted as they came)."""
        packing = self.packing
        self._passes = [node for node in self._passes if node.compile.summary is None]
        packing.made = [node for node in packing.made if node.compile.summary is None]
        self.pass_count = len(self._passes) + len(packing.made) + sum(len(ctx.packed or ()) for ctx in packing.contexts)
        self.pass_list_version += 1

    def forget_passes(self) -> None:
        """Let the list of every pass go (a streamed export, which reads passes by compile)."""
        self._passes = []
        self.packing.made = []
        self.pass_count = 0
        self.pass_list_version += 1

    @property
    def several(self) -> bool:
        """Whether this session watches more than one process."""
        return len(self.processes) > 1

    def select_process(self, pid: int, host: str | None = None) -> ProcessNode:
        """The process ``pid`` (on ``host``, where it runs on another machine), from now on the
        one messages are applied to; the first one seen takes the root row."""
        node = self._by_pid.get((host, pid))
        if node is None:
            if not self._root_claimed and self.process.pid in (None, pid):
                node = self.process  # the first process, even when its first messages were told before
                self._root_claimed = True
            else:
                node = ProcessNode()
                self.processes.append(node)
            node.pid = pid
            node.host = host
            self._by_pid[(host, pid)] = node
            self._place(node)
            self.process_shape += 1
        self.current = node
        self._by_id = node.by_id
        return node

    def place(self, node: ProcessNode, ppid: int | None) -> None:
        """``node``'s hello named its parent: put it under that process, if it is watched."""
        if node.ppid == ppid:
            return
        node.ppid = ppid
        self._place(node)
        self.process_shape += 1

    def _place(self, node: ProcessNode) -> None:
        ppid = node.ppid
        if ppid is not None and ppid != node.pid:
            parent = self._by_pid.get((node.host, ppid))  # a parent runs on the same machine
            if parent is None:
                self._orphans.setdefault((node.host, ppid), []).append(node)
            elif parent is not node.parent:
                self._link(node, parent)
        for child in self._orphans.pop((node.host, node.pid), []) if node.pid is not None else []:  # came first
            if child.parent is None and child.ppid == node.pid:
                self._link(child, node)

    def _link(self, node: ProcessNode, parent: ProcessNode) -> None:
        """Put ``node`` under ``parent``, unless that would make a loop or ``parent`` sits deeper
        than :data:`MAX_PROCESS_DEPTH` (then it stays where it is)."""
        up: ProcessNode | None = parent
        for _ in range(MAX_PROCESS_DEPTH):
            if up is None:
                break
            if up is node:
                return
            up = up.parent
        else:
            return
        if node.parent is not None:
            node.parent.children.remove(node)
        node.parent = parent
        parent.children.append(node)

    def process_status(self, process: ProcessNode) -> Status:
        """What became of a process, in a session of several: failed (its stream failed, or a
        compile of it did), running (its stream goes on), or done."""
        if process.stream_failed or any(comp.status is FAILED for comp in process.compiles):
            return FAILED
        if process.stream_end is None and process.exit_reason is None:
            return RUNNING
        return DONE

    def process_label(self, process: ProcessNode) -> str:
        """A process in the user's words: ``rank 3`` where processes go by rank, else ``pid 123``;
        after its machine where that is another one (``node3/rank 37``)."""
        if self.by_rank and process.rank is not None:
            return f"rank {process.rank}" if process.host is None else f"{process.host}/rank {process.rank}"
        return process.name

    def process_of(self, node: CompileNode) -> ProcessNode:
        """The process a compile ran in."""
        return node.process if node.process is not None else self.process

    def abandon_open(self, t: int, reason: str, process: ProcessNode | None = None) -> None:
        """The stream ended (target exited, socket closed, recording over) at agent time ``t``:
        whatever is still open will never be reported finished, so it is marked incomplete
        (only what ``process`` ran, when given: the stream of that process ended)."""
        note = f"never finished: {reason}"
        for node in self.running_passes():
            if process is None or self.process_of(node.compile) is process:
                self._abandon(node, t, note)
        for comp in list(self.open_compiles):
            if process is not None and self.process_of(comp) is not process:
                continue
            del self.open_compiles[comp]
            if comp.status is RUNNING:
                comp.status = INCOMPLETE
                comp.end_ns = t
                comp.duration_ns = t - comp.begin_ns
                self._close_children(comp, t, INCOMPLETE)
                comp.version += 1
        self.version += 1

    # Derived state

    def compile(self, compile_id: int, process: ProcessNode | None = None) -> CompileNode | None:
        """Compile ``compile_id`` of ``process`` (by default the first process)."""
        return (process or self.process).by_id.get(compile_id)

    def is_stuck(self, node: PassNode, now_ns: int) -> bool:
        """A running pass that has run far longer than is usual for its name, and longer than
        the user's threshold in any case (with no history, the threshold alone decides)."""
        if node.status is not RUNNING:
            return False
        elapsed = now_ns - node.start_ns
        if elapsed <= self.stuck_after_ns:
            return False
        usual = self.typical.median(node.name)
        return usual is None or elapsed > self.stuck_factor * usual

    def is_process_stuck(self, node: CompilerProcessNode, now_ns: int) -> bool:
        """A compiler process that runs stuck as a pass would (:meth:`is_stuck`): longer than the
        user's threshold, and far longer than the ended processes of its name usually ran."""
        if node.status is not RUNNING:
            return False
        elapsed = now_ns - node.start_ns
        if elapsed <= self.stuck_after_ns:
            return False
        usual = self.process_typical.median(node.name)
        return usual is None or elapsed > self.stuck_factor * usual

    def running_processes(self) -> list[CompilerProcessNode]:
        """The compiler processes of running compiles that run now, in the order they were seen."""
        found = [
            node
            for comp in self.open_compiles
            for step in comp.codegen_steps
            for node in step.by_pid.values()
            if node.status is RUNNING
        ]
        return sorted(found, key=lambda node: node.order)

    def stuck_processes(self, now_ns: int) -> list[CompilerProcessNode]:
        return [node for node in self.running_processes() if self.is_process_stuck(node, now_ns)]

    def running_passes(self) -> list[PassNode]:
        """Passes started and not yet ended, in tree order."""
        return [node for comp in self.open_compiles for node in _running_in(comp)]

    def stuck_passes(self, now_ns: int) -> list[PassNode]:
        return [node for node in self.running_passes() if self.is_stuck(node, now_ns)]

    # Handlers: compiles and contexts

    def _next_order(self) -> int:
        self._order += 1
        return self._order

    def _new_compile(self, compile_id: int, t: int) -> CompileNode:
        comp = CompileNode(compile_id, t, len(self.compiles), self._next_order())
        comp.process = self.current
        self.current.compiles.append(comp)
        self.compiles.append(comp)
        self.open_compiles[comp] = None
        self._by_id[compile_id] = comp
        self.shape += 1
        return comp

    def _unannounced_context(self, comp: CompileNode, context_id: int, t: int) -> ContextNode:
        if comp.forgotten:  # a pass of a compile let go: it goes in a context of its own, then with it
            self.late_events += 1
            return ContextNode(comp, context_id, t, self._next_order())
        ctx = ContextNode(comp, context_id, t, self._next_order(), PackedPasses(self.packing))
        self.packing.contexts[ctx] = None
        comp.contexts[context_id] = ctx
        comp.context_order.append(ctx)
        comp.shape += 1
        return ctx

    def _compile_begin(self, msg: dict[str, Any]) -> None:
        compile_id = _int(msg["compile"])
        label = msg["label"]
        if type(label) is not str:
            raise _MALFORMED
        kernel = _opt_str(msg.get("kernel"))
        target = _opt_str(msg.get("target"))
        t = _int(msg["t_ns"])
        comp = self._by_id.get(compile_id) or self._new_compile(compile_id, t)
        comp.begin_ns = min(comp.begin_ns, t)
        comp.label = label
        comp.kernel = kernel
        comp.target = target
        comp.origin = origin_of(msg)
        self.recompiles.add(comp)
        comp.version += 1
        self._seen(t)

    def _compile_end(self, msg: dict[str, Any]) -> None:
        compile_id = _int(msg["compile"])
        t = _int(msg["t_ns"])
        duration = _int(msg["duration_ns"])
        ok = msg["ok"]
        if type(ok) is not bool:
            raise _MALFORMED
        error = _opt_str(msg.get("error"))
        error_type = _opt_str(msg.get("error_type"))
        traceback = _opt_str(msg.get("traceback"))
        stage = _opt_str(msg.get("stage"))
        comp = self._by_id.get(compile_id) or self._new_compile(compile_id, t - duration)
        if comp.end_ns is not None:
            return
        comp.end_ns = t
        comp.duration_ns = duration
        comp.error, comp.error_type, comp.traceback, comp.stage = error, error_type, traceback, stage
        if not comp.label:
            label = msg.get("label")
            comp.label = label if type(label) is str else ""
            comp.kernel = comp.kernel or kernel_from_label(comp.label)
        for node in _running_in(comp):
            self._abandon(node, t, error)
        self.open_compiles.pop(comp, None)
        if ok:
            comp.status = DONE
            self._close_children(comp, t, DONE)
        else:
            comp.status = FAILED
            self.failed_compiles += 1
            failed_step = _last_failed_or_open(comp.codegen_steps)
            self._close_children(comp, t, INCOMPLETE)
            if stage == "codegen" and failed_step is not None:
                failed_step.status = FAILED
                failed_step.error = failed_step.error or error
            else:
                failing = _failing_pass(comp)
                comp.failing = failing
                if failing is not None:
                    if failing.status is not MISMATCH:
                        failing.status = FAILED
                    failing.error = failing.error or error
        comp.version += 1
        self._seen(t)

    def _close_children(self, comp: CompileNode, t: int, status: Any) -> None:
        for ctx in comp.context_order:
            if ctx.status is RUNNING:
                ctx.status = status
                ctx.end_ns = t
        for step in comp.codegen_steps:
            if step.status is RUNNING:
                step.status = status
                step.end_ns = t
                step.duration_ns = max(0, t - step.begin_ns)
            _close_processes(step, t, DONE if status is DONE else INCOMPLETE)

    def _context_enter(self, msg: dict[str, Any]) -> None:
        compile_id = _int(msg["compile"])
        context_id = _int(msg["context"])
        t = _int(msg["t_ns"])
        comp = self._by_id.get(compile_id) or self._new_compile(compile_id, t)
        ctx = comp.contexts.get(context_id)
        if ctx is None:
            self._unannounced_context(comp, context_id, t)
        else:
            ctx.begin_ns = min(ctx.begin_ns, t)
        comp.version += 1
        self._seen(t)

    def _context_exit(self, msg: dict[str, Any]) -> None:
        compile_id = _int(msg["compile"])
        context_id = _int(msg["context"])
        t = _int(msg["t_ns"])
        comp = self._by_id.get(compile_id) or self._new_compile(compile_id, t)
        ctx = comp.contexts.get(context_id) or self._unannounced_context(comp, context_id, t)
        if ctx.end_ns is None:
            ctx.end_ns = t
            failed = any(node.context is ctx for node in comp.incomplete)
            ctx.status = FAILED if failed else DONE
        comp.version += 1
        self._seen(t)

    def _codegen_begin(self, msg: dict[str, Any]) -> None:
        compile_id = _int(msg["compile"])
        t = _int(msg["t_ns"])
        name = _opt_str(msg.get("name"))
        comp = self._by_id.get(compile_id) or self._new_compile(compile_id, t)
        if comp.forgotten:
            self.late_events += 1
            return
        steps = comp.codegen_steps
        if not any(step.begin_ns == t and step.name == name for step in steps):  # else a catch-up overlap
            steps.append(CodegenNode(comp, name, t, self._next_order()))
            comp.shape += 1
        comp.version += 1
        self._seen(t)

    def _codegen_end(self, msg: dict[str, Any]) -> None:
        """Ends the most recent open codegen step (of the same name, when the end names one)."""
        compile_id = _int(msg["compile"])
        t = _int(msg["t_ns"])
        duration = _int(msg["duration_ns"])
        ok = msg["ok"]
        if type(ok) is not bool:
            raise _MALFORMED
        error = _opt_str(msg.get("error"))
        name = _opt_str(msg.get("name"))
        comp = self._by_id.get(compile_id) or self._new_compile(compile_id, t - duration)
        if comp.forgotten:
            self.late_events += 1
            return
        steps = comp.codegen_steps
        if any(step.end_ns == t and step.name == name for step in steps):
            return  # a catch-up backlog overlapping what was already seen
        step = _open_step(steps, name)
        if step is None:  # its begin was never seen
            step = CodegenNode(comp, name, t - duration, self._next_order())
            steps.append(step)
            comp.shape += 1
        step.name = step.name or name
        step.end_ns = t
        step.duration_ns = duration
        step.status = DONE if ok else FAILED
        step.error = error
        _close_processes(step, t, DONE if ok else INCOMPLETE)
        comp.version += 1
        self._seen(t)

    def _compile_process(self, msg: dict[str, Any]) -> None:
        """A process a codegen step runs, first seen, still running, or ended: a row below the
        step (below the process that started it, when that is one of the step's too)."""
        compile_id = _int(msg["compile"])
        pid = _int(msg["pid"])
        ppid = _int(msg["ppid"])
        running = _int(msg["running_ns"])
        cpu = _int(msg["cpu_ns"])
        t = _int(msg["t_ns"])
        name = msg["name"]
        argv = msg["argv"]
        state = msg["state"]
        exit = msg.get("exit")
        step_name = _opt_str(msg.get("step"))
        if (
            type(name) is not str
            or type(argv) is not list
            or not all(type(arg) is str for arg in argv)
            or state not in m.COMPILER_STATES
            or (exit is not None and type(exit) is not int)
            or running < 0
            or cpu < 0
        ):
            raise _MALFORMED
        comp = self._by_id.get(compile_id) or self._new_compile(compile_id, t - running)
        if comp.forgotten:
            return  # written already (a streamed export), which draws no processes
        step = _step_named(comp.codegen_steps, step_name)
        if step is None:  # its begin was never seen
            step = CodegenNode(comp, step_name, t - running, self._next_order())
            comp.codegen_steps.append(step)
            comp.shape += 1
        node = step.by_pid.get(pid)
        if node is not None and node.status is not RUNNING:
            if state != m.COMPILER_RUNNING or node.end_ns == t:
                return  # told again (a catch-up overlapping what was already seen)
            node = None  # the pid was used again
        if node is None:
            parent = step.by_pid.get(ppid)
            node = CompilerProcessNode(step, pid, ppid, t - running, parent, self._next_order())
            step.by_pid[pid] = node
            (parent.children if parent is not None else step.process_roots).append(node)
            comp.shape += 1
        node.name = name
        node.argv = argv
        node.cpu_ns = max(node.cpu_ns, cpu)
        node.seen_ns = t
        if state != m.COMPILER_RUNNING:
            node.end_ns = t
            node.exit = exit
            if state == m.COMPILER_LEFT:
                node.status = INCOMPLETE
                node.note = "still running when its codegen step ended; no longer watched"
            else:
                node.status = FAILED if exit else DONE
                self.process_typical.record(name, max(0, t - node.start_ns))
        comp.version += 1
        self._seen(t)

    # Handlers: passes (the hot path), on pass rows

    def take_packed(self, items: Sequence[Any], at: int) -> int:
        """Apply the pass rows of ``items`` from ``at`` on that the packed form takes (a start
        or end of a pass in a packed context, in order; see :mod:`~iket_tui.model.packed_passes`),
        up to the first item that is anything else; where that one is.

        The hot path of a replay: one loop over a run of rows, with the row's compile and
        context kept from the row before, rather than a call per row. It changes nothing for an
        item it stops at, which its own handler then takes (checked, and applied to nodes)."""
        count = len(items)
        by_id = self._by_id
        packing = self.packing
        numbers = packing.numbers
        strings = packing.strings
        samples_of = self._samples
        order = self._order
        started = 0
        start_kind, end_kind, row_len, fields, none, low, limit, pack = (
            m.PASS_START,
            m.PASS_END,
            m.PASS_ROW_LEN,
            FIELDS,
            NONE,
            LOW,
            LIMIT,
            PACK,
        )
        compile_id = context_id = None
        ctx = _NO_CONTEXT  # replaced at the first row, whose ids are never None
        comp, packed = ctx.compile, _NO_PACKED
        running, data = packed.open, packed.data
        try:
            while at < count:
                row = items[at]
                if type(row) is not list or len(row) != row_len:
                    break
                kind, row_compile, row_context, name, seq, depth, parent, phase, t, extra = row
                if type(row_compile) is not int or type(row_context) is not int or type(seq) is not int:
                    break
                if row_compile != compile_id or row_context != context_id:
                    found = by_id.get(row_compile)
                    found_ctx = None if found is None else found.contexts.get(row_context)
                    if found_ctx is None or found_ctx.packed is None:
                        break
                    comp, ctx, packed = found_ctx.compile, found_ctx, found_ctx.packed
                    running, data = packed.open, packed.data
                    compile_id, context_id = row_compile, row_context
                if kind == start_kind:
                    if (
                        type(name) is not str
                        or type(depth) is not int
                        or type(t) is not int
                        or (phase is not None and type(phase) is not str)
                        or (packed.last_seq is not None and seq <= packed.last_seq)  # told again, maybe
                    ):
                        break
                    if parent is None:
                        up_at = none
                    elif type(parent) is int and running and data[running[-1] * fields] == parent:
                        up_at = running[-1]
                    else:
                        break  # not the innermost open pass: the nodes decide
                    name_number = numbers.get(name) or packing.number(name)  # 0 asks again, harmlessly
                    phase_number = none if phase is None else numbers.get(phase) or packing.number(phase)
                    try:
                        packed_row = pack(seq, depth, up_at, name_number, phase_number, t, none, none, order + 1, 0)
                    except struct.error:  # past 64 bits: the nodes take it
                        break
                    order += 1
                    started += 1
                    running.append(len(data) // fields)
                    data.frombytes(packed_row)
                    packed.last_seq = seq
                    comp.shape += 1
                elif kind == end_kind:
                    if type(t) is not int or type(extra) is not int or not running or not (low < t < limit):
                        break
                    if not low < extra < limit:
                        break
                    end_at = running[-1] * fields
                    if data[end_at] != seq:
                        break  # not the innermost open pass: the nodes decide
                    up_at = data[end_at + PARENT]
                    if up_at == none:
                        ctx.root_ns += extra
                    else:
                        child_ns = data[up_at * fields + CHILD_NS] + extra
                        if not low < child_ns < limit:
                            break
                        data[up_at * fields + CHILD_NS] = child_ns
                    running.pop()
                    data[end_at + END] = t
                    data[end_at + DURATION] = extra
                    name = strings[data[end_at + NAME]]
                    samples = samples_of.get(name)
                    if samples is None:
                        self.typical.record(name, extra)
                    else:
                        samples.append(extra)
                    comp.version += 1
                else:
                    break
                at += 1
        finally:
            self._order = order
            self.pass_count += started
        return at

    def _pass_map(self, msg: dict[str, Any]) -> None:
        """A pass event sent as a map: handled as the row it stands for."""
        get = msg.get
        kind = msg["type"]
        extra = m.PASS_ROW_EXTRA[kind]
        row = [
            kind,
            get("compile", _ABSENT),
            get("context", _ABSENT),
            get("name", _ABSENT),
            get("seq", _ABSENT),
            get("depth", _ABSENT),
            get("parent", _ABSENT),
            get("phase", _ABSENT),
            get("t_ns", _ABSENT),
            None if extra is None else get(extra, _ABSENT if kind == m.PASS_END else None),
        ]
        self.row_handlers[kind](row)
        changed = get("changed")
        if kind == m.PASS_END and type(changed) is bool:
            comp = self._by_id.get(row[1])
            ctx = None if comp is None else comp.contexts.get(row[2])
            node = None if ctx is None else ctx.passes.get(row[4])
            if node is not None:
                node.changed = changed

    def _pass_start(self, row: m.PassRow) -> None:
        _, compile_id, context_id, name, seq, depth, parent, phase, t, _ = row
        if (
            type(compile_id) is not int
            or type(context_id) is not int
            or type(name) is not str
            or type(seq) is not int
            or type(depth) is not int
            or type(t) is not int
            or (parent is not None and type(parent) is not int)
            or (phase is not None and type(phase) is not str)
        ):
            raise _MALFORMED
        comp = self._by_id.get(compile_id) or self._new_compile(compile_id, t)
        ctx = comp.contexts.get(context_id) or self._unannounced_context(comp, context_id, t)
        if ctx.packed is not None:
            if self.take_packed((row,), 0):
                return
            ctx.unpack()
        passes = ctx.passes
        if seq in passes:
            return  # a catch-up backlog overlapping what was already seen
        up = None if parent is None else passes.get(parent)
        self._order += 1
        node = PassNode(name, seq, depth, phase, t, up, ctx, self._order)
        passes[seq] = node
        if up is None:
            ctx.roots.append(node)
        elif up.children is NO_CHILDREN:
            up.children = [node]
        else:
            up.children.append(node)
        self._passes.append(node)
        self.pass_count += 1
        comp.shape += 1

    def _pass_end(self, row: m.PassRow) -> None:
        _, compile_id, context_id, _, seq, _, _, _, t, duration = row
        if (
            type(compile_id) is not int
            or type(context_id) is not int
            or type(seq) is not int
            or type(t) is not int
            or type(duration) is not int
        ):
            raise _MALFORMED
        comp = self._by_id.get(compile_id)
        ctx = None if comp is None else comp.contexts.get(context_id)
        if ctx is not None and ctx.packed is not None and self.take_packed((row,), 0):
            return
        node = None if ctx is None else ctx.passes.get(seq)
        if node is None:
            node = self._unseen_start(row, t - duration)
        elif node.end_ns is not None:
            return
        node.end_ns = t
        node.duration_ns = duration
        if node.status is RUNNING:
            node.status = DONE
        up = node.parent
        if up is None:
            node.context.root_ns += duration
        else:
            up.child_ns += duration
        samples = self._samples.get(node.name)
        if samples is None:
            self.typical.record(node.name, duration)
        else:
            samples.append(duration)
        node.compile.version += 1

    def _pass_incomplete(self, row: m.PassRow) -> None:
        _, compile_id, context_id, _, seq, _, _, _, t, error = row
        if (
            type(compile_id) is not int
            or type(context_id) is not int
            or type(seq) is not int
            or type(t) is not int
            or (error is not None and type(error) is not str)
        ):
            raise _MALFORMED
        comp = self._by_id.get(compile_id)
        ctx = None if comp is None else comp.contexts.get(context_id)
        node = None if ctx is None else ctx.passes.get(seq)
        if node is None:
            node = self._unseen_start(row, t)
        elif node.end_ns is not None:
            return
        self._abandon(node, t, error)
        node.compile.version += 1
        self._seen(t)

    def _unseen_start(self, row: m.PassRow, start: int) -> PassNode:
        """A pass whose start this client never saw (lost to a full queue or an old backlog),
        from the end or incomplete row whose ids were already checked."""
        _, compile_id, context_id, name, seq, depth, parent, phase, _, _ = row
        if (
            type(name) is not str
            or type(depth) is not int
            or (parent is not None and type(parent) is not int)
            or (phase is not None and type(phase) is not str)
        ):
            raise _MALFORMED
        comp = self._by_id.get(compile_id) or self._new_compile(compile_id, start)
        ctx = comp.contexts.get(context_id) or self._unannounced_context(comp, context_id, start)
        up = None if parent is None else ctx.passes.get(parent)
        node = PassNode(name, seq, depth, phase, start, up, ctx, self._next_order())
        ctx.passes[seq] = node
        if up is None:
            ctx.roots.append(node)
        elif up.children is NO_CHILDREN:
            up.children = [node]
        else:
            up.children.append(node)
        self._passes.append(node)
        self.pass_count += 1
        comp.shape += 1
        return node

    def _abandon(self, node: PassNode, t: int, error: str | None) -> None:
        """Mark a pass that will never finish as incomplete, ending at ``t``."""
        duration = max(0, t - node.start_ns)
        node.end_ns = t
        node.duration_ns = duration
        if node.status is RUNNING:
            node.status = INCOMPLETE
        node.error = node.error or error
        node.compile.incomplete.append(node)
        if node.parent is None:
            node.context.root_ns += duration
        else:
            node.parent.child_ns += duration
        node.compile.version += 1

    def _callback_mismatch(self, msg: dict[str, Any]) -> None:
        compile_id = _int(msg["compile"])
        context_id = _int(msg["context"])
        t = _int(msg["t_ns"])
        expected = _opt_str(msg.get("expected"))
        got = msg["got"]
        if type(got) is not str:
            raise _MALFORMED
        comp = self._by_id.get(compile_id) or self._new_compile(compile_id, t)
        ctx = comp.contexts.get(context_id) or self._unannounced_context(comp, context_id, t)
        comp.mismatches += 1
        innermost = next((node for node in reversed(ctx.passes.values()) if node.status is RUNNING), None)
        if innermost is not None:
            innermost.status = MISMATCH
            innermost.error = f"end callback out of order: {got!r} ended while {expected!r} was innermost"
        comp.version += 1
        self._seen(t)

    def _seen(self, t: int) -> None:
        if t > self.last_t_ns:
            self.last_t_ns = t

    def compile_failure(self, msg: dict[str, Any]) -> None:
        """What the agent captured of a failed pass or codegen step: kept on its compile for the
        detail pane and repro. A failed pass names its ``seq``; a codegen failure has none."""
        comp = self._by_id.get(_int(msg["compile"]))
        if msg.get("seq") is not None or _opt_str(msg.get("stage")) != "codegen":
            _int(msg["seq"])
        if comp is not None:
            comp.failure = msg
            comp.version += 1


def _failing_pass(comp: CompileNode) -> PassNode | None:
    """The pass a compile that failed in a pass failed in, among the passes it left incomplete.

    The agent's ``compile_failure`` (sent just before the ``compile_end``) names it by ``seq``:
    it is that pass when this client has it, and none when it does not (a ``--passes`` or
    ``--depth`` filter left it out, or its events were lost), so that the kept passes around it
    stay incomplete instead of taking the blame (:func:`left_out_failure` then names it). Without
    a ``compile_failure`` (an older agent, or one lost), it is the innermost incomplete pass."""
    failed = _failed_pass_named(comp)
    if failed is None:
        if not comp.incomplete:
            return None
        return max(comp.incomplete, key=lambda node: (node.depth, node.order))
    name, seq = failed
    named = [node for node in comp.incomplete if node.seq == seq]
    same_name = [node for node in named if node.name == name]  # of two contexts, the one of that name
    return max(same_name or named, key=lambda node: node.order, default=None)


def _failed_pass_named(comp: CompileNode) -> tuple[str, int] | None:
    """The name and ``seq`` of the pass the compile's ``compile_failure`` says failed, if it
    names one (a codegen failure names none)."""
    failure = comp.failure
    if failure is None or failure.get("stage") == "codegen":
        return None
    name, seq = failure.get("name"), failure.get("seq")
    if type(seq) is not int:
        return None
    return (name if type(name) is str else "an unnamed pass"), seq


def left_out_failure(comp: CompileNode) -> tuple[str, int] | None:
    """The name and ``seq`` of the pass a failed compile failed in, when that pass is not in the
    tree (left out by the client's filter, or its events lost): the agent's ``compile_failure``
    still names it (docs/protocol.md, "Filters")."""
    if comp.status is not FAILED or comp.failing is not None:
        return None
    failed = _failed_pass_named(comp)
    if failed is None:
        return None
    if any(failed[1] in ctx.passes and ctx.passes[failed[1]].name == failed[0] for ctx in comp.context_order):
        return None  # in the tree, yet not what the compile failed in: nothing left out to name
    return failed


def _running_in(comp: CompileNode) -> list[PassNode]:
    return [
        node
        for ctx in comp.context_order
        if ctx.packed is None or ctx.packed.open  # packed with none open: none running, none unpacked
        for node in ctx.passes.values()
        if node.status is RUNNING
    ]


_NO_CONTEXT: Final = ContextNode(CompileNode(0, 0, 0, 0), 0, 0, 0)
_NO_PACKED: Final = PackedPasses(Packing())
"""What :meth:`PassTree.take_packed` holds before its first row: never written to."""


def _order_of(node: PassNode) -> int:
    return node.order


def _open_step(steps: list[CodegenNode], name: str | None) -> CodegenNode | None:
    """The codegen step an end closes: the most recent open one of that name, or (from an
    agent that did not name the begin, or did not name the end) the most recent open one."""
    open_steps = [step for step in reversed(steps) if step.end_ns is None]
    if name is None:
        return open_steps[0] if open_steps else None
    same = next((step for step in open_steps if step.name == name), None)
    return same or next((step for step in open_steps if step.name is None), None)


def _step_named(steps: list[CodegenNode], name: str | None) -> CodegenNode | None:
    """The codegen step a process belongs to: the most recent one of its name, open ones first."""
    named = [step for step in reversed(steps) if step.name == name or name is None]
    return next((step for step in named if step.end_ns is None), named[0] if named else None)


def _close_processes(step: CodegenNode, t: int, status: Status) -> None:
    """The step (or its compile) ended: a process of it still running, whose end the agent did
    not tell (its event lost), ends there too."""
    for node in step.by_pid.values():
        if node.status is RUNNING:
            node.status = status
            node.end_ns = t
            if status is not DONE:
                node.note = "its end was not seen"


def _last_failed_or_open(steps: list[CodegenNode]) -> CodegenNode | None:
    """The codegen step a compile that failed in codegen failed in."""
    return next((step for step in reversed(steps) if step.status is FAILED or step.end_ns is None), None)


def kernel_from_label(label: str) -> str | None:
    """The ``kernel=NAME`` item of a TileLang pass-context label, if it has one."""
    for item in label.split(","):
        key, _, value = item.strip().partition("=")
        if key == "kernel" and value:
            return value
    return None
