"""What changed between two sets of compiles: compiles matched by process, kernel and label, in
order, and for each pair the passes added, removed or moved, each pass's change of time (the
largest first, flagged when it got markedly slower), failures new or fixed, and codegen time.
A :class:`Comparison` also holds the comparison of the kernel launches beside them
(:mod:`~iket_tui.model.compare_kernels`), so that one set of flags gates both.

Pure: it compares :class:`CompileSummary` values (a compile reduced to what a comparison reads,
small enough to keep a million passes' worth), so that the command reading two recordings and
any other caller share one way of matching and flagging.
"""

from __future__ import annotations

import sys
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from functools import cached_property
from typing import Final

import numpy as np
import numpy.typing as npt

from iket_tui.model.compare_kernels import KERNEL_FLAGS, LaunchComparison
from iket_tui.model.matching import pair_in_order
from iket_tui.model.nodes import FAILED, INCOMPLETE, RUNNING, CompileNode, PassNode

FLAGS: Final = ("slower", "failed", "added", "removed", "moved", "unmatched", *KERNEL_FLAGS)
"""What a comparison can flag, in the words of ``--fail-on``: a pass slower, a failure new, passes
added, removed or moved, compiles or launches without a match; a kernel's range slower, an event
run another number of times per launch, a payload range changed."""
DEFAULT_FAIL_ON: Final = ("slower", "failed", "range-slower")
SLOWER_PCT: Final = 20.0
"""A pass is flagged slower from this much more time (percent) ..."""
SLOWER_MIN_NS: Final = 1_000_000
"""... and at least this much more time, so that a pass of microseconds is never flagged."""


@dataclass(frozen=True)
class PassShape:
    """The passes of a compile, their times left out: shared by every compile that ran the same
    passes in the same order (most compiles of a kernel), so that a recording of a million
    passes keeps each sequence once."""

    passes: tuple[str, ...]
    """Every pass's name, in the order they began."""
    names: tuple[str, ...]
    """Each name once, in the order of its first run."""
    runs: tuple[int, ...]
    """How many times each of :attr:`names` ran."""


Times = npt.NDArray[np.int64]
"""Nanoseconds, or run counts, a row per pass name."""
Shapes = dict[tuple[str, ...], PassShape]
"""The shapes met so far, by pass sequence: one per comparison, given to every :func:`summarize`."""


@dataclass(frozen=True)
class CompileSummary:
    """One compile as a comparison reads it: whose it is, which kernel and label, its passes'
    names in the order they began and their own time (their children's left out, so that a
    slowed pass is not also blamed on the pass around it), its failure and its codegen time."""

    process: str
    """``rank 3`` where the process has a rank, else ``process 2`` (its order in the recording)."""
    compile: int
    """The agent's number for the compile."""
    kernel: str
    label: str
    shape: PassShape
    times: array[int]
    """Each of the shape's names' own time, summed over its runs that finished; -1 for none."""
    duration_ns: int | None
    codegen_ns: int
    failed: bool
    error: str | None
    complete: bool
    """It ended in the recording (a recording cut in the middle of it leaves it incomplete)."""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.process, self.kernel, self.label)

    @property
    def title(self) -> str:
        return f"{self.process} compile {self.compile} {self.kernel}"

    @property
    def passes(self) -> tuple[str, ...]:
        return self.shape.passes

    @property
    def self_ns(self) -> dict[str, int]:
        """Each pass name's own time, for the names with a run that finished."""
        return {name: ns for name, ns in zip(self.shape.names, self.times, strict=True) if ns >= 0}

    @property
    def runs(self) -> dict[str, int]:
        """How many times each pass name ran."""
        return dict(zip(self.shape.names, self.shape.runs, strict=True))


def process_name(rank: int | None, order: int) -> str:
    """How a compile's process is matched: its rank, else its order among the processes (from 1)."""
    return f"rank {rank}" if rank is not None else f"process {order}"


