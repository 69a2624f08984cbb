"""What changed between two sets of kernel launches: launches matched by process, kernel and
grid, in order, and for each pair, per event name, the count per launch, the p50 and p99 of a
range's own time (the ranges nested in it left out, so that a slowed range is not also blamed on
the range around it), the largest change of the time spent in it first and the markedly slower
flagged; the blocks whose time changed most; and the payload ranges that changed.

Pure: it compares :class:`LaunchSummary` values (a launch reduced to a few numbers per event
name and one per block), so that ``iket-tui diff`` and the UI's comparison share one way of
matching, ordering and flagging.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from iket_tui.model.launch_coverage import COMPLETE
from iket_tui.model.launches import SPAN_NO_END, SPAN_NO_START, Launch, Spans, pair_ranges
from iket_tui.model.matching import pair_in_order

RANGE_SLOWER_PCT: Final = 20.0
"""A range is flagged slower when its own p50 or p99 grew by this much (percent) ..."""
RANGE_MIN_NS: Final = 100
"""... and by at least this much: a few steps of the GPU's timer (32 ns on an H200) are noise."""
BLOCKS_LISTED: Final = 10
"""The blocks whose time changed most that a comparison keeps."""
NO_START_NAME: Final = "(end without a start)"


@dataclass(frozen=True)
class EventSummary:
    """One event name of a launch: ranges (own time of those closed) or marks, with their payload range."""

    name: str
    kind: str
    """``range`` or ``mark``."""
    count: int
    unbalanced: int
    """Ranges without an end, or ends without a start."""
    p50_ns: int | None
    """The own time of its closed ranges (those nested in each left out), at the median ..."""
    p99_ns: int | None
    """... and at the 99th percentile; None for a mark, or a range never closed."""
    total_ns: int
    """The own time of all its closed ranges together (0 for a mark)."""
    payload: tuple[float, float] | None
    """The lowest and highest payload, where its events carry one."""

    @property
    def key(self) -> tuple[str, str]:
        return (self.name, self.kind)


@dataclass(frozen=True, eq=False)
class LaunchSummary:
    """One launch as a comparison reads it: whose, which kernel and grid, how long, whether all of
    it arrived, each event name summarised, and each block's time (first event to last)."""

    process: str
    """As :func:`~iket_tui.model.compare.process_name` says it."""
    launch: int
    """The launch's number (the low bits of the GPU's grid id), as the kernels screen and ``dump`` name it."""
    kernel: str
    grid: tuple[int, int, int]
    compile: int | None
    duration_ns: int
    status: str
    """``complete``, ``partial 62%``, ... (the kernels screen's status)."""
    complete: bool
    events: tuple[EventSummary, ...]
    """In the order of their event ids."""
    blocks: np.ndarray[Any, np.dtype[np.int64]]
    """Each block's (x, y, z) packed by :func:`block_key`, ascending."""
    block_ns: np.ndarray[Any, np.dtype[np.int64]]
    """Each of :attr:`blocks`' time, from its first event to its last."""

    @property
    def key(self) -> tuple[str, str, tuple[int, int, int]]:
        return (self.process, self.kernel, self.grid)

    @property
    def grid_words(self) -> str:
        return "x".join(str(n) for n in self.grid)

    @property
    def title(self) -> str:
        return f"{self.process} launch {self.launch} {self.kernel} grid {self.grid_words}"


def block_key(x: int, y: int, z: int) -> int:
    """A block's (x, y, z) as one number (x below 2^31, y and z below 2^16, as CUDA allows)."""
    return x | y << 31 | z << 47


def block_words(key: int) -> str:
    """A block as the kernels screen names it: ``(3,0,0)``."""
    return f"({key & 0x7FFFFFFF},{(key >> 31) & 0xFFFF},{key >> 47})"


def summarize_launch(
    launch: Launch,
    process: str,
    events: np.ndarray[Any, np.dtype[np.void]] | None = None,
    grid: tuple[int, int, int] | None = None,
) -> LaunchSummary:
    """``launch`` reduced to what a comparison reads. ``events``: its events where the launch no
    longer holds them (an export's spool), with ``grid`` the shape they show."""
    spans = launch.spans() if events is None else pair_ranges(events, launch.first_ns)
    x, y, z = (spans.blocks[:, i].astype(np.int64) for i in range(3))
    keys = x | y << 31 | z << 47
    order = np.argsort(keys, kind="stable")
    status = launch.status()
    return LaunchSummary(
        process=process,
        launch=launch.key[3],
        kernel=launch.kernel,
        grid=grid if grid is not None else launch.grid(),
        compile=launch.compile,
        duration_ns=launch.duration_ns,
        status=status.short(),
        complete=status.state == COMPLETE,
        events=_event_summaries(launch, spans),
        blocks=keys[order],
        block_ns=(spans.block_end_ns - spans.block_start_ns)[order],
    )


