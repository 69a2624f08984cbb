"""The nodes of the pass tree: the watched process, its compiles, their pass contexts,
codegen steps and passes, and the processes a codegen step runs.

Plain slotted classes rather than dataclasses: a long replay creates half a million pass
nodes and their construction cost is most of what applying an event costs.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Any

from iket_tui.model.counters import StreamCounters

if TYPE_CHECKING:
    from iket_tui.model.compile_names import CompileOrigin
    from iket_tui.model.packed_passes import PackedPasses
    from iket_tui.model.pass_timing import CompileTimes


class Status(StrEnum):
    """What the monitor knows about a node. ``stuck`` is not a status: it depends on the
    clock and is derived by :meth:`PassTree.is_stuck`."""

    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    INCOMPLETE = "incomplete"  # started, never finished (an exception, or the stream ended)
    MISMATCH = "mismatch"  # its end callback arrived out of order


RUNNING = Status.RUNNING
DONE = Status.DONE
FAILED = Status.FAILED
INCOMPLETE = Status.INCOMPLETE
MISMATCH = Status.MISMATCH


class ProcessNode:
    """A watched process, as its agent introduced itself in its hello.

    A session of several processes has one per process: each holds its own compiles (agents
    number their compiles from 1, each its own way), its own counters of what its agent
    reported, and its place under its parent process (``ppid`` in its hello).
    """

    __slots__ = (
        "argv",
        "by_id",
        "capabilities",
        "children",
        "compiles",
        "counters",
        "exit_reason",
        "host",
        "parent",
        "pid",
        "ppid",
        "rank",
        "seen_hello",
        "start_time",
        "stream_end",
        "stream_failed",
        "version",
    )

    def __init__(self) -> None:
        self.pid: int | None = None
        self.host: str | None = None
        """The machine it runs on, where that is another one (``attach node1: node2:``)."""
        self.argv: list[str] = []
        self.start_time: int | None = None
        self.version: str | None = None
        self.capabilities: list[str] = []
        self.seen_hello = False
        self.exit_reason: str | None = None  # from the agent's bye
        self.ppid: int | None = None
        self.rank: int | None = None  # from the hello, under a distributed launcher
        self.parent: ProcessNode | None = None  # the process of ``ppid``, when it is watched too
        self.children: list[ProcessNode] = []
        self.compiles: list[CompileNode] = []  # this process's, in arrival order
        self.by_id: dict[int, CompileNode] = {}  # this process's compiles by the agent's id
        self.counters = StreamCounters()
        """What its agent reported (in a session of one, the session's own counters)."""
        self.stream_end: str | None = None  # why its stream ended, once it has
        self.stream_failed = False  # its stream ended in an error

    @property
    def command(self) -> str:
        return " ".join(self.argv)

    @property
    def name(self) -> str:
        """The process in the user's words: its pid, after its machine where that is another one
        (``node3/pid 123``)."""
        if self.pid is None:
            return "a process"
        return f"pid {self.pid}" if self.host is None else f"{self.host}/pid {self.pid}"


class CompileNode:
    """One TileLang compile (one compile session of the agent)."""

    __slots__ = (
        "begin_ns",
        "changes",
        "codegen_steps",
        "context_order",
        "contexts",
        "duration_ns",
        "end_ns",
        "error",
        "error_type",
        "failing",
        "failure",
        "forgotten",
        "id",
        "incomplete",
        "kernel",
        "label",
        "mismatches",
        "order",
        "origin",
        "position",
        "process",
        "series",
        "shape",
        "stage",
        "status",
        "summary",
        "target",
        "traceback",
        "version",
    )

    def __init__(self, compile_id: int, begin_ns: int, position: int, order: int) -> None:
        self.id = compile_id
        self.label = ""
        self.kernel: str | None = None
        self.target: str | None = None
        self.status = RUNNING
        self.begin_ns = begin_ns
        self.end_ns: int | None = None
        self.duration_ns: int | None = None
        self.error: str | None = None
        self.error_type: str | None = None
        self.traceback: str | None = None
        self.stage: str | None = None
        self.failure: dict[str, Any] | None = None  # the agent's capture of the failure (compile_failure)
        self.contexts: dict[int, ContextNode] = {}
        self.context_order: list[ContextNode] = []
        self.codegen_steps: list[CodegenNode] = []  # in the order they began
        self.incomplete: list[PassNode] = []
        self.failing: PassNode | None = None  # the pass the compile failed in
        self.mismatches = 0
        self.position = position  # index in PassTree.compiles
        self.process: ProcessNode | None = None  # whose compile it is
        self.order = order  # tree order among every node
        self.version = 0  # bumped on every change to this compile or its descendants
        self.shape = 0  # bumped when a descendant is added (the rows below it change)
        self.forgotten = False
        """Its passes and codegen steps were let go once it was written (a streamed export):
        any that arrive later are counted in :attr:`PassTree.late_events`, not kept."""
        self.summary: CompileTimes | None = None
        """Where its time went, kept when its passes were let go to stay within the session's
        bound on passes (:mod:`iket_tui.model.pass_bound`): its row stays, its passes do not."""
        self.origin: CompileOrigin | None = None
        """Where the program asked for it and what it was given, when its agent said."""
        self.series: list[CompileNode] | None = None
        """Every compile of its kernel in its process so far, itself included, in order
        (:mod:`iket_tui.model.recompiles`); None when its agent did not tell its inputs."""
        self.changes: tuple[tuple[str, str], ...] = ()
        """What differed from the compile of its kernel before it, as ``(what, how)``."""

    @property
    def title(self) -> str:
        """What the user calls this compile: its kernel, else its label, else its number."""
        return self.kernel or self.label or f"compile {self.id}"

    @property
    def shown_title(self) -> str:
        """The compile's name on its row: the ``@tilelang.jit`` call that asked for it
        (``matmul(1024, 1024)``) when one did, else :attr:`title`."""
        call = self.origin.call if self.origin is not None else None
        return call or self.title

    @property
    def failed_codegen(self) -> CodegenNode | None:
        """The codegen step the compile failed in, if it failed in one."""
        return next((step for step in reversed(self.codegen_steps) if step.status is FAILED), None)


class ContextNode:
    """One TVM PassContext entered during a compile; its passes hang below it.

    Its passes may be kept packed (:mod:`~iket_tui.model.packed_passes`) until something reads
    :attr:`passes` or :attr:`roots`, which makes them into nodes then."""

    __slots__ = ("_passes", "_roots", "begin_ns", "compile", "end_ns", "id", "order", "packed", "root_ns", "status")

    def __init__(
        self, compile: CompileNode, context_id: int, begin_ns: int, order: int, packed: PackedPasses | None = None
    ) -> None:
        self.compile = compile
        self.id = context_id
        self.begin_ns = begin_ns
        self.end_ns: int | None = None
        self.status = RUNNING
        self._roots: list[PassNode] = []
        self._passes: dict[int, PassNode] = {}  # by seq
        self.packed = packed
        """Its passes while they are kept packed; None once they are nodes."""
        self.root_ns = 0  # inclusive time of the finished top-level passes
        self.order = order

    @property
    def passes(self) -> dict[int, PassNode]:
        """Its passes by ``seq``."""
        if self.packed is not None:
            self.unpack()
        return self._passes

    @passes.setter
    def passes(self, passes: dict[int, PassNode]) -> None:
        self.unpack()
        self._passes = passes

    @property
    def roots(self) -> list[PassNode]:
        """Its top-level passes, in the order they started."""
        if self.packed is not None:
            self.unpack()
        return self._roots

    @roots.setter
    def roots(self, roots: list[PassNode]) -> None:
        self.unpack()
        self._roots = roots

    def unpack(self) -> None:
        """Make its packed passes into nodes, from now on kept as nodes."""
        packed = self.packed
        if packed is not None:
            self.packed = None
            self._passes, self._roots = packed.unpack(self)


BUILD_PREFIX = "target.build."
"""How TVM names its backend build functions; the rest of the name says which backend."""


class CodegenNode:
    """One code generation step after the passes. A compile may run several: TileLang's
    ``tilelang.compile`` builds the device code (``target.build.tilelang_cuda``, which runs
    nvcc) and then the host code (``target.build.tilelang_c_host``). ``name`` is None in
    streams from agents that did not name their steps."""

    __slots__ = (
        "begin_ns",
        "by_pid",
        "compile",
        "duration_ns",
        "end_ns",
        "error",
        "name",
        "order",
        "process_roots",
        "status",
    )

    def __init__(self, compile: CompileNode, name: str | None, begin_ns: int, order: int) -> None:
        self.compile = compile
        self.name = name
        self.begin_ns = begin_ns
        self.end_ns: int | None = None
        self.duration_ns: int | None = None
        self.status = RUNNING
        self.error: str | None = None
        self.order = order
        self.by_pid: dict[int, CompilerProcessNode] = {}
        """The processes it ran (nvcc, ptxas, ...), the latest of each pid."""
        self.process_roots: list[CompilerProcessNode] = []
        """Those it ran itself, in the order they were seen (the others are below them)."""

    @property
    def title(self) -> str:
        """``codegen tilelang_cuda`` for ``target.build.tilelang_cuda``; ``codegen`` when unnamed."""
        if not self.name:
            return "codegen"
        return f"codegen {self.name.removeprefix(BUILD_PREFIX)}"


class CompilerProcessNode:
    """A process a codegen step ran (nvcc, and below it cicc, ptxas, the host compiler), as the
    agent last saw it: its CPU time, and from its start how long it ran. ``status`` is running,
    done (it ended; failed when its exit status, if seen, was not 0) or incomplete (it still ran
    when its step or its compile ended, or the stream did)."""

    __slots__ = (
        "argv",
        "children",
        "compile",
        "cpu_ns",
        "end_ns",
        "exit",
        "name",
        "note",
        "order",
        "parent",
        "pid",
        "ppid",
        "seen_ns",
        "start_ns",
        "status",
        "step",
    )

    def __init__(
        self, step: CodegenNode, pid: int, ppid: int, start_ns: int, parent: CompilerProcessNode | None, order: int
    ) -> None:
        self.step = step
        self.compile = step.compile
        self.pid = pid
        self.ppid = ppid
        self.start_ns = start_ns
        self.parent = parent
        self.order = order
        self.name = ""
        self.argv: list[str] = []
        self.cpu_ns = 0
        self.seen_ns = start_ns  # when the agent last looked at it
        self.end_ns: int | None = None
        self.exit: int | None = None
        self.status = RUNNING
        self.note = ""  # why it is incomplete
        self.children: list[CompilerProcessNode] = []

    @property
    def command(self) -> str:
        return " ".join(self.argv) or self.name


NO_CHILDREN: list[PassNode] = []
"""Shared by every pass without children, never appended to: most passes have none, and a
list per pass doubles the objects a long replay allocates."""


class PassNode:
    """One run of one compiler pass. ``seq`` is its sequence number within its context;
    ``order`` is its place in tree order among all nodes (passes start in tree order)."""

    __slots__ = (
        "changed",
        "child_ns",
        "children",
        "compile",
        "context",
        "depth",
        "duration_ns",
        "end_ns",
        "error",
        "name",
        "order",
        "parent",
        "phase",
        "seq",
        "start_ns",
        "status",
    )

    def __init__(
        self,
        name: str,
        seq: int,
        depth: int,
        phase: str | None,
        start_ns: int,
        parent: PassNode | None,
        context: ContextNode,
        order: int,
    ) -> None:
        self.name = name
        self.seq = seq
        self.depth = depth
        self.phase = phase
        self.start_ns = start_ns
        self.parent = parent
        self.context = context
        self.compile = context.compile
        self.order = order
        self.end_ns: int | None = None
        self.duration_ns: int | None = None
        self.status = RUNNING
        self.changed: bool | None = None
        """Whether the pass changed the module it was given (``None``: not known, as when no
        client was attached while it ran); the tree dims a pass that changed nothing."""
        self.children: list[PassNode] = NO_CHILDREN  # replaced by a list at the first child
        self.child_ns = 0  # inclusive time of the finished children
        self.error: str | None = None


Node = ProcessNode | CompileNode | ContextNode | CodegenNode | PassNode | CompilerProcessNode
