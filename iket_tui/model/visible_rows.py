"""The rows a tree view shows: the pass tree flattened through what is expanded.

Rows are kept as one segment per compile (its own row, plus everything below it when it is
expanded) with the row number where each segment starts, so a new pass in the newest
compile rebuilds one short segment, a new compile appends one, and finding the row at a
given line is a binary search. This is what lets a view of half a million passes stay
responsive while events stream in.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import NamedTuple

from iket_tui.model.nodes import FAILED, CodegenNode, CompileNode, ContextNode, Node, PassNode, ProcessNode
from iket_tui.model.pass_tree import PassTree


class Row(NamedTuple):
    node: Node
    level: int  # indentation: 0 for the process, 1 for compiles, 2 for contexts, 3+ for passes
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
        for above in ancestors(node):
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
            self.version += 1
            return
        comp = node if isinstance(node, CompileNode) else node.compile
        self._compile_touches[comp] = self._compile_touches.get(comp, 0) + 1
        self._stale.add(comp.position)

    # Rows

    def refresh(self) -> bool:
        """Bring the rows up to date with the tree; True if they changed."""
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

    def _build(self, comp: CompileNode) -> list[Row]:
        rows = [Row(comp, 1, True)]
        if not self.is_expanded(comp):
            return rows
        expanded = self.is_expanded
        for ctx in comp.context_order:
            rows.append(Row(ctx, 2, bool(ctx.roots)))
            if not ctx.roots or not expanded(ctx):
                continue
            stack: list[tuple[PassNode, int]] = [(node, 3) for node in reversed(ctx.roots)]
            while stack:
                node, level = stack.pop()
                children = node.children
                rows.append(Row(node, level, bool(children)))
                if children and expanded(node):
                    stack.extend((child, level + 1) for child in reversed(children))
        rows.extend(Row(step, 2, False) for step in comp.codegen_steps)
        return rows

    def __len__(self) -> int:
        return 1 + self._total if self.is_expanded(self.tree.process) else 1

    def row(self, index: int) -> Row | None:
        if index == 0:
            return self._process_row
        if index < 0 or index >= len(self):
            return None
        position = bisect_right(self._starts, index) - 1
        return self._segments[position][index - self._starts[position]]

    def index_of(self, node: Node) -> int | None:
        """The row showing ``node``, or None if it is hidden under a collapsed node."""
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

    def nearest_shown(self, node: Node) -> Node:
        """``node`` if it is on a row, else its closest ancestor that is."""
        for candidate in (node, *reversed(ancestors(node))):
            if self.index_of(candidate) is not None:
                return candidate
        return self.tree.process


def parent_of(node: Node, tree: PassTree) -> Node | None:
    if isinstance(node, PassNode):
        return node.parent if node.parent is not None else node.context
    if isinstance(node, ContextNode | CodegenNode):
        return node.compile
    if isinstance(node, CompileNode):
        return tree.process
    return None


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
    chain.reverse()
    return chain
