"""One kernel launch and what each of its warps did: its decoded events, and ranges paired into
spans, vectorised with numpy (no Python runs per event).

A launch is told apart within its process by (ring, module, kernel index, launch number): the launch number is
the low 32 bits of the GPU's ``%gridid``, written into every chunk. Ranges pair per warp,
stack-wise, as IKET defines them: an end closes the innermost open range of its warp. A range
whose end never came (the warp never reached it, or the records were lost) and an end without a
start are kept and flagged, not dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from iket_tui.model.launch_coverage import Coverage, LaunchStatus
from iket_tui.model.nodes import ProcessNode
from iket_tui.model.running_kernels import WarpProgress
from iket_tui.ring.events import ModuleEvents
from iket_tui.ring.layout import EVENT_DTYPE, EVENT_WARP_ROW, KIND_END, KIND_MARK, KIND_MASK, KIND_START, KIND_UNKNOWN

HELD_DTYPE: Final = np.dtype(
    [
        ("t_ns", "<u8"),
        ("payload", "<u4"),
        ("event", "u1"),
        ("kind", "u1"),
        ("payload_type", "u1"),
        ("block_x", "<u4"),
        ("block_y", "<u2"),
        ("block_z", "<u2"),
        ("sm", "u1"),
        ("warp", "u1"),
    ]
)
"""How a launch keeps its events (25 bytes each, against 32 decoded): without the fields that
are the same for every event of a launch (module, kernel, launch number), which its key holds.
Bytes 0..14 are the decoded event's 0..14, 15..22 its 20..27 and 23..24 its 30..31."""
_HELD_BYTES: Final = ((slice(0, 15), slice(0, 15)), (slice(15, 23), slice(20, 28)), (slice(23, 25), slice(30, 32)))
"""(held bytes, decoded bytes) copied between the two layouts."""

LaunchKey = tuple[int, int, int, int]
"""(ring id, module id, kernel index, launch number)."""

SPAN_DTYPE = np.dtype(
    [
        ("start_ns", "<i8"),  # relative to the launch's first event; -1: an end without a start
        ("end_ns", "<i8"),  # -1: a start without an end
        ("event", "u1"),  # the range's event id (the start's; 0 for an end without a start)
        ("depth", "u1"),  # nesting depth in its warp, 0 outermost
        ("payload_type", "u1"),
        ("flags", "u1"),  # SPAN_NO_END, SPAN_NO_START
        ("payload", "<u4"),  # the start's payload bits
        ("block", "<u4"),  # index of the block in Launch.blocks
        ("warp", "u1"),
        ("sm", "u1"),
    ]
)
"""One range of one warp."""
SPAN_NO_END = 1
SPAN_NO_START = 2

MARK_DTYPE = np.dtype(
    [
        ("t_ns", "<i8"),  # relative to the launch's first event
        ("event", "u1"),
        ("payload_type", "u1"),
        ("warp", "u1"),
        ("sm", "u1"),
        ("payload", "<u4"),
        ("block", "<u4"),
    ]
)
"""One mark of one warp."""


@dataclass
class Spans:
    """A launch's ranges and marks, and the blocks they belong to."""

    spans: np.ndarray[Any, np.dtype[np.void]]
    marks: np.ndarray[Any, np.dtype[np.void]]
    blocks: np.ndarray[Any, np.dtype[np.uint32]]
    """Shape (n, 3): (x, y, z) of block ``i``, in (z, y, x) order."""
    warps: np.ndarray[Any, np.dtype[np.uint8]]
    """Per block, how many warps it has (the highest warp index seen, plus one)."""
    depth: np.ndarray[Any, np.dtype[np.uint8]]
    """Per (block, warp) pair, flattened as ``block * max_warps + warp``: the deepest nesting, plus one."""
    max_warps: int
    unbalanced: int
    """Ranges without an end plus ends without a start."""
    block_start_ns: np.ndarray[Any, np.dtype[np.int64]]
    """Per block, its first event (relative to the launch's first event)."""
    block_end_ns: np.ndarray[Any, np.dtype[np.int64]]
    block_sm: np.ndarray[Any, np.dtype[np.uint8]]
    """Per block, the SM it ran on."""


