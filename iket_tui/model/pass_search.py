"""Finding passes by name, in tree order, as the tree grows."""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from iket_tui.model.nodes import PassNode
from iket_tui.model.pass_tree import PassTree


class PassSearch:
    """Passes whose name contains a term (ignoring case). Matches are kept in tree order and
    extended with passes that arrived since the last look, so searching while events stream
    in never rescans what was already scanned (unless compiles were summarised since: their
    passes are gone, and the passes kept are scanned again)."""

    def __init__(self, tree: PassTree) -> None:
        self.tree = tree
        self.term = ""
        self._needle = ""
        self._matches: list[PassNode] = []
        self._orders: list[int] = []
        self._scanned = 0
        self._list_version = tree.pass_list_version  # the tree's list of passes when it was last scanned

    def set_term(self, term: str) -> None:
        """Search for ``term``; typing more letters narrows the matches without a rescan."""
        if term == self.term:
            return
        needle = term.lower()
        narrower = bool(self._needle) and needle.startswith(self._needle)
        self.term = term
        self._needle = needle
        if narrower:
            self._matches = [node for node in self._matches if needle in node.name.lower()]
            self._orders = [node.order for node in self._matches]
        else:
            self._matches = []
            self._orders = []
            self._scanned = 0

    @property
    def matches(self) -> list[PassNode]:
        self._catch_up()
        return self._matches

    def _catch_up(self) -> None:
        passes = self.tree.passes
        if self.tree.pass_list_version != self._list_version:  # rebuilt, not appended to: scan again
            self._list_version = self.tree.pass_list_version
            self._matches, self._orders, self._scanned = [], [], 0
        if not self._needle or self._scanned >= len(passes):
            self._scanned = len(passes)
            return
        needle = self._needle
        found = [node for node in passes[self._scanned :] if needle in node.name.lower()]
        self._matches += found
        self._orders += [node.order for node in found]
        self._scanned = len(passes)

    def first_from(self, order: int) -> PassNode | None:
        """The first match at or after ``order`` in tree order, wrapping to the first."""
        matches = self.matches
        if not matches:
            return None
        index = bisect_left(self._orders, order)
        return matches[index] if index < len(matches) else matches[0]

    def next_after(self, order: int) -> PassNode | None:
        matches = self.matches
        if not matches:
            return None
        index = bisect_right(self._orders, order)
        return matches[index] if index < len(matches) else matches[0]

    def previous_before(self, order: int) -> PassNode | None:
        matches = self.matches
        if not matches:
            return None
        index = bisect_left(self._orders, order) - 1
        return matches[index]

    def position(self, node: PassNode) -> int | None:
        """1-based position of ``node`` among the matches."""
        matches = self.matches
        index = bisect_left(self._orders, node.order)
        if index < len(matches) and matches[index] is node:
            return index + 1
        return None
