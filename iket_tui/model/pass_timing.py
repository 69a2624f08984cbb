"""Where compile time goes, per pass name: how often each pass ran across the compiles of a
session, how long its runs took, its share of compile time and how many of its runs failed;
and, for one compile, its slowest passes.

Two times per run (see :mod:`iket_tui.model.timing`): inclusive (from its start to its end) and
self (inclusive minus the passes nested in it). Total, mean and max are inclusive: what a run
took as a whole. Shares are self time over compile time (the sum of the compiles' durations),
so a nested pass is not counted twice: the shares of all names add up to the share of compile
time spent in passes, and passes, codegen and the rest add up to the whole. A pass still
running counts with the time it has run so far and is counted as running.

Kept incrementally: a compile that has ended is timed once (again only if it changes later);
only compiles still open are timed afresh on each refresh.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from iket_tui.model.nodes import FAILED, INCOMPLETE, CompileNode, PassNode
from iket_tui.model.pass_tree import PassTree
from iket_tui.model.timing import codegen_ns, inclusive_ns, self_ns


class PassStats:
    """The runs of one pass name: count, inclusive total and max, self total, failures."""

    __slots__ = ("count", "failed", "incomplete", "max_compile", "max_ns", "name", "running", "self_ns", "total_ns")

    def __init__(self, name: str) -> None:
        self.name = name
        self.count = 0
        self.total_ns = 0  # inclusive
        self.self_ns = 0
        self.max_ns = 0  # the longest run, inclusive
        self.max_compile: CompileNode | None = None  # the compile of the longest run
        self.failed = 0  # runs the compile failed in
        self.incomplete = 0  # runs that never finished (an exception further in, or the stream ended)
        self.running = 0  # runs still going, counted with their time so far

    @property
    def mean_ns(self) -> int:
        return self.total_ns // self.count if self.count else 0

    @property
    def unfinished(self) -> int:
        """Runs that failed or never finished."""
        return self.failed + self.incomplete

    def add_run(self, node: PassNode, inclusive: int, own: int) -> None:
        self.count += 1
        self.total_ns += inclusive
        self.self_ns += own
        if inclusive > self.max_ns or self.max_compile is None:
            self.max_ns = inclusive
            self.max_compile = node.compile
        status = node.status
        if status is FAILED:
            self.failed += 1
        elif status is INCOMPLETE:
            self.incomplete += 1
        if node.duration_ns is None:
            self.running += 1

    def add(self, other: PassStats) -> None:
        self.count += other.count
        self.total_ns += other.total_ns
        self.self_ns += other.self_ns
        if other.max_ns > self.max_ns or self.max_compile is None:
            self.max_ns = other.max_ns
            self.max_compile = other.max_compile
        self.failed += other.failed
        self.incomplete += other.incomplete
        self.running += other.running

    def copy(self) -> PassStats:
        twin = PassStats(self.name)
        twin.add(self)
        return twin


@dataclass(frozen=True, slots=True)
class CompileTimes:
    """Where one compile's time went: its duration, the self time of its passes (so, the
    time in passes), its codegen, and its pass runs."""

    compile_ns: int
    pass_ns: int
    codegen_ns: int
    runs: int
    running: int
    unfinished: int

    @property
    def other_ns(self) -> int:
        """Time outside passes and codegen (Python, caching, waiting)."""
        return max(0, self.compile_ns - self.pass_ns - self.codegen_ns)


SORT_KEYS: Final[dict[str, Callable[[PassStats], int | str]]] = {
    "name": lambda stats: stats.name,
    "count": lambda stats: stats.count,
    "total": lambda stats: stats.total_ns,
    "self": lambda stats: stats.self_ns,
    "mean": lambda stats: stats.mean_ns,
    "max": lambda stats: stats.max_ns,
    "share": lambda stats: stats.self_ns,  # every share has the same denominator
    "unfinished": lambda stats: stats.unfinished,
}
"""What the rows can be sorted by."""


@dataclass(frozen=True, slots=True)
class TimingSummary:
    """Every pass name's statistics over every compile of the tree, at ``now_ns``."""

    by_name: dict[str, PassStats]
    compiles: int
    runs: int
    running: int
    compile_ns: int  # the sum of the compiles' durations (of the open ones: so far)
    pass_ns: int  # self time of every pass run: time in passes, nested ones counted once
    codegen_ns: int
    now_ns: int

    @property
    def other_ns(self) -> int:
        return max(0, self.compile_ns - self.pass_ns - self.codegen_ns)

    def share(self, ns: int) -> float:
        """``ns`` as a fraction of compile time (0 before any compile took time)."""
        return ns / self.compile_ns if self.compile_ns else 0.0

    def rows(self, by: str = "self", *, descending: bool = True) -> list[PassStats]:
        """The names' statistics sorted by one of :data:`SORT_KEYS`; ties in name order."""
        key = SORT_KEYS[by]
        rows = sorted(self.by_name.values(), key=lambda stats: stats.name)
        rows.sort(key=key, reverse=descending)  # stable: equal keys stay in name order
        return rows


def _time_compile(comp: CompileNode, now_ns: int, into: dict[str, PassStats]) -> CompileTimes:
    """Where the compile's time went; its pass runs are added to ``into`` (by name), unless it
    was summarised: then they are in the tree's :attr:`~PassTree.summarised_stats` already."""
    if comp.summary is not None:
        return comp.summary
    return time_compile(comp, now_ns, into)


