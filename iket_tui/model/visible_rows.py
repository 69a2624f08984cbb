"""The rows a tree view shows: the pass tree flattened through what is expanded.

Rows are kept as one segment per compile (its own row, plus everything below it when it is
expanded) with the row number where each segment starts, so a new pass in the newest
compile rebuilds one short segment, a new compile appends one, and finding the row at a
given line is a binary search. This is what lets a view of half a million passes stay
responsive while events stream in.

A session of several processes shows a row per process, each under its parent process, and
the segments of a process's compiles under its row (:meth:`VisibleRows._lay_out`).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import NamedTuple

from iket_tui.model.nodes import (
    FAILED,
    CodegenNode,
    CompileNode,
    CompilerProcessNode,
    ContextNode,
    Node,
    PassNode,
    ProcessNode,
)
from iket_tui.model.pass_tree import MAX_PROCESS_DEPTH, PassTree


class Row(NamedTuple):
    node: Node
    level: int  # indentation: 0 for the process, 1 for compiles, 2 for contexts and codegen, 3+ below them
    expandable: bool


class VisibleRows:
    """The flattened, expanded part of a :class:`PassTree`.

    Expansion has three layers: what the user chose (kept until they choose otherwise), what
    was expanded automatically (the followed compile, the path to a failure), and defaults
    (compiles collapsed; contexts and passes with children expanded). Call :meth:`refresh`
    after the tree or the expansion changed; ``version`` changes when the rows did.
    """

    def __init__(self, tree: PassTree) -> None:
        self.tree = tree
        self.version = 0
        self._chosen: dict[Node, bool] = {}
        self._auto: set[Node] = set()
        self._compiles_open = False  # default for compiles (expand all / collapse all)
        self._segments: list[list[Row]] = []
        self._keys: list[tuple[int, int]] = []
        self._starts: list[int] = []
        self._watched: set[int] = set()  # positions of expanded compiles
        self._stale: set[int] = set()  # positions whose expansion changed
        self._compile_touches: dict[CompileNode, int] = {}
        self._process_row = Row(tree.process, 0, True)
        self._total = 0
        # Several processes: the row of each process and the segments of its compiles, in order.
        self._layout: list[ProcessNode | int] = []  # a process, or a compile's position
        self._layout_starts: list[int] = []
        self._layout_index: dict[ProcessNode | int, int] = {}
        self._depths: dict[ProcessNode, int] = {}
        self._process_shape = -1
        self._layout_stale = True

    # Expansion

    def is_expanded(self, node: Node) -> bool:
        chosen = self._chosen.get(node)
        if chosen is not None:
            return chosen
        if node in self._auto:
            return True
        if isinstance(node, CompileNode):
            return self._compiles_open
        return True

    def set_expanded(self, node: Node, expanded: bool) -> None:
        """The user expanded or collapsed ``node``."""
        self._chosen[node] = expanded
        self._touch(node)

    def toggle(self, node: Node) -> None:
        self.set_expanded(node, not self.is_expanded(node))

    def expand_all(self) -> None:
        self._reset_expansion(True)

    def collapse_all(self) -> None:
        self._reset_expansion(False)

    def follow(self, comp: CompileNode) -> None:
        """Expand ``comp`` as the followed compile, collapsing the one followed before unless
        the user expanded it or it failed."""
        if comp in self._auto:
            return
        for previous in [node for node in self._auto if isinstance(node, CompileNode)]:
            if previous.status is not FAILED:
                self._auto.discard(previous)
                self._touch(previous)
        self._auto.add(comp)
        self._touch(comp)

    def reveal(self, node: Node) -> None:
        """Expand everything above ``node`` automatically so it is on a row (a failure, a
        search match). Choices the user made to collapse are overridden: they asked to see it."""
        for above in (*processes_above(node, self.tree), *ancestors(node)):
            if not self.is_expanded(above):
                self._chosen.pop(above, None)
                self._auto.add(above)
                self._touch(above)

    def _reset_expansion(self, compiles_open: bool) -> None:
        self._chosen.clear()
        self._auto = {node for node in self._auto if not isinstance(node, CompileNode) or compiles_open}
        self._compiles_open = compiles_open
        self._stale.update(range(len(self._segments)))
        self._watched = set(range(len(self._segments))) if compiles_open else set()

    def _touch(self, node: Node) -> None:
        if isinstance(node, ProcessNode):
            self._layout_stale = True
            self.version += 1
            return
        comp = node if isinstance(node, CompileNode) else node.compile
        self._compile_touches[comp] = self._compile_touches.get(comp, 0) + 1
        self._stale.add(comp.position)

    # Rows

    def refresh(self) -> bool:
        """Bring the rows up to date with the tree; True if they changed."""
        if self.tree.several and self.tree.process_shape != self._process_shape:
            self._process_shape = self.tree.process_shape
            depths = _depths(self.tree)
            for process, depth in depths.items():  # a process placed deeper moves its compiles' rows
                if self._depths.get(process, 0) != depth:
                    self._stale.update(comp.position for comp in process.compiles)
            self._depths = depths
            self._layout_stale = True
        compiles = self.tree.compiles
        segments = self._segments
        changed_from: int | None = None
        for position in sorted(self._stale | self._watched):
            if position >= len(segments):
                continue
            comp = compiles[position]
            key = (comp.shape, self._compile_touches.get(comp, 0))
            if key == self._keys[position] and position not in self._stale:
                continue
            segment = self._build(comp)
            if segment != segments[position]:
                segments[position] = segment
                changed_from = position if changed_from is None else min(changed_from, position)
            self._keys[position] = key
            self._set_watched(comp)
        self._stale.clear()
        for position in range(len(segments), len(compiles)):
            comp = compiles[position]
            segments.append(self._build(comp))
            self._keys.append((comp.shape, self._compile_touches.get(comp, 0)))
            self._starts.append(0)
            self._set_watched(comp)
            changed_from = position if changed_from is None else changed_from
        if self.tree.several:
            return self._lay_out(changed_from is not None)
        if changed_from is None:
            return False
        starts = self._starts
        row = starts[changed_from - 1] + len(segments[changed_from - 1]) if changed_from else 1
        for position in range(changed_from, len(segments)):
            starts[position] = row
            row += len(segments[position])
        self._total = row - 1
        self.version += 1
        return True

    def _set_watched(self, comp: CompileNode) -> None:
        if self.is_expanded(comp):
            self._watched.add(comp.position)
        else:
            self._watched.discard(comp.position)

    def _lay_out(self, segments_changed: bool) -> bool:
        """Several processes: the order of process rows and compile segments, and where each
        starts; True if the rows changed."""
        if not (segments_changed or self._layout_stale):
            return False
        layout: list[ProcessNode | int] = []  # rebuilt whole: compiles that came go under their process
        by_rank = self.tree.by_rank
        stack = [process for process in reversed(self.tree.processes) if process.parent is None]
        while stack:
            process = stack.pop()
            layout.append(process)
            if not self.is_expanded(process):
                continue
            layout.extend(comp.position for comp in process.compiles)
            children = process.children
            if by_rank:
                children = sorted(children, key=lambda child: (child.rank is None, child.rank or 0))
            stack.extend(reversed(children))
        self._layout = layout
        self._layout_index = {entry: index for index, entry in enumerate(layout)}
        self._layout_stale = False
        row = 0
        starts: list[int] = []
        segments = self._segments
        for entry in self._layout:
            starts.append(row)
            row += 1 if isinstance(entry, ProcessNode) else len(segments[entry]) if entry < len(segments) else 0
        self._layout_starts = starts
        self._total = row
        self.version += 1
        return True

    def _build(self, comp: CompileNode) -> list[Row]:
        base = self._depths.get(comp.process, 0) if comp.process is not None and self.tree.several else 0
        rows = [Row(comp, 1 + base, True)]
        if not self.is_expanded(comp):
            return rows
        expanded = self.is_expanded
        for ctx in comp.context_order:
            rows.append(Row(ctx, 2 + base, bool(ctx.roots)))
            if not ctx.roots or not expanded(ctx):
                continue
            stack: list[tuple[PassNode, int]] = [(node, 3 + base) for node in reversed(ctx.roots)]
            while stack:
                node, level = stack.pop()
                children = node.children
                rows.append(Row(node, level, bool(children)))
                if children and expanded(node):
                    stack.extend((child, level + 1) for child in reversed(children))
        for step in comp.codegen_steps:
            rows.append(Row(step, 2 + base, bool(step.process_roots)))
            if not step.process_roots or not expanded(step):
                continue
            below: list[tuple[CompilerProcessNode, int]] = [(node, 3 + base) for node in reversed(step.process_roots)]
            while below:
                process, level = below.pop()
                rows.append(Row(process, level, bool(process.children)))
                if process.children and expanded(process):
                    below.extend((child, level + 1) for child in reversed(process.children))
        return rows

    def __len__(self) -> int:
        if self.tree.several:
            return self._total
        return 1 + self._total if self.is_expanded(self.tree.process) else 1

    def row(self, index: int) -> Row | None:
        if self.tree.several:
            return self._row_of_several(index)
        if index == 0:
            return self._process_row
        if index < 0 or index >= len(self):
            return None
        position = bisect_right(self._starts, index) - 1
        return self._segments[position][index - self._starts[position]]

    def _row_of_several(self, index: int) -> Row | None:
        if index < 0 or index >= self._total:
            return None
        at = bisect_right(self._layout_starts, index) - 1
        entry = self._layout[at]
        if isinstance(entry, ProcessNode):
            return Row(entry, self._depths.get(entry, 0), True)
        return self._segments[entry][index - self._layout_starts[at]]

    def index_of(self, node: Node) -> int | None:
        """The row showing ``node``, or None if it is hidden under a collapsed node."""
        if self.tree.several:
            return self._index_of_several(node)
        if isinstance(node, ProcessNode):
            return 0
        if not self.is_expanded(self.tree.process):
            return None
        comp = node if isinstance(node, CompileNode) else node.compile
        if comp.position >= len(self._segments):
            return None
        for offset, row in enumerate(self._segments[comp.position]):
            if row.node is node:
                return self._starts[comp.position] + offset
        return None

    def _index_of_several(self, node: Node) -> int | None:
        if isinstance(node, ProcessNode):
            at = self._layout_index.get(node)
            return None if at is None else self._layout_starts[at]
        comp = node if isinstance(node, CompileNode) else node.compile
        at = self._layout_index.get(comp.position)
        if at is None or comp.position >= len(self._segments):
            return None
        for offset, row in enumerate(self._segments[comp.position]):
            if row.node is node:
                return self._layout_starts[at] + offset
        return None

    def nearest_shown(self, node: Node) -> Node:
        """``node`` if it is on a row, else its closest ancestor that is."""
        for candidate in (node, *reversed(ancestors(node)), *reversed(processes_above(node, self.tree))):
            if self.index_of(candidate) is not None:
                return candidate
        return self.tree.process


def parent_of(node: Node, tree: PassTree) -> Node | None:
    if isinstance(node, PassNode):
        return node.parent if node.parent is not None else node.context
    if isinstance(node, ContextNode | CodegenNode):
        return node.compile
    if isinstance(node, CompilerProcessNode):
        return node.parent if node.parent is not None else node.step
    if isinstance(node, CompileNode):
        return tree.process_of(node)
    if isinstance(node, ProcessNode):
        return node.parent
    return None


def processes_above(node: Node, tree: PassTree) -> list[ProcessNode]:
    """The processes whose rows are above ``node`` in a session of several, outermost first
    (none in a session of one, where the process row is always there)."""
    if not tree.several:
        return []
    if isinstance(node, ProcessNode):
        process = node.parent
    else:
        comp = node if isinstance(node, CompileNode) else node.compile
        process = tree.process_of(comp)
    chain: list[ProcessNode] = []
    while process is not None:
        chain.append(process)
        process = process.parent
    chain.reverse()
    return chain


def _depths(tree: PassTree) -> dict[ProcessNode, int]:
    """How deep each process sits under the processes above it, from the top down (each
    process's depth is its parent's plus one)."""
    depths: dict[ProcessNode, int] = {}
    stack = [(process, 0) for process in tree.processes if process.parent is None]
    while stack:
        process, depth = stack.pop()
        depths[process] = depth
        below = min(depth + 1, MAX_PROCESS_DEPTH)  # a chain deeper than that is drawn at that depth
        stack.extend((child, below) for child in process.children)
    return depths


def ancestors(node: Node) -> list[Node]:
    """The nodes above ``node``, outermost first (the process is not included)."""
    chain: list[Node] = []
    if isinstance(node, PassNode):
        up = node.parent
        while up is not None:
            chain.append(up)
            up = up.parent
        chain.append(node.context)
        chain.append(node.compile)
    elif isinstance(node, ContextNode | CodegenNode):
        chain.append(node.compile)
    elif isinstance(node, CompilerProcessNode):
        starter = node.parent
        while starter is not None:
            chain.append(starter)
            starter = starter.parent
        chain.append(node.step)
        chain.append(node.compile)
    chain.reverse()
    return chain