@dataclass
class Launch:
    """One kernel launch as the records of it arrive."""

    key: LaunchKey
    kernel: str
    module: ModuleEvents | None
    order: int
    compile: int | None = None
    process: ProcessNode | None = None
    """The process that ran it, in a session that names its processes (None for a recording's sample)."""
    parts: list[np.ndarray[Any, np.dtype[np.void]]] = field(default_factory=list)
    """The events it holds, in :data:`HELD_DTYPE`, one array per batch (:meth:`events` reads them)."""
    records: int = 0
    """Its events that arrived: rows that only say a warp began or ended (where that came in a
    later drain than the warp's last event) are not events."""
    rows: int = 0
    """Decoded rows kept for it (events and those warp rows), until it is let go."""
    first_ns: int = 0
    last_ns: int = 0
    version: int = 0
    evicted: bool = False
    """Its events were let go to stay within the timeline's bound: only its summary is left."""
    progress: WarpProgress = field(default_factory=WarpProgress)
    """Its warps that began and have not ended, with their last events (kept after eviction:
    one row per unfinished warp, not per event)."""
    coverage: Coverage = field(default_factory=Coverage)
    """Which of its warps arrived whole, what it lost and why (kept after eviction: a row per
    open warp and two counts per block, not per event)."""
    _grid: tuple[int, int, int] | None = None
    _held_grid: tuple[int, int, int] = (0, 0, 0)
    _spans: tuple[int, Spans] | None = None

    @property
    def duration_ns(self) -> int:
        return self.last_ns - self.first_ns

    @property
    def running(self) -> bool:
        """Some warp of it began and has not ended (as far as the records that arrived say)."""
        return self.progress.unfinished > 0

    def status(self) -> LaunchStatus:
        """Complete, running, partial (how much, why) or not traced: see :mod:`~iket_tui.model.launch_coverage`."""
        return self.coverage.status(running=self.running)

    def blocks(self) -> int:
        """Blocks in the grid seen so far."""
        x, y, z = self.grid()
        return x * y * z

    def add(self, events: np.ndarray[Any, np.dtype[np.void]]) -> None:
        """Take in a batch of its events, decoded or as :func:`held_events` gives them (kept as
        they are then: a timeline packs a whole batch at once)."""
        if events.dtype != HELD_DTYPE:
            events = held_events(events)
        self.progress.add(events)
        first, last = int(events["t_ns"].min()), int(events["t_ns"].max())
        real = len(events) - int(np.count_nonzero(events["kind"] & EVENT_WARP_ROW))
        if self.evicted:
            self.records += real  # late records of a launch already let go: counted, and their warps followed
            self.last_ns = max(self.last_ns, last)
            return
        self.first_ns = first if not self.version else min(self.first_ns, first)  # version 0: nothing added yet
        self.last_ns = max(self.last_ns, last)
        self.records += real
        self.rows += len(events)
        self.parts.append(events)
        x, y, z = self._held_grid
        self._held_grid = (
            max(x, int(events["block_x"].max()) + 1),
            max(y, int(events["block_y"].max()) + 1),
            max(z, int(events["block_z"].max()) + 1),
        )
        self.version += 1

    def events(self) -> np.ndarray[Any, np.dtype[np.void]]:
        """Every event it holds, in arrival order (:data:`~iket_tui.ring.layout.EVENT_DTYPE`).
        Made afresh on each call from what it keeps, so that only the launches being looked at
        take the decoded size; :meth:`spans` keeps what it pairs from them."""
        _, module, kernel, launch = self.key
        out = np.empty(sum(len(part) for part in self.parts), dtype=EVENT_DTYPE)
        out["kernel"], out["launch"], out["module"] = kernel, launch, module
        decoded = out.view(np.uint8).reshape(len(out), EVENT_DTYPE.itemsize)
        at = 0
        for part in self.parts:
            held = part.view(np.uint8).reshape(len(part), HELD_DTYPE.itemsize)
            for to, source in _HELD_BYTES:
                decoded[at : at + len(part), source] = held[:, to]
            at += len(part)
        return out

    def release(self) -> list[np.ndarray[Any, np.dtype[np.void]]]:
        """Hand over the events it holds (decoded, as :meth:`events` gives them), which are kept
        elsewhere from now on (an export keeps them on disk): its rows count only those it still
        holds; its summary stays."""
        parts = [self.events()] if self.parts else []
        self.parts = []
        self.rows -= sum(len(part) for part in parts)
        self._held_grid, self._spans = (0, 0, 0), None
        self.version += 1
        return parts

    def evict(self) -> None:
        """Let the events go, keeping the summary (records, times, grid)."""
        self._grid = self.grid()
        self.parts, self._spans = [], None
        self.evicted = True
        self.version += 1

    def grid(self) -> tuple[int, int, int]:
        """The grid shape seen so far: highest block index plus one, per dimension, over the
        events it holds (kept as it was when they were let go)."""
        if self._grid is not None:
            return self._grid
        return self._held_grid if self.parts else (0, 0, 0)

    def unbalanced_if_known(self) -> int | None:
        """Unbalanced ranges, if the spans of this version were already paired (cheap to ask)."""
        if self._spans is None or self._spans[0] != self.version:
            return None
        return self._spans[1].unbalanced

    def spans(self) -> Spans:
        """The launch's ranges and marks (computed once per version)."""
        if self._spans is None or self._spans[0] != self.version:
            self._spans = (self.version, pair_ranges(self.events(), self.first_ns))
        return self._spans[1]

    def event_name(self, event: int) -> str:
        if self.module is not None:
            for info in self.module.events:
                if info.event_id == event:
                    return info.name
        return f"event {event}"