def own_ns(spans: Spans) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Each span's own time: its duration less the durations of the closed ranges directly
    nested in it (its warp's next level in); -1 for a span not closed."""
    rows = spans.spans
    closed = (rows["flags"] & (SPAN_NO_END | SPAN_NO_START)) == 0
    duration = np.where(closed, rows["end_ns"] - rows["start_ns"], -1).astype(np.int64)
    own = duration.copy()
    started = np.flatnonzero((rows["flags"] & SPAN_NO_START) == 0)
    if not len(started):
        return own
    lane = rows["block"][started].astype(np.int64) * spans.max_warps + rows["warp"][started]
    depth = rows["depth"][started].astype(np.int64)
    order = np.lexsort((depth, rows["start_ns"][started], lane))  # by warp, then start, outer first
    at, lane, depth = started[order], lane[order], depth[order]
    positions = np.arange(len(at))
    for level in range(1, int(depth.max()) + 1 if len(depth) else 1):
        # The latest span one level out, at or before each position: the parent of those one level in.
        parent = np.maximum.accumulate(np.where(depth == level - 1, positions, -1))
        child = np.flatnonzero((depth == level) & (parent >= 0))
        child = child[lane[parent[child]] == lane[child]]
        child = child[closed[at[child]]]
        np.add.at(own, at[parent[child]], -duration[at[child]])
    return np.where(closed, np.maximum(own, 0), -1)


def _event_summaries(launch: Launch, spans: Spans) -> tuple[EventSummary, ...]:
    """Per event name of ``launch``: ranges (their own times) and marks, as
    :func:`~iket_tui.model.launches.event_stats` lists them."""
    rows = spans.spans
    own = own_ns(spans)
    marks = spans.marks
    found: list[EventSummary] = []
    for event in sorted({int(e) for e in rows["event"]} | {int(e) for e in marks["event"]}):
        name = launch.event_name(event) if event else NO_START_NAME
        mine = rows["event"] == event
        if mine.any():
            times = own[mine]
            timed = times[times >= 0]
            found.append(
                EventSummary(
                    name,
                    "range",
                    int(mine.sum()),
                    int((times < 0).sum()),
                    round(float(np.percentile(timed, 50))) if len(timed) else None,
                    round(float(np.percentile(timed, 99))) if len(timed) else None,
                    int(timed.sum()),
                    _payload_range(rows[mine]),
                )
            )
        of_mark = marks[marks["event"] == event]
        if len(of_mark):
            found.append(EventSummary(name, "mark", len(of_mark), 0, None, None, 0, _payload_range(of_mark)))
    return tuple(found)


def _payload_range(rows: np.ndarray[Any, np.dtype[np.void]]) -> tuple[float, float] | None:
    """The lowest and highest payload of ``rows``, read as their type says; None without one."""
    kinds = rows["payload_type"]
    kind = int(kinds[0]) if len(kinds) else 0
    if kind == 0 or not (kinds == kind).all():
        return None
    raw = np.ascontiguousarray(rows["payload"])
    values = raw.view("<i4") if kind == 1 else raw.view("<f4") if kind == 3 else raw
    return float(values.min()), float(values.max())


@dataclass(frozen=True)
class EventChange:
    """One event name in each launch (None where it has none there), flagged slower when its own
    p50 or p99 grew past the thresholds."""

    name: str
    kind: str
    before: EventSummary | None
    after: EventSummary | None
    slower: bool

    @property
    def change_ns(self) -> int:
        """How much more of the launch's time went to it (its ranges' own time, all together)."""
        return (self.after.total_ns if self.after else 0) - (self.before.total_ns if self.before else 0)

    @property
    def count_changed(self) -> bool:
        return (self.before.count if self.before else 0) != (self.after.count if self.after else 0)

    @property
    def payload_changed(self) -> bool:
        return (self.before.payload if self.before else None) != (self.after.payload if self.after else None)


@dataclass(frozen=True)
class BlockChange:
    """One block's time (first event to last) in each launch."""

    block: int
    """Packed by :func:`block_key`; :func:`block_words` names it."""
    before_ns: int
    after_ns: int

    @property
    def change_ns(self) -> int:
        return self.after_ns - self.before_ns


@dataclass(frozen=True, eq=False)
class LaunchChange:
    """What changed from launch ``a`` to launch ``b``: each event name, the largest change of the
    time spent in it first; the blocks whose time changed most, the largest first."""

    a: LaunchSummary
    b: LaunchSummary
    events: tuple[EventChange, ...]
    blocks: tuple[BlockChange, ...]

    @property
    def slower(self) -> tuple[EventChange, ...]:
        return tuple(change for change in self.events if change.slower)

    @property
    def counts(self) -> tuple[EventChange, ...]:
        """The event names that ran another number of times per launch."""
        return tuple(change for change in self.events if change.count_changed)

    @property
    def payloads(self) -> tuple[EventChange, ...]:
        """The event names whose payload range changed."""
        return tuple(change for change in self.events if change.payload_changed)

    def flags(self) -> tuple[str, ...]:
        """What this pair flags, among :data:`KERNEL_FLAGS`."""
        found = (
            ("range-slower", bool(self.slower)),
            ("count-changed", bool(self.counts)),
            ("payload-changed", bool(self.payloads)),
        )
        return tuple(name for name, flagged in found if flagged)


KERNEL_FLAGS: Final = ("range-slower", "count-changed", "payload-changed")
"""What a comparison of launches can flag, in the words of ``--fail-on`` (launches without a
match are ``unmatched``, as compiles are)."""


@dataclass(frozen=True)
class LaunchComparison:
    """Every matched pair of launches, in the order of the first side's, and those of each side
    that found no match."""

    pairs: tuple[LaunchChange, ...] = ()
    only_a: tuple[LaunchSummary, ...] = ()
    only_b: tuple[LaunchSummary, ...] = ()


def compare_launches(
    a: Iterable[LaunchSummary],
    b: Iterable[LaunchSummary],
    *,
    slower_pct: float = RANGE_SLOWER_PCT,
    min_ns: int = RANGE_MIN_NS,
) -> LaunchComparison:
    """Match ``a``'s launches with ``b``'s by process, kernel and grid, the n-th of a key in ``a``
    with the n-th in ``b``, and compare each pair."""
    matched, only_a, only_b = pair_in_order(a, b, key=lambda summary: summary.key)
    pairs = [compare_launch(x, y, slower_pct=slower_pct, min_ns=min_ns) for x, y in matched]
    return LaunchComparison(tuple(pairs), tuple(only_a), tuple(only_b))


def compare_launch(
    a: LaunchSummary, b: LaunchSummary, *, slower_pct: float = RANGE_SLOWER_PCT, min_ns: int = RANGE_MIN_NS
) -> LaunchChange:
    """What changed from launch ``a`` to launch ``b``: event names matched by name and kind,
    blocks by their place in the grid."""
    before = {event.key: event for event in a.events}
    after = {event.key: event for event in b.events}
    keys = list(dict.fromkeys((*before, *after)))
    events = [
        EventChange(
            name,
            kind,
            before.get((name, kind)),
            after.get((name, kind)),
            _slower(before.get((name, kind)), after.get((name, kind)), slower_pct, min_ns),
        )
        for name, kind in keys
    ]
    # The largest change of time spent first; among equals, those flagged, then in event order.
    ranked = sorted(range(len(events)), key=lambda i: (-abs(events[i].change_ns), not events[i].slower, i))
    return LaunchChange(a, b, tuple(events[i] for i in ranked), _block_changes(a, b))


def _slower(before: EventSummary | None, after: EventSummary | None, slower_pct: float, min_ns: int) -> bool:
    if before is None or after is None:
        return False
    for old, new in ((before.p50_ns, after.p50_ns), (before.p99_ns, after.p99_ns)):
        if old is not None and new is not None and new - old >= min_ns and (new - old) * 100.0 >= slower_pct * old:
            return True
    return False


def _block_changes(a: LaunchSummary, b: LaunchSummary) -> tuple[BlockChange, ...]:
    """The blocks of both launches whose time changed most, the largest change first."""
    shared, at_a, at_b = np.intersect1d(a.blocks, b.blocks, assume_unique=True, return_indices=True)
    before, after = a.block_ns[at_a], b.block_ns[at_b]
    change = after - before
    top = np.argsort(-np.abs(change), kind="stable")[:BLOCKS_LISTED]
    return tuple(
        BlockChange(int(shared[i]), int(before[i]), int(after[i])) for i in top.tolist() if int(change[i]) != 0
    )
