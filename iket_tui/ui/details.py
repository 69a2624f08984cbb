"""What the detail pane says about a node: a title, labelled fields, the error and traceback."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iket_tui.model import timing
from iket_tui.model.behind import node_behind
from iket_tui.model.compile_names import origin_fields
from iket_tui.model.kernels import KernelTimeline
from iket_tui.model.nodes import (
    FAILED,
    INCOMPLETE,
    MISMATCH,
    RUNNING,
    CodegenNode,
    CompileNode,
    CompilerProcessNode,
    ContextNode,
    Node,
    PassNode,
    ProcessNode,
)
from iket_tui.model.pass_tree import PassTree, left_out_failure
from iket_tui.model.session import Session
from iket_tui.repro import CODEGEN, first_diagnostic
from iket_tui.ui import units
from iket_tui.ui.row_painter import SUMMARISED_PASSES

NOT_RECORDED = "no recording to make a reproducer from (watch with --record FILE, then iket-tui repro FILE -o DIR)"
"""What the pane says of a failure seen while nothing is recorded: a reproducer is made from a
recording that holds the failure, and only one made while it happens surely does."""


@dataclass
class Details:
    title: str
    fields: list[tuple[str, str]] = field(default_factory=list)
    error: str | None = None
    traceback: str | None = None

    @property
    def alarming(self) -> bool:
        """Whether the status is one the user must notice (failed, incomplete, mismatch, stuck)."""
        status = dict(self.fields).get("status", "")
        return status.startswith(("failed", "incomplete", "mismatch", "STUCK"))

    def text(self) -> str:
        """Plain text, as a user would copy it."""
        lines = [self.title, *(f"{key}: {value}" for key, value in self.fields)]
        if self.error:
            lines += ["", self.error]
        if self.traceback:
            lines += ["", self.traceback.rstrip()]
        return "\n".join(lines)


def describe(session: Session, node: Node, now_ns: int, recording: Path | None = None) -> Details:
    """What the detail pane says about ``node`` at agent time ``now_ns``. ``recording`` is the
    file that holds this session's stream (the one replayed, or that of ``--record``): the
    reproducer of a failure is made from it, and without one the pane says how to get one."""
    if isinstance(node, PassNode):
        return _pass(session.tree, node, now_ns, recording)
    if isinstance(node, CompileNode):
        return _compile(session.tree, node, now_ns, recording)
    if isinstance(node, ContextNode):
        return _context(node, now_ns)
    if isinstance(node, CodegenNode):
        return _codegen(node, now_ns, recording)
    if isinstance(node, CompilerProcessNode):
        return _compiler_process(session.tree, node, now_ns)
    return _process(session, node)


def _status(tree: PassTree, node: PassNode, now_ns: int) -> str:
    if tree.is_stuck(node, now_ns):
        usual = tree.typical.median(node.name)
        elapsed = units.duration(now_ns - node.start_ns)
        if usual is None:
            return f"STUCK: running {elapsed}, longer than {units.duration(tree.stuck_after_ns)}"
        return f"STUCK: running {elapsed}, usually {units.duration(usual)}"
    return node.status.value


def _pass(tree: PassTree, node: PassNode, now_ns: int, recording: Path | None) -> Details:
    comp = node.compile
    parent = f"{node.parent.name} (seq {node.parent.seq})" if node.parent is not None else "none (top level)"
    details = Details(f"pass {node.name}")
    details.fields.append(("status", _status(tree, node, now_ns)))
    behind = node_behind(tree, node, now_ns) if tree.several and node.status is RUNNING else None
    if behind is not None:
        details.fields.append(("behind", behind.text))
    details.fields += [
        ("phase", node.phase or "none"),
        ("seq", str(node.seq)),
        ("depth", str(node.depth)),
        ("parent", parent),
        ("compile", f"{comp.title} (compile {comp.id}, context {node.context.id})"),
        ("start", f"+{units.duration(node.start_ns - comp.begin_ns)} into the compile"),
        ("duration", units.duration(timing.inclusive_ns(node, now_ns)) + (" so far" if node.status is RUNNING else "")),
        ("self", units.duration(timing.self_ns(node, now_ns))),
    ]
    usual = tree.typical.median(node.name)
    if usual is not None:
        details.fields.append(("usual", f"{units.duration(usual)} (median of {tree.typical.count(node.name)} runs)"))
    if comp.failure is not None and node is comp.failing and comp.failure.get("seq") == node.seq:
        details.fields += _captured(comp.failure, comp.id, recording)
    if node.status is MISMATCH:
        details.error = node.error
    elif node.status in (FAILED, INCOMPLETE):
        if comp.error:
            details.error = comp.error
            details.traceback = comp.traceback
        else:
            details.error = node.error or "no error reported (yet)"
    return details


def _compile(tree: PassTree, comp: CompileNode, now_ns: int, recording: Path | None) -> Details:
    details = Details(f"compile {comp.title}")
    passes = sum(len(ctx.passes) for ctx in comp.context_order)
    contexts = f"{len(comp.context_order)} pass context{'s' if len(comp.context_order) != 1 else ''}"
    held = f"{passes} in {contexts}"
    if comp.summary is not None:
        held = f"{comp.summary.runs} in {contexts}, summarised: {SUMMARISED_PASSES}"
    details.fields += [
        ("status", comp.status.value),
        ("kernel", comp.kernel or "unknown"),
        ("label", comp.label or "none"),
        ("target", comp.target or "unknown"),
        *origin_fields(comp),
        ("duration", units.duration(timing.inclusive_ns(comp, now_ns))),
        ("self", f"{units.duration(timing.self_ns(comp, now_ns))} outside passes and codegen"),
        ("passes", held),
    ]
    steps = comp.codegen_steps
    if steps:
        spent = units.duration(timing.codegen_ns(comp, now_ns))
        details.fields.append(("codegen", f"{spent} in {len(steps)} step{'s' if len(steps) != 1 else ''}"))
    if comp.failing is not None:
        details.fields.append(("failed in", f"{comp.failing.name} (seq {comp.failing.seq})"))
    elif comp.failed_codegen is not None:
        details.fields.append(("failed in", comp.failed_codegen.title))
    elif (left_out := left_out_failure(comp)) is not None:
        name, seq = left_out
        details.fields.append(("failed in", f"{name} (seq {seq}, {_why_not_shown(tree.process_of(comp))})"))
    if comp.stage:
        details.fields.append(("stage", comp.stage))
    if comp.failure is not None:
        details.fields += _captured(comp.failure, comp.id, recording)
    if comp.mismatches:
        details.fields.append(("mismatches", str(comp.mismatches)))
    details.error = comp.error
    details.traceback = comp.traceback
    return details


def _why_not_shown(process: ProcessNode) -> str:
    """Why the tree lacks the pass a compile failed in: the client's filter left it out, or,
    where nothing was filtered and events were lost, it was lost with them."""
    counters = process.counters
    if counters.filtered_passes == 0 and (counters.dropped or counters.backlog_lost):
        return "not received: events were lost"
    return "left out by the filter"


def _context(ctx: ContextNode, now_ns: int) -> Details:
    details = Details(f"pass context {ctx.id}")
    details.fields += [
        ("status", ctx.status.value),
        ("compile", f"{ctx.compile.title} (compile {ctx.compile.id})"),
        ("passes", str(len(ctx.passes))),
        ("duration", units.duration(timing.inclusive_ns(ctx, now_ns))),
        ("outside passes", units.duration(timing.self_ns(ctx, now_ns))),
    ]
    return details


def _codegen(step: CodegenNode, now_ns: int, recording: Path | None) -> Details:
    details = Details(step.title)
    running = " so far" if step.status is RUNNING else ""
    details.fields += [
        ("status", step.status.value),
        ("step", step.name or "unnamed"),
        ("compile", f"{step.compile.title} (compile {step.compile.id})"),
        ("start", f"+{units.duration(step.begin_ns - step.compile.begin_ns)} into the compile"),
        ("duration", units.duration(timing.inclusive_ns(step, now_ns)) + running),
    ]
    failure = step.compile.failure
    if failure is not None and failure.get("stage") == CODEGEN and step is step.compile.failed_codegen:
        details.fields += _captured(failure, step.compile.id, recording)
    details.error = step.error
    if step.status is FAILED and step.compile.traceback:
        details.traceback = step.compile.traceback
    return details


def _compiler_process(tree: PassTree, node: CompilerProcessNode, now_ns: int) -> Details:
    """A process a codegen step ran: what it runs, how long, on how much CPU, and how it ended."""
    details = Details(f"process {node.name} (pid {node.pid})")
    elapsed = units.duration(timing.inclusive_ns(node, now_ns))
    if tree.is_process_stuck(node, now_ns):
        usual = tree.process_typical.median(node.name)
        than = (
            f"usually {units.duration(usual)}"
            if usual is not None
            else f"longer than {units.duration(tree.stuck_after_ns)}"
        )
        status = f"STUCK: running {elapsed}, {than}"
    elif node.status is RUNNING:
        status = "running"
    elif node.note:
        status = f"{node.status.value}: {node.note}"
    else:
        status = node.status.value
    started_by = f"{node.parent.name} (pid {node.parent.pid})" if node.parent is not None else f"pid {node.ppid}"
    details.fields += [
        ("status", status),
        ("command", node.command),
        ("started by", started_by),
        ("codegen", f"{node.step.title} of {node.compile.title} (compile {node.compile.id})"),
        ("start", f"+{units.duration(node.start_ns - node.compile.begin_ns)} into the compile"),
        ("duration", elapsed + (" so far" if node.status is RUNNING else "")),
        ("cpu", f"{units.duration(node.cpu_ns)} (as of +{units.duration(node.seen_ns - node.start_ns)})"),
    ]
    if node.exit is not None:
        details.fields.append(("exit", f"killed by signal {-node.exit}" if node.exit < 0 else f"code {node.exit}"))
    if node.children:
        details.fields.append(("ran", ", ".join(f"{child.name} (pid {child.pid})" for child in node.children)))
    return details


def _process(session: Session, process: ProcessNode) -> Details:
    tree = session.tree
    if tree.several:
        return _one_of_several(session, process)
    counters = session.counters
    if process.pid is None:
        details = Details("waiting for the target's hello")
    else:
        details = Details(f"process {process.pid}")
        details.fields += [("command", process.command or "unknown"), ("agent", process.version or "unknown")]
    details.fields += [
        ("compiles", f"{len(tree.compiles)} ({tree.failed_compiles} failed)"),
        ("events", units.count(counters.events)),
        ("dropped", units.count(counters.dropped)),
        ("backlog lost", units.count(counters.backlog_lost)),
        ("unknown messages", units.count(counters.unknown)),
        ("malformed messages", units.count(counters.malformed)),
        ("observer errors", units.count(counters.observer_errors)),
    ]
    details.fields += _kernel_fields(session.kernels)
    if process.exit_reason:
        details.fields.append(("exited", process.exit_reason))
    if session.ended:
        details.fields.append(("stream", f"ended: {session.ended}"))
    return details


def _one_of_several(session: Session, process: ProcessNode) -> Details:
    """A process of a session of several: its own compiles and what its own agent reported."""
    tree = session.tree
    counters = process.counters
    details = Details(f"process {process.pid}" + (f", rank {process.rank}" if process.rank is not None else ""))
    parent = process.parent
    failed = sum(1 for comp in process.compiles if comp.status is FAILED)
    details.fields += [
        ("status", tree.process_status(process).value),
        ("command", process.command or "unknown"),
        (
            "parent",
            f"pid {process.ppid}" + ("" if parent is not None else " (not watched)") if process.ppid else "none",
        ),
        ("children", ", ".join(tree.process_label(child) for child in process.children) or "none"),
        ("compiles", f"{len(process.compiles)} ({failed} failed)"),
        ("dropped", units.count(counters.dropped)),
        ("backlog lost", units.count(counters.backlog_lost)),
        ("observer errors", units.count(counters.observer_errors)),
    ]
    timeline = session.kernel_processes.timelines.get(process)
    if timeline is not None:
        details.fields += _kernel_fields(timeline)
    if process.exit_reason:
        details.fields.append(("exited", process.exit_reason))
    if process.stream_end:
        details.fields.append(("stream", f"{'failed' if process.stream_failed else 'ended'}: {process.stream_end}"))
    return details


def _kernel_fields(kernels: KernelTimeline) -> list[tuple[str, str]]:
    """Kernel tracing, when the process does it: the ring, the traced modules, what was lost."""
    tracing = kernels.tracing
    if tracing is None:
        return []
    if tracing.device is None:
        ring = f"none: {tracing.reason or 'no device'}"
    else:
        ring = f"on {tracing.device}" + (f", drained at {tracing.drain_hz:g} Hz" if tracing.drain_hz else "")
    names = ", ".join(kernels.kernel_names()) or "none yet"
    count = len(kernels.modules)
    return [
        ("kernel ring", ring),
        ("traced kernels", f"{names} ({count} module{'' if count == 1 else 's'})"),
        ("kernel events read", units.count(kernels.events_read)),
        ("kernel events lost", f"{units.count(kernels.events_lost)} in the ring, {units.count(kernels.torn)} torn"),
        ("kernel events missed", units.count(kernels.events_missed)),
    ]


def _captured(failure: dict[str, Any], compile_id: int, recording: Path | None) -> list[tuple[str, str]]:
    """What the agent kept of the failed pass or codegen step, and how to use it: the command
    that makes a reproducer from the file this session is in, or, where nothing is recorded,
    that a recording is needed first."""
    if recording is not None:
        repro = f"iket-tui repro {shlex.quote(str(recording))} --compile {compile_id} -o DIR"
    else:
        repro = NOT_RECORDED
    if failure.get("stage") == CODEGEN:
        return _captured_codegen(failure, repro)
    script = failure.get("ir_script")
    if not isinstance(failure.get("ir_json"), str):
        return [("captured", f"the failed pass, without its module: {failure.get('ir_missing') or 'not kept'}")]
    lines = f" ({len(script.splitlines()):,} lines)" if isinstance(script, str) else ""
    return [("captured", f"the IR given to {failure.get('name')}{lines}, the target and pass config: {repro}")]


def _captured_codegen(failure: dict[str, Any], repro: str) -> list[tuple[str, str]]:
    """The source nvcc rejected, nvcc's first error, and how to make it again."""
    source = failure.get("source")
    if not isinstance(source, str):
        return [
            ("captured", f"the failed codegen step, without its source: {failure.get('source_missing') or 'not kept'}")
        ]
    cut = failure.get("source_missing")
    lines = f"{len(source.splitlines()):,} lines" + (f", cut: {cut}" if isinstance(cut, str) else "")
    fields = [("captured", f"the CUDA source nvcc rejected ({lines}), nvcc's options and output: {repro}")]
    output = failure.get("compiler_output")
    said = first_diagnostic(output) if isinstance(output, str) else None
    if said is not None:
        fields.append(("nvcc said", said))
    return fields