def held_events(events: np.ndarray[Any, np.dtype[np.void]]) -> np.ndarray[Any, np.dtype[np.void]]:
    """Decoded ``events`` (:data:`~iket_tui.ring.layout.EVENT_DTYPE`) as a launch keeps them
    (:data:`HELD_DTYPE`): what :meth:`Launch.add` takes."""
    held = np.empty(len(events), dtype=HELD_DTYPE)
    decoded = np.ascontiguousarray(events).view(np.uint8).reshape(len(events), EVENT_DTYPE.itemsize)
    into = held.view(np.uint8).reshape(len(held), HELD_DTYPE.itemsize)
    for to, source in _HELD_BYTES:
        into[:, to] = decoded[:, source]
    return held


def pair_ranges(events: np.ndarray[Any, np.dtype[np.void]], origin_ns: int) -> Spans:
    """Pair the range starts and ends of ``events`` per warp, stack-wise; marks alongside."""
    order = np.lexsort((events["t_ns"], events["warp"], events["block_x"], events["block_y"], events["block_z"]))
    ordered = events[order]
    block_keys = np.stack([ordered["block_z"], ordered["block_y"], ordered["block_x"]], axis=1).astype(np.int64)
    blocks_zyx, block_of = np.unique(block_keys, axis=0, return_inverse=True)
    block_of = block_of.reshape(-1).astype(np.int64)
    warp = ordered["warp"].astype(np.int64)
    max_warps = int(warp.max()) + 1 if len(warp) else 1
    lane = block_of * max_warps + warp  # one id per (block, warp), ascending in this order
    kind = ordered["kind"] & KIND_MASK
    t_ns = ordered["t_ns"].astype(np.int64) - origin_ns

    delta = np.where(kind == KIND_START, 1, np.where(kind == KIND_END, -1, 0)).astype(np.int64)
    running = np.cumsum(delta)
    lane_start = np.ones(len(lane), dtype=bool)
    lane_start[1:] = lane[1:] != lane[:-1]
    base = np.maximum.accumulate(np.where(lane_start, np.arange(len(lane)), 0))
    level = running - (running[base] - delta[base])  # running depth within the lane, after each event
    # A start opens level `level`; an end closes level `level + 1`.
    is_range = kind != KIND_MARK
    closes = np.where(kind == KIND_END, level + 1, level)
    ranged = np.flatnonzero(is_range & ((kind == KIND_START) | (kind == KIND_END)))
    group = np.lexsort((ranged, closes[ranged], lane[ranged]))  # by lane, then level, then time order
    seq = ranged[group]
    same_group = np.zeros(len(seq), dtype=bool)
    same_group[:-1] = (lane[seq[1:]] == lane[seq[:-1]]) & (closes[seq[1:]] == closes[seq[:-1]])
    starts = kind[seq] == KIND_START
    next_is_end = np.zeros(len(seq), dtype=bool)
    next_is_end[:-1] = kind[seq[1:]] == KIND_END
    paired = starts & same_group & next_is_end
    start_at = seq[paired]
    end_at = seq[np.flatnonzero(paired) + 1]
    end_used = np.zeros(len(seq), dtype=bool)
    end_used[np.flatnonzero(paired) + 1] = True
    open_at = seq[starts & ~paired]
    orphan_at = seq[~starts & ~end_used]

    # Depth from the lane's lowest level, so that a warp whose first event is an orphan end draws from 0.
    lane_min = np.full(int(lane.max()) + 1 if len(lane) else 1, np.iinfo(np.int64).max)
    np.minimum.at(lane_min, lane[ranged], closes[ranged])

    n = len(start_at) + len(open_at) + len(orphan_at)
    spans = np.zeros(n, dtype=SPAN_DTYPE)
    first = np.concatenate([start_at, open_at, orphan_at])
    spans["start_ns"] = np.concatenate([t_ns[start_at], t_ns[open_at], np.full(len(orphan_at), -1)])
    spans["end_ns"] = np.concatenate([t_ns[end_at], np.full(len(open_at), -1), t_ns[orphan_at]])
    spans["event"] = np.where(kind[first] == KIND_START, ordered["event"][first], 0)
    spans["depth"] = np.clip(closes[first] - lane_min[lane[first]], 0, 255)
    spans["flags"] = np.concatenate(
        [np.zeros(len(start_at), np.uint8), np.full(len(open_at), SPAN_NO_END), np.full(len(orphan_at), SPAN_NO_START)]
    )
    spans["payload"] = np.where(kind[first] == KIND_START, ordered["payload"][first], 0)
    spans["payload_type"] = np.where(kind[first] == KIND_START, ordered["payload_type"][first], 0)
    spans["block"] = block_of[first]
    spans["warp"] = warp[first]
    spans["sm"] = ordered["sm"][first]
    spans = spans[np.argsort(spans["block"].astype(np.int64) * max_warps + spans["warp"], kind="stable")]

    # An id without a table entry is a mark; a warp row (its begin or end, no event) is none.
    mark_at = np.flatnonzero(((kind == KIND_MARK) | (kind == KIND_UNKNOWN)) & ((ordered["kind"] & EVENT_WARP_ROW) == 0))
    marks = np.zeros(len(mark_at), dtype=MARK_DTYPE)
    for name in ("event", "payload_type", "payload", "warp", "sm"):
        marks[name] = ordered[name][mark_at]
    marks["t_ns"] = t_ns[mark_at]
    marks["block"] = block_of[mark_at]

    n_blocks = len(blocks_zyx)
    warps = np.zeros(n_blocks, dtype=np.uint8)
    if len(lane):
        np.maximum.at(warps, block_of, (warp + 1).astype(np.uint8))
    depth = np.zeros(max(1, n_blocks * max_warps), dtype=np.uint8)
    if n:
        np.maximum.at(depth, spans["block"].astype(np.int64) * max_warps + spans["warp"], spans["depth"] + 1)
    block_start = np.full(n_blocks, np.iinfo(np.int64).max, dtype=np.int64)
    block_end = np.zeros(n_blocks, dtype=np.int64)
    block_sm = np.zeros(n_blocks, dtype=np.uint8)
    if len(lane):
        np.minimum.at(block_start, block_of, t_ns)
        np.maximum.at(block_end, block_of, t_ns)
        block_sm[block_of] = ordered["sm"]
    return Spans(
        spans=spans,
        marks=marks,
        blocks=blocks_zyx[:, ::-1].astype(np.uint32),
        warps=warps,
        depth=depth,
        max_warps=max_warps,
        unbalanced=len(open_at) + len(orphan_at),
        block_start_ns=block_start,
        block_end_ns=block_end,
        block_sm=block_sm,
    )