def summarize(comp: CompileNode, process: str, shapes: Shapes | None = None) -> CompileSummary:
    """``comp`` reduced to what a comparison reads; ``process`` as :func:`process_name` says it.
    ``shapes`` shares one :class:`PassShape` among the compiles that ran the same passes."""
    nodes: list[PassNode] = sorted(
        (node for ctx in comp.context_order for node in ctx.passes.values()), key=lambda node: node.order
    )
    sequence = tuple(sys.intern(node.name) for node in nodes)
    shape = shapes.get(sequence) if shapes is not None else None
    if shape is None:
        counted = Counter(sequence)
        shape = PassShape(sequence, tuple(counted), tuple(counted.values()))
        if shapes is not None:
            shapes[sequence] = shape
    at = {name: i for i, name in enumerate(shape.names)}
    times = array("q", [-1]) * len(shape.names)
    for node in nodes:
        if node.duration_ns is not None:
            i = at[node.name]
            times[i] = max(times[i], 0) + max(0, node.duration_ns - node.child_ns)
    codegen = sum(step.duration_ns or 0 for step in comp.codegen_steps)
    return CompileSummary(
        process=process,
        compile=comp.id,
        kernel=comp.kernel or "",
        label=comp.label,
        shape=shape,
        times=times,
        duration_ns=comp.duration_ns,
        codegen_ns=codegen,
        failed=comp.status is FAILED,
        error=comp.error,
        complete=comp.status is not INCOMPLETE and comp.status is not RUNNING,
    )


@dataclass(frozen=True)
class PassChange:
    """One pass name's own time in each compile (None where it did not run there), and how many
    times it ran in each. It is flagged slower only when it ran as many times in both: a pass
    that ran once more took longer for that alone (it is then among the moved)."""

    name: str
    before_ns: int | None
    after_ns: int | None
    slower: bool
    before_runs: int = 0
    after_runs: int = 0

    @property
    def change_ns(self) -> int:
        return (self.after_ns or 0) - (self.before_ns or 0)

    @property
    def change_pct(self) -> float | None:
        if not self.before_ns or self.after_ns is None:
            return None
        return 100.0 * self.change_ns / self.before_ns


@dataclass(frozen=True, eq=False)
class PairChange:
    """What changed from compile ``a`` to compile ``b``. Each pass name of either compile is a
    row of the arrays (own time before and after, -1 where no run of it finished; runs before and
    after; flagged slower): a million passes' worth of pairs then holds no object per pass, and
    :attr:`passes` or :meth:`top` make the rows a reader asks for."""

    a: CompileSummary
    b: CompileSummary
    added: tuple[str, ...]
    removed: tuple[str, ...]
    moved: tuple[str, ...]
    failure: str | None
    """``new`` when ``b`` failed and ``a`` did not, ``fixed`` for the other way, None otherwise."""
    names: tuple[str, ...]
    before: Times
    after: Times
    before_runs: Times
    after_runs: Times
    flagged: npt.NDArray[np.bool_]

    @cached_property
    def _order(self) -> Times:
        """The rows, the largest change of time first (ties in the order the passes first ran)."""
        change = np.maximum(self.after, 0) - np.maximum(self.before, 0)
        return np.argsort(-np.abs(change), kind="stable")

    def _row(self, i: int) -> PassChange:
        before, after = int(self.before[i]), int(self.after[i])
        return PassChange(
            self.names[i],
            before if before >= 0 else None,
            after if after >= 0 else None,
            bool(self.flagged[i]),
            int(self.before_runs[i]),
            int(self.after_runs[i]),
        )

    @property
    def passes(self) -> tuple[PassChange, ...]:
        """Every pass name of either compile, the largest change of time first."""
        return tuple(self._row(int(i)) for i in self._order)

    def top(self, count: int) -> tuple[PassChange, ...]:
        """The ``count`` largest changes of time and every pass flagged slower, the largest first."""
        return tuple(self._row(int(i)) for n, i in enumerate(self._order) if n < count or self.flagged[i])

    @property
    def slower(self) -> tuple[PassChange, ...]:
        return tuple(self._row(int(i)) for i in self._order if self.flagged[i])

    def flags(self) -> tuple[str, ...]:
        """What this pair flags, among :data:`FLAGS`."""
        found = (
            ("slower", bool(self.flagged.any())),
            ("failed", self.failure == "new"),
            ("added", bool(self.added)),
            ("removed", bool(self.removed)),
            ("moved", bool(self.moved)),
        )
        return tuple(name for name, flagged in found if flagged)


@dataclass(frozen=True)
class Comparison:
    """Every matched pair, in the order of the first side's compiles, and the compiles of each
    side that found no match; the kernel launches compared beside them."""

    pairs: tuple[PairChange, ...]
    only_a: tuple[CompileSummary, ...]
    only_b: tuple[CompileSummary, ...]
    incomplete: tuple[CompileSummary, ...] = field(default=())
    """Compiles left out because they did not end (a recording cut in the middle of them)."""
    launches: LaunchComparison = field(default_factory=LaunchComparison)

    def flags(self) -> tuple[str, ...]:
        """What the comparison flags, among :data:`FLAGS`, in that order."""
        found = {flag for pair in self.pairs for flag in pair.flags()}
        found.update(flag for pair in self.launches.pairs for flag in pair.flags())
        if self.only_a or self.only_b or self.launches.only_a or self.launches.only_b:
            found.add("unmatched")
        return tuple(flag for flag in FLAGS if flag in found)


