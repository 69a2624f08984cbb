"""The session's bound on passes: past it, the oldest finished compiles keep their row and a
summary of where their time went, and let their passes go, as the kernel timeline lets the
oldest launches' events go past its own bound.

A compile is summarised only once it is done: a failed, incomplete or still running compile
keeps every pass, whatever the bound, since those are the ones a user comes to look at. Its
pass runs are folded into :attr:`PassTree.summarised_stats` first, so the timing screen's per
pass totals stay what they were.
"""

from __future__ import annotations

import sys
from typing import Final

from iket_tui.model.nodes import DONE, FAILED, NO_CHILDREN, CompileNode
from iket_tui.model.pass_timing import time_compile
from iket_tui.model.pass_tree import PassTree

DEFAULT_MAX_PASSES = 2_000_000
"""Pass nodes kept at most (two events each): a node and its indexes take about 300 bytes, so
the bound holds the passes well under 1 GB however long the session runs."""

UNBOUNDED_PASSES: Final = sys.maxsize
"""No bound: what a file written from a recording (an export) keeps, every pass of it."""

LOW_WATER = 0.75
"""Once past the bound, compiles are summarised until this share of it is left, so that the
tree's pass list is rebuilt once per quarter of the bound rather than at every batch."""


def can_summarise(comp: CompileNode) -> bool:
    """A compile whose passes may be let go: done, and with no pass left unfinished."""
    return comp.status is DONE and comp.summary is None and not comp.incomplete and comp.end_ns is not None


def bound_passes(tree: PassTree, max_passes: int) -> int:
    """Summarise the oldest finished compiles until the tree holds at most ``max_passes`` pass
    nodes (a quarter less, once it had to); how many compiles were summarised. When every
    compile past the bound is failed or running, the tree keeps more: those are never let go."""
    if tree.pass_count <= max_passes:
        return 0
    goal = int(max_passes * LOW_WATER)
    held = tree.pass_count
    compiles = tree.compiles
    position = tree.summarise_from
    settled = True  # every compile before ``position`` is summarised or failed
    done = 0
    while held > goal and position < len(compiles):
        comp = compiles[position]
        position += 1
        if can_summarise(comp):
            held -= _summarise(tree, comp)
            done += 1
        elif comp.summary is None and comp.status is not FAILED:
            settled = False
        if settled:
            tree.summarise_from = position
    if done:
        tree.drop_summarised_passes()
        tree.summarised += done
    return done


def _summarise(tree: PassTree, comp: CompileNode) -> int:
    """Fold the compile's pass runs into the tree's summary and let its passes go; how many."""
    comp.summary = time_compile(comp, tree.last_t_ns, tree.summarised_stats)
    count = 0
    for ctx in comp.context_order:
        count += len(ctx.passes)
        for node in ctx.passes.values():
            node.children = NO_CHILDREN
            node.parent = None
        ctx.passes = {}
        ctx.roots = []
    comp.contexts = {}  # its context rows stay in ``context_order``; a late pass finds none of them
    comp.forgotten = True  # and is counted in ``late_events``, not kept
    comp.version += 1
    comp.shape += 1
    return count