@dataclass(frozen=True)
class EventStats:
    """One event name of a launch: how often, how long (ranges), which payload values."""

    name: str
    kind: str  # "range" or "mark"
    count: int
    unbalanced: int
    mean_ns: float | None
    p50_ns: float | None
    p99_ns: float | None
    max_ns: float | None
    payload_min: float | None
    payload_max: float | None


def event_stats(launch: Launch) -> list[EventStats]:
    """Per event name of ``launch``: ranges (closed ones timed) and marks, by name."""
    found = launch.spans()
    rows: list[EventStats] = []
    spans = found.spans
    for event in sorted({int(e) for e in spans["event"]} | {int(e) for e in found.marks["event"]}):
        name = launch.event_name(event) if event else "(end without a start)"
        of_span = spans[spans["event"] == event]
        if len(of_span):
            closed = of_span[of_span["flags"] == 0]
            durations = (closed["end_ns"] - closed["start_ns"]).astype(np.float64)
            low, high = _payload_range(of_span)
            rows.append(
                EventStats(
                    name,
                    "range",
                    len(of_span),
                    len(of_span) - len(closed),
                    float(durations.mean()) if len(durations) else None,
                    float(np.percentile(durations, 50)) if len(durations) else None,
                    float(np.percentile(durations, 99)) if len(durations) else None,
                    float(durations.max()) if len(durations) else None,
                    low,
                    high,
                )
            )
        of_mark = found.marks[found.marks["event"] == event]
        if len(of_mark):
            low, high = _payload_range(of_mark)
            rows.append(EventStats(name, "mark", len(of_mark), 0, None, None, None, None, low, high))
    return rows


def _payload_range(rows: np.ndarray[Any, np.dtype[np.void]]) -> tuple[float | None, float | None]:
    kinds = rows["payload_type"]
    kind = int(kinds[0]) if len(kinds) else 0
    if kind == 0 or not (kinds == kind).all():
        return None, None
    raw = np.ascontiguousarray(rows["payload"])
    values = raw.view("<i4") if kind == 1 else raw.view("<f4") if kind == 3 else raw
    return float(values.min()), float(values.max())