def time_compile(comp: CompileNode, now_ns: int, into: dict[str, PassStats]) -> CompileTimes:
    """Add the compile's pass runs to ``into`` (by name) and say where its time went."""
    runs = running = unfinished = pass_total = 0
    for ctx in comp.context_order:
        for node in ctx.passes.values():
            own = self_ns(node, now_ns) or 0
            inclusive = node.duration_ns
            if inclusive is None:
                inclusive = inclusive_ns(node, now_ns) or 0
                running += 1
            elif node.status is FAILED or node.status is INCOMPLETE:
                unfinished += 1
            stats = into.get(node.name)
            if stats is None:
                stats = into[node.name] = PassStats(node.name)
            stats.add_run(node, inclusive, own)
            runs += 1
            pass_total += own
    return CompileTimes(
        compile_ns=inclusive_ns(comp, now_ns) or 0,
        pass_ns=pass_total,
        codegen_ns=codegen_ns(comp, now_ns),
        runs=runs,
        running=running,
        unfinished=unfinished,
    )


class PassTiming:
    """Per pass name statistics over every compile of a :class:`PassTree`, cheap to ask for
    again as the tree grows: an ended compile is timed once, when first seen ended (and again
    only if it changes afterwards), and the compiles still open on each call."""

    def __init__(self, tree: PassTree) -> None:
        self.tree = tree
        self._settled: dict[str, PassStats] = {}  # the ended compiles' runs, by name
        self._settled_times: list[CompileTimes | None] = []  # by compile position; None: still open
        self._settled_keys: list[tuple[int, int] | None] = []  # (version, shape) each was timed at
        self._open: list[int] = []  # positions of compiles not settled
        self._totals = (0, 0, 0, 0)  # compile, pass and codegen ns, runs of the settled compiles
        self._scanned = -1  # tree version of the last scan
        self._last: TimingSummary | None = None
        self._last_version = -1

    def summary(self, now_ns: int) -> TimingSummary:
        """Every pass name's statistics, running passes timed up to ``now_ns``."""
        tree = self.tree
        if tree.version != self._scanned:
            self._scan()
        last = self._last
        if last is not None and self._last_version == tree.version and (last.now_ns == now_ns or not self._open):
            return last  # nothing changed, or nothing is open that the clock could move
        by_name = {name: stats.copy() for name, stats in self._settled.items()}
        for name, stats in tree.summarised_stats.items():  # compiles whose passes were let go
            mine = by_name.get(name)
            if mine is None:
                by_name[name] = stats.copy()
            else:
                mine.add(stats)
        compile_total, pass_total, codegen_total, runs = self._totals
        running = 0
        for position in self._open:
            times = _time_compile(tree.compiles[position], now_ns, by_name)
            compile_total += times.compile_ns
            pass_total += times.pass_ns
            codegen_total += times.codegen_ns
            runs += times.runs
            running += times.running
        summary = TimingSummary(
            by_name=by_name,
            compiles=len(tree.compiles),
            runs=runs,
            running=running,
            compile_ns=compile_total,
            pass_ns=pass_total,
            codegen_ns=codegen_total,
            now_ns=now_ns,
        )
        self._last, self._last_version = summary, tree.version
        return summary

    def compile_times(self, comp: CompileNode, now_ns: int) -> CompileTimes:
        """Where one compile's time went (kept for ended compiles, timed afresh for open ones)."""
        if self.tree.version != self._scanned:
            self._scan()
        position = comp.position
        kept = self._settled_times[position] if position < len(self._settled_times) else None
        return kept if kept is not None else _time_compile(comp, now_ns, {})

    def _scan(self) -> None:
        """Settle compiles that have ended since the last scan; start over if one already
        settled has changed since (a late message about an ended compile: rare). A pass
        reported as started after its compile ended counts with its time up to the latest
        time seen then, until its end arrives and changes the compile."""
        tree = self.tree
        compiles = tree.compiles
        keys = self._settled_keys
        for position, key in enumerate(keys):
            comp = compiles[position]
            if key is not None and key != (comp.version, comp.shape):
                self._forget()
                break
        keys = self._settled_keys
        known = len(keys)
        keys.extend([None] * (len(compiles) - known))
        self._settled_times.extend([None] * (len(compiles) - known))
        candidates = [*self._open, *range(known, len(compiles))]
        compile_total, pass_total, codegen_total, runs = self._totals
        still_open: list[int] = []
        for position in candidates:
            comp = compiles[position]
            if comp.end_ns is None:
                still_open.append(position)
                continue
            times = _time_compile(comp, tree.last_t_ns, self._settled)
            keys[position] = (comp.version, comp.shape)
            self._settled_times[position] = times
            compile_total += times.compile_ns
            pass_total += times.pass_ns
            codegen_total += times.codegen_ns
            runs += times.runs
        self._totals = (compile_total, pass_total, codegen_total, runs)
        self._open = still_open
        self._scanned = tree.version

    def _forget(self) -> None:
        self._settled = {}
        self._settled_times = []
        self._settled_keys = []
        self._open = []
        self._totals = (0, 0, 0, 0)


@dataclass(frozen=True, slots=True)
class PassRun:
    """One run of a pass in one compile, timed up to some now if it is still running."""

    node: PassNode
    inclusive_ns: int
    self_ns: int

    @property
    def running(self) -> bool:
        return self.node.duration_ns is None


def slowest_passes(comp: CompileNode, now_ns: int, limit: int = 10) -> list[PassRun]:
    """The compile's ``limit`` pass runs with the most self time, slowest first (ties: the
    earlier run first)."""
    runs = (
        PassRun(node, inclusive_ns(node, now_ns) or 0, self_ns(node, now_ns) or 0)
        for ctx in comp.context_order
        for node in ctx.passes.values()
    )
    return heapq.nlargest(limit, runs, key=lambda run: (run.self_ns, -run.node.order))
