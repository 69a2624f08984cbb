"""Inclusive and self time of any node, with running nodes timed up to a given clock.

``now_ns`` is on the agent's monotonic clock (the clock of ``t_ns`` in messages); the UI
maps its own clock onto it (see :class:`iket_tui.model.clock.AgentClock`).
"""

from __future__ import annotations

from iket_tui.model.nodes import (
    RUNNING,
    CodegenNode,
    CompileNode,
    CompilerProcessNode,
    ContextNode,
    Node,
    PassNode,
    ProcessNode,
)


def inclusive_ns(node: Node, now_ns: int) -> int | None:
    """Time from the node's start to its end, or to ``now_ns`` while it runs."""
    if isinstance(node, PassNode | CodegenNode):
        if node.duration_ns is not None:
            return node.duration_ns
        return max(0, now_ns - node.start_ns) if isinstance(node, PassNode) else max(0, now_ns - node.begin_ns)
    if isinstance(node, CompileNode):
        if node.duration_ns is not None:
            return node.duration_ns
        return max(0, now_ns - node.begin_ns)
    if isinstance(node, ContextNode):
        end = node.end_ns if node.end_ns is not None else now_ns
        return max(0, end - node.begin_ns)
    if isinstance(node, CompilerProcessNode):
        end = node.end_ns if node.end_ns is not None else now_ns
        return max(0, end - node.start_ns)
    return None


def self_ns(node: Node, now_ns: int) -> int | None:
    """Inclusive time minus the time spent in the node's children (for a compile: outside
    its passes and codegen)."""
    total = inclusive_ns(node, now_ns)
    if total is None:
        return None
    if isinstance(node, PassNode):
        inner = node.child_ns + _running_tail(node.children, now_ns)
    elif isinstance(node, ContextNode):
        inner = node.root_ns + _running_tail(node.roots, now_ns)
    elif isinstance(node, CompileNode):
        inner = sum(ctx.root_ns + _running_tail(ctx.roots, now_ns) for ctx in node.context_order)
        inner += codegen_ns(node, now_ns)
    else:
        return total
    return max(0, total - inner)


def codegen_ns(comp: CompileNode, now_ns: int) -> int:
    """Time the compile spent in its codegen steps: the union of their spans, so a step
    that ran inside another is not counted twice."""
    spans = sorted((step.begin_ns, step.begin_ns + (inclusive_ns(step, now_ns) or 0)) for step in comp.codegen_steps)
    total = 0
    covered_to: int | None = None
    for begin, end in spans:
        if covered_to is not None:
            begin = max(begin, covered_to)
        if end > begin:
            total += end - begin
            covered_to = end
    return total


def _running_tail(children: list[PassNode], now_ns: int) -> int:
    """Passes nest like a stack, so only the last child can still be running."""
    if children and children[-1].status is RUNNING:
        return max(0, now_ns - children[-1].start_ns)
    return 0


def start_ns(node: Node) -> int | None:
    if isinstance(node, PassNode | CompilerProcessNode):
        return node.start_ns
    if isinstance(node, CompileNode | ContextNode | CodegenNode):
        return node.begin_ns
    assert isinstance(node, ProcessNode)
    return None