def compare(
    a: Iterable[CompileSummary],
    b: Iterable[CompileSummary],
    *,
    slower_pct: float = SLOWER_PCT,
    min_ns: int = SLOWER_MIN_NS,
) -> Comparison:
    """Match ``a``'s compiles with ``b``'s by process, kernel and label, the n-th of a key in
    ``a`` with the n-th in ``b``, and compare each pair. A compile that did not end is compared
    with nothing and listed as incomplete."""
    incomplete: list[CompileSummary] = []
    sides: tuple[list[CompileSummary], list[CompileSummary]] = ([], [])
    for side, summaries in ((1, b), (0, a)):
        for summary in summaries:
            (sides[side] if summary.complete else incomplete).append(summary)
    matched, only_a, only_b = pair_in_order(*sides, key=lambda summary: summary.key)
    pairs = [compare_pair(x, y, slower_pct=slower_pct, min_ns=min_ns) for x, y in matched]
    only_b.sort(key=lambda s: (s.process, s.compile))
    return Comparison(tuple(pairs), tuple(only_a), tuple(only_b), tuple(incomplete))


def compare_pair(
    a: CompileSummary, b: CompileSummary, *, slower_pct: float = SLOWER_PCT, min_ns: int = SLOWER_MIN_NS
) -> PairChange:
    """What changed from ``a`` to ``b``: passes by their name sequences, times by name."""
    failure = "new" if b.failed and not a.failed else "fixed" if a.failed and not b.failed else None
    same = a.shape is b.shape or a.shape.passes == b.shape.passes
    if same:  # the common case: rows already aligned
        names = a.shape.names
        before, after = np.frombuffer(a.times, dtype=np.int64), np.frombuffer(b.times, dtype=np.int64)
        before_runs = after_runs = np.asarray(a.shape.runs, dtype=np.int64)
        added: tuple[str, ...] = ()
        removed: tuple[str, ...] = ()
        moved: tuple[str, ...] = ()
    else:
        added, removed, moved = _sequence_changes(a.passes, b.passes)
        names = tuple(dict.fromkeys((*a.shape.names, *b.shape.names)))
        before, before_runs = _aligned(a, names)
        after, after_runs = _aligned(b, names)
    timed = (before >= 0) | (after >= 0)
    if not timed.all():  # a pass none of whose runs finished on either side has no time to compare
        names = tuple(name for name, keep in zip(names, timed, strict=True) if keep)
        before, after, before_runs, after_runs = before[timed], after[timed], before_runs[timed], after_runs[timed]
    grew = after - before
    flagged = (
        (before >= 0)
        & (after >= 0)
        & (before_runs == after_runs)
        & (grew >= min_ns)
        & (grew * 100.0 >= slower_pct * before)
    )
    return PairChange(a, b, added, removed, moved, failure, names, before, after, before_runs, after_runs, flagged)


def _aligned(summary: CompileSummary, names: tuple[str, ...]) -> tuple[Times, Times]:
    """``summary``'s own times and runs in the rows of ``names`` (-1 and 0 where it has none)."""
    at = {name: i for i, name in enumerate(summary.shape.names)}
    times = np.full(len(names), -1, dtype=np.int64)
    runs = np.zeros(len(names), dtype=np.int64)
    for row, name in enumerate(names):
        i = at.get(name)
        if i is not None:
            times[row] = summary.times[i]
            runs[row] = summary.shape.runs[i]
    return times, runs


def _sequence_changes(a: Sequence[str], b: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """The pass names ``b`` runs that ``a`` never does (added), the other way (removed), and those
    both run but in other places or another number of times (moved), each once, in order."""
    matcher = SequenceMatcher(a=list(a), b=list(b), autojunk=False)
    inserted: list[str] = []
    deleted: list[str] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("delete", "replace"):
            deleted.extend(a[i1:i2])
        if tag in ("insert", "replace"):
            inserted.extend(b[j1:j2])
    in_a, in_b = set(a), set(b)
    added = [name for name in dict.fromkeys(inserted) if name not in in_a]
    removed = [name for name in dict.fromkeys(deleted) if name not in in_b]
    moved = [name for name in dict.fromkeys((*deleted, *inserted)) if name in in_a and name in in_b]
    return tuple(added), tuple(removed), tuple(moved)
