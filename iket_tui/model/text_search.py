"""Finding a term in a text shown line by line, as ``less`` and vim do: every occurrence, in
order, and the one after or before a given one, wrapping at either end.

The case is ignored unless the term has a capital letter (vim's ``smartcase``, ``less -i``).
Occurrences do not overlap, so their count is what ``str.count`` gives for the same term.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence


class TextMatches:
    """The occurrences of ``term`` in ``lines``: occurrence ``i`` is on line ``line_of(i)``,
    columns ``span_of(i)`` (characters, end excluded)."""

    def __init__(self, lines: Sequence[str], term: str) -> None:
        self.term = term
        self.ignore_case = term == term.lower()
        self._lines: list[int] = []
        self._starts: list[int] = []
        self._ends: list[int] = []
        if term:
            self._find(lines)

    def _find(self, lines: Sequence[str]) -> None:
        term = self.term
        line_of, starts, ends = self._lines.append, self._starts.append, self._ends.append
        if not self.ignore_case or (term.isascii() and all(line.isascii() for line in lines)):
            needle = term.lower() if self.ignore_case else term
            size = len(needle)
            for number, line in enumerate(lines):
                hay = line.lower() if self.ignore_case else line
                at = hay.find(needle)
                while at >= 0:
                    line_of(number)
                    starts(at)
                    ends(at + size)
                    at = hay.find(needle, at + size)
            return
        pattern = re.compile(re.escape(term), re.IGNORECASE)
        for number, line in enumerate(lines):
            for found in pattern.finditer(line):
                line_of(number)
                starts(found.start())
                ends(found.end())

    def __len__(self) -> int:
        return len(self._lines)

    def line_of(self, index: int) -> int:
        return self._lines[index]

    def span_of(self, index: int) -> tuple[int, int]:
        return self._starts[index], self._ends[index]

    def on_line(self, line: int) -> range:
        """The indices of the occurrences on ``line``."""
        return range(bisect_left(self._lines, line), bisect_right(self._lines, line))

    def first_from(self, line: int) -> int | None:
        """The first occurrence on ``line`` or after it, else the first of all (wrapping)."""
        if not self._lines:
            return None
        index = bisect_left(self._lines, line)
        return index if index < len(self._lines) else 0

    def after(self, index: int) -> int | None:
        """The occurrence after ``index``, the first after the last."""
        return (index + 1) % len(self._lines) if self._lines else None

    def before(self, index: int) -> int | None:
        """The occurrence before ``index``, the last before the first."""
        return (index - 1) % len(self._lines) if self._lines else None
