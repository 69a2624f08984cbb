"""How much of a kernel launch arrived, and why the rest did not: each launch complete, running,
partial (what fraction, which blocks are missing, and why) or not traced.

A launch's shape travels in its drained chunks (ring version 3: grid and warps per block), so
the launch expects ``grid_x * grid_y * grid_z`` blocks of ``block_warps`` warps. A warp is
*whole* when its begin and its end arrived and nothing of it was lost (no chunk says its
earlier events were overwritten, and no loss names it). What was lost comes from three places:
the loss rows a drain sends with its batch (a warp named, with the reason), the chunks' lapped
flag, and the ring's counters, whose growth cannot name a launch (warps the ring went round
before even their names were read; records the agent read and dropped for this client) and is
therefore put on the launches running when it grew, without inventing which blocks.

Kept per launch, with numpy per batch (no Python per event or per warp): the warps still open
(seen, not ended and not lost for good), and per block seen how many of its warps arrived and
how many whole, so that the missing blocks can be listed once asked for. Recordings made before
the shape travelled (their chunks carry no begin flag and other words there) keep working: their
status gives no fraction of warps, and a partial one says ``shape unknown``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from iket_tui.model.running_kernels import warp_groups
from iket_tui.ring.counters import LOSS_LAPPED, LOSS_OVERWRITTEN, LOSS_TORN
from iket_tui.ring.layout import FLAG_WARP_BEGIN, FLAG_WARP_END, FLAG_WARP_LAPPED

COMPLETE: Final = "complete"
RUNNING: Final = "running"
PARTIAL: Final = "partial"
NOT_TRACED: Final = "not traced"

OVERWRITTEN: Final = "overwritten"
"""Warps wrote more than their region holds: their oldest events were overwritten by their own."""
LAPPED: Final = "lapped"
"""The ring went round before the warps were read: their regions went to later warps."""
TORN: Final = "torn"
"""Warps ended, but some of their records never became readable."""
DROPPED: Final = "dropped at the source"
"""The agent read the events and dropped them for this client (its queue was full)."""
CUT: Final = "cut by the end of the stream"
"""The stream or recording ended while the launch was still running."""
REASONS: Final = (OVERWRITTEN, LAPPED, TORN, DROPPED, CUT)
"""Why a launch is not whole, in the order they are said."""

# A warp's state bits.
_BEGAN: Final = 1
_ENDED: Final = 2
_OVERWRITTEN: Final = 4
_LAPPED: Final = 8
_TORN: Final = 16
_FINAL: Final = _ENDED | _LAPPED | _TORN
_LOST: Final = _OVERWRITTEN | _LAPPED | _TORN
_REASON_BITS: Final = {OVERWRITTEN: _OVERWRITTEN, LAPPED: _LAPPED, TORN: _TORN}
"""The reasons a warp itself says, and its state bit for each."""
_LOSS_REASONS: Final = {LOSS_OVERWRITTEN: OVERWRITTEN, LOSS_LAPPED: LAPPED, LOSS_TORN: TORN}
"""A loss row's reason in words."""
_MAX_WARPS: Final = 32
"""Warps in a block at most (1,024 threads): a larger ``block_warps`` word is no shape."""

OPEN_DTYPE: Final = np.dtype(
    [
        ("block_x", "<u4"),
        ("block_y", "<u2"),
        ("block_z", "<u2"),
        ("warp", "u1"),
        ("state", "u1"),
        ("events", "<i8"),
    ]
)
"""A warp seen that has not ended and was not lost for good, with its events kept so far."""

LOST_DTYPE: Final = np.dtype(
    [
        ("block_x", "<u4"),
        ("block_y", "<u2"),
        ("block_z", "<u2"),
        ("warp", "u1"),
        ("reason", "u1"),
        ("unknown", "?"),
        ("events", "<i8"),
    ]
)
"""What one warp lost for one reason: the events counted, and whether some count was not known."""

Array = np.ndarray[Any, Any]


def block_keys(x: Array, y: Array, z: Array) -> Array:
    """One ``uint64`` per block that sorts as (z, y, x) does: ``z << 48 | y << 32 | x``."""
    return z.astype(np.uint64) << np.uint64(48) | y.astype(np.uint64) << np.uint64(32) | x.astype(np.uint64)


def _coordinates(keys: Array) -> Array:
    """Shape (n, 3): (x, y, z) of each block key."""
    keys = keys.astype(np.uint64)
    return np.stack(
        [keys & np.uint64(0xFFFFFFFF), (keys >> np.uint64(32)) & np.uint64(0xFFFF), keys >> np.uint64(48)], axis=1
    ).astype(np.int64)


def block_text(x: int, y: int, z: int) -> str:
    """``(3,0)``, or ``(3,0,1)`` for a block of a grid's third dimension."""
    return f"({x},{y},{z})" if z else f"({x},{y})"


@dataclass(frozen=True)
class LaunchStatus:
    """What the kernels screen and ``dump`` say about one launch."""

    state: str
    """:data:`COMPLETE`, :data:`RUNNING`, :data:`PARTIAL` or :data:`NOT_TRACED`."""
    fraction: float | None
    """For a partial launch: the fraction of warps kept whole (``of`` ``"warps whole"``), or of
    events kept (``"events kept"``) where the shape is unknown; None where neither is known."""
    of: str
    reasons: tuple[str, ...]
    """Why it is not whole, each of :data:`REASONS` that applies (a reason put on it because the
    ring lost unnamed warps while it ran may not have touched it)."""
    shape_known: bool

    @property
    def percent(self) -> int | None:
        """The fraction as a whole percentage, rounded down (a partial launch never reads 100%)."""
        return None if self.fraction is None else math.floor(self.fraction * 100)

    def short(self) -> str:
        """The launch table's cell: ``complete``, ``running``, ``partial 62%``, ``not traced``."""
        if self.state == PARTIAL and self.percent is not None:
            return f"{PARTIAL} {self.percent}%"
        return self.state

    def words(self) -> str:
        """The flame view's title for a launch not complete: ``partial: 62% of warps whole,
        lapped``, ``partial: shape unknown, dropped at the source``, ``not traced: lapped``;
        empty for a complete or running one."""
        if self.state in (COMPLETE, RUNNING):
            return ""
        parts = []
        if self.state == PARTIAL:
            if self.percent is not None:
                parts.append(f"{self.percent}% of {self.of}")
            elif not self.shape_known:
                parts.append("shape unknown")
        parts.extend(self.reasons)
        return f"{self.state}: {', '.join(parts)}" if parts else self.state


class Coverage:
    """What arrived of one launch, warp by warp, and what it lost and why."""

    def __init__(self) -> None:
        self.grid: tuple[int, int, int] | None = None
        """The launch's grid, from its chunks (None where they do not carry it)."""
        self.block_warps: int | None = None
        """Warps per block, from its chunks."""
        self.begins_known = True
        """Its chunks flag each warp's begin (ring version 3); recordings made before do not."""
        self.open = np.zeros(0, dtype=OPEN_DTYPE)
        self.blocks = np.zeros(0, dtype=np.uint64)
        """Every block seen, as :func:`block_keys`, sorted."""
        self.block_seen = np.zeros(0, dtype=np.int64)
        """Per block seen, its warps seen."""
        self.block_whole = np.zeros(0, dtype=np.int64)
        """Per block seen, its warps that arrived whole."""
        self.warps_seen = 0
        self.warps_whole = 0
        self.events_kept = 0
        """Events that arrived."""
        self.events_whole = 0
        """Events that arrived of warps that arrived whole."""
        self.warps_lost: dict[str, int] = {OVERWRITTEN: 0, LAPPED: 0, TORN: 0}
        """Warps done with (ended, or lost for good) that lost events, per reason."""
        self.events_lost: dict[str, int] = {OVERWRITTEN: 0, LAPPED: 0, TORN: 0}
        """Events lost where the drain knew how many, per reason."""
        self.unknown_losses = 0
        """Warps named lost whose count of lost events was not known (they had not ended)."""
        self.loss_rows = 0
        """Losses named for this launch (a warp overwritten in several passes is named each time)."""
        self._lost = np.zeros(0, dtype=LOST_DTYPE)  # per warp and reason, what the drain named lost
        self.unnamed_lapped = 0
        """Warps the ring went round before their names were read, while this launch ran: some may be its."""
        self.unnamed_events = 0
        """Events the ring lost while this launch ran, from a drain that names no loss (a
        recording made before drains named them): some may be its."""
        self.dropped_events = 0
        """Events the agent read and dropped for this client while this launch ran: some may be its."""
        self.cut = False
        """The stream ended while it ran."""
        self.ended = False
        """The stream ended: nothing more of it will come."""
        self._changes = 0
        self._whole: tuple[int, Array] | None = None  # the whole blocks, as of a count of changes

    # Taking in what arrived

    def add(self, chunks: Array, losses: Array, *, begins_known: bool) -> None:
        """Take in a batch's drained chunks of this launch (``drained_dtype``) and the loss rows
        naming its warps (``LOSS_DTYPE``) together: a warp's end and its loss may come in one
        batch. ``begins_known``: the batch's chunks flag warp begins and carry the shape (else a
        recording made before, whose words there meant other things)."""
        if not len(chunks) and not len(losses):
            return
        if not begins_known and len(chunks):
            self.begins_known = False
        elif self.grid is None and len(chunks):
            self._shape(chunks)
        self.events_kept += int(chunks["n_events"].sum(dtype=np.int64))
        rows = np.zeros(len(chunks) + len(losses), dtype=OPEN_DTYPE)
        for name in ("block_x", "block_y", "block_z", "warp"):
            rows[name][: len(chunks)] = chunks[name]
            rows[name][len(chunks) :] = losses[name]
        flags = chunks["flags"]
        if begins_known:
            state = np.where((flags & FLAG_WARP_BEGIN) != 0, _BEGAN, 0) | np.where(
                (flags & FLAG_WARP_LAPPED) != 0, _OVERWRITTEN, 0
            )
        else:  # a drain before those flags: begins are not said, and the bits meant other things
            state = np.full(len(chunks), _BEGAN)
        rows["state"][: len(chunks)] = state | np.where((flags & FLAG_WARP_END) != 0, _ENDED, 0)
        rows["events"][: len(chunks)] = chunks["n_events"]
        if len(losses):
            self._name_losses(losses)
            self.loss_rows += len(losses)
            events = losses["events"].astype(np.int64)
            lost = rows["state"][len(chunks) :]
            for reason, name in _LOSS_REASONS.items():
                of = losses["reason"] == reason
                self.events_lost[name] += int(events[of & (events > 0)].sum())
                lost[of] = _REASON_BITS[name]
            self.unknown_losses += int((events < 0).sum())
        self._merge(rows)

    def _name_losses(self, losses: Array) -> None:
        """Add loss rows to what each warp lost per reason: one row per warp and reason, however
        many drains named it (a warp that keeps overwriting itself is named at every pass)."""
        rows = np.zeros(len(losses), dtype=LOST_DTYPE)
        for name in ("block_x", "block_y", "block_z", "warp", "reason"):
            rows[name] = losses[name]
        events = losses["events"].astype(np.int64)
        rows["events"] = np.maximum(events, 0)
        rows["unknown"] = events < 0
        both = np.concatenate([self._lost, rows])
        order = np.lexsort((both["reason"], both["warp"], both["block_x"], both["block_y"], both["block_z"]))
        both = both[order]
        same = np.ones(len(both), dtype=bool)
        same[0] = False
        for name in ("block_x", "block_y", "block_z", "warp", "reason"):
            same[1:] &= both[name][1:] == both[name][:-1]
        starts = np.flatnonzero(~same)
        kept = both[starts]
        kept["events"] = np.add.reduceat(both["events"], starts)
        kept["unknown"] = np.logical_or.reduceat(both["unknown"], starts)
        self._lost = kept

    def _shape(self, chunks: Array) -> None:
        gx = chunks["grid_x"].astype(np.int64)
        gy, gz = chunks["grid_yz"].astype(np.int64) & 0xFFFF, chunks["grid_yz"].astype(np.int64) >> 16
        warps = chunks["block_warps"].astype(np.int64)
        known = np.flatnonzero((gx > 0) & (gy > 0) & (gz > 0) & (warps > 0) & (warps <= _MAX_WARPS))
        if len(known):
            first = known[0]
            self.grid = (int(gx[first]), int(gy[first]), int(gz[first]))
            self.block_warps = int(warps[first])

    def _merge(self, rows: Array) -> None:
        """Fold ``rows`` (one or more per warp) into the open warps; count those done with."""
        old = self.open
        both = np.concatenate([old, rows])
        order, starts = warp_groups(both)
        ordered = both[order]
        state = np.bitwise_or.reduceat(ordered["state"], starts)
        events = np.add.reduceat(ordered["events"], starts)
        seen_before = np.maximum.reduceat(order < len(old), starts)
        merged = ordered[starts]
        merged["state"] = state
        merged["events"] = events
        new = ~seen_before
        self.warps_seen += int(new.sum())
        done = (state & _FINAL) != 0
        whole = done & ((state & (_BEGAN | _ENDED)) == (_BEGAN | _ENDED)) & ((state & _LOST) == 0)
        self.warps_whole += int(whole.sum())
        self.events_whole += int(events[whole].sum())
        for name, bit in _REASON_BITS.items():
            self.warps_lost[name] += int((done & ((state & bit) != 0)).sum())
        keys = block_keys(merged["block_x"], merged["block_y"], merged["block_z"])
        self._count_blocks(keys[new], keys[whole])
        self.open = merged[~done]
        self._changes += 1

    def _count_blocks(self, seen: Array, whole: Array) -> None:
        """Count newly seen warps and whole warps in their blocks, adding blocks first seen."""
        if not len(seen) and not len(whole):
            return
        named = np.unique(seen)
        at = np.minimum(np.searchsorted(self.blocks, named), max(len(self.blocks) - 1, 0))
        fresh = named[self.blocks[at] != named] if len(self.blocks) else named
        if len(fresh):
            at = np.searchsorted(self.blocks, fresh)
            self.blocks = np.insert(self.blocks, at, fresh)
            self.block_seen = np.insert(self.block_seen, at, 0)
            self.block_whole = np.insert(self.block_whole, at, 0)
        np.add.at(self.block_seen, np.searchsorted(self.blocks, seen), 1)
        np.add.at(self.block_whole, np.searchsorted(self.blocks, whole), 1)

    # What the ring could not name

    def lapped_while_running(self, warps: int, events: int = 0) -> None:
        """The ring went round ``warps`` warps before their names were read while this launch
        ran (a drain that names no loss says ``events`` lost instead)."""
        self.unnamed_lapped += warps
        self.unnamed_events += events

    def dropped_while_running(self, events: int) -> None:
        """The agent dropped ``events`` read events for this client while this launch ran."""
        self.dropped_events += events

    # What it comes to

    @property
    def expected_blocks(self) -> int | None:
        if self.grid is None:
            return None
        x, y, z = self.grid
        return x * y * z

    @property
    def expected_warps(self) -> int | None:
        blocks = self.expected_blocks
        return None if blocks is None or self.block_warps is None else blocks * self.block_warps

    def whole_event_fraction(self) -> float | None:
        """Of the events kept, the fraction that belong to warps kept whole (None before any)."""
        return self.events_whole / self.events_kept if self.events_kept else None

    def _whole_blocks(self) -> Array:
        """The keys of the blocks inside the grid whose every warp arrived whole (of those seen,
        where the shape is unknown: every warp seen of them arrived whole)."""
        if self._whole is not None and self._whole[0] == self._changes:
            cached: Array = self._whole[1]
            return cached
        whole: Array
        if self.grid is None or self.block_warps is None:
            whole = self.blocks[self.block_whole == self.block_seen]
        else:
            inside = (_coordinates(self.blocks) < np.array(self.grid)).all(axis=1)
            whole = self.blocks[inside & (self.block_whole >= self.block_warps)]
        self._whole = (self._changes, whole)
        return whole

    def blocks_whole(self) -> int:
        return len(self._whole_blocks())

    def _reasons(self) -> tuple[str, ...]:
        bits = int(np.bitwise_or.reduce(self.open["state"])) if len(self.open) else 0
        found = set()
        for name, bit in _REASON_BITS.items():
            if self.warps_lost[name] or bits & bit:
                found.add(name)
        if self.unnamed_lapped or self.unnamed_events:
            found.add(LAPPED)
        if self.dropped_events:
            found.add(DROPPED)
        if self.cut:
            found.add(CUT)
        return tuple(reason for reason in REASONS if reason in found)

    def status(self, *, running: bool) -> LaunchStatus:
        """Its status, ``running`` saying whether some warp of it began and has not ended.

        Not traced: no event of it arrived, only losses. Running: a warp of it runs, or (its
        shape known) blocks of it have not arrived, nothing says they were lost, and the stream
        goes on (a grid larger than the GPU runs in waves). Complete: every block of its grid
        arrived whole (the shape unknown: every warp seen did, and nothing was lost while it
        ran). Partial otherwise, and always where the agent dropped events of its ring while it
        ran (a warp that arrived begun and ended may miss events between)."""
        reasons = self._reasons()
        shape = self.expected_warps
        known = shape is not None
        if self.events_kept == 0 and (self.loss_rows or self.unnamed_lapped) and not (running and not self.cut):
            return LaunchStatus(NOT_TRACED, None, "", reasons, known)
        if running and not self.cut:
            return LaunchStatus(RUNNING, None, "", reasons, known)
        if self.dropped_events:  # a warp that arrived begun and ended may miss events between
            return LaunchStatus(PARTIAL, None, "", reasons, known)
        if shape is not None and self.expected_blocks is not None:
            if self.blocks_whole() >= self.expected_blocks and not self.cut:
                return LaunchStatus(COMPLETE, 1.0, "warps whole", (), known)
            if not reasons and not self.ended:
                return LaunchStatus(RUNNING, None, "", (), known)  # its other blocks have not begun yet
            whole = min(self.warps_whole, shape)
            return LaunchStatus(PARTIAL, whole / shape if shape else None, "warps whole", reasons, known)
        if not reasons and not len(self.open) and self.warps_whole == self.warps_seen and not self.unknown_losses:
            return LaunchStatus(COMPLETE, None, "", (), known)
        lost = sum(self.events_lost.values())
        fraction = None
        if lost and not self.unknown_losses and not (self.unnamed_lapped or self.unnamed_events or self.dropped_events):
            fraction = self.events_kept / (self.events_kept + lost)
        return LaunchStatus(PARTIAL, fraction, "events kept", reasons, known)

    def lost_of(self, block: tuple[int, int, int], warp: int | None = None) -> str:
        """What the warp ``warp`` of ``block`` (or the whole block) lost, in words: ``24 events
        (overwritten)``, ``events (lapped, how many unknown)``; empty when nothing is named lost."""
        rows = self._lost
        x, y, z = block
        mine = (rows["block_x"] == x) & (rows["block_y"] == y) & (rows["block_z"] == z)
        if warp is not None:
            mine &= rows["warp"] == warp
        rows = rows[mine]
        if not len(rows):
            return ""
        reasons = [name for reason, name in _LOSS_REASONS.items() if (rows["reason"] == reason).any()]
        known = int(rows["events"].sum())
        text = f"{known:,} event{'s' if known != 1 else ''}" if known else "events"
        return f"{text} ({', '.join(reasons)}" + (", how many unknown)" if rows["unknown"].any() else ")")

    def missing_blocks(self, *, shown: int = 2) -> tuple[int, list[tuple[int, int, int]]]:
        """How many blocks did not arrive whole (of the grid, or of those seen where the shape is
        unknown), and the first ``shown`` of them in grid order."""
        whole = self._whole_blocks()
        if self.grid is None or self.block_warps is None:
            broken = self.blocks[~np.isin(self.blocks, whole)]
            first = [(int(x), int(y), int(z)) for x, y, z in _coordinates(broken[:shown])]
            return len(broken), first
        gx, gy, gz = self.grid
        xyz = _coordinates(whole)
        linear = np.sort((xyz[:, 2] * gy + xyz[:, 1]) * gx + xyz[:, 0])
        count = gx * gy * gz - len(linear)
        # The k-th block missing is k plus the whole blocks before it.
        k = np.arange(min(shown, count), dtype=np.int64)
        before = np.searchsorted(linear - np.arange(len(linear), dtype=np.int64), k, side="right")
        missing = k + before
        first = [(int(m % gx), int(m // gx % gy), int(m // (gx * gy))) for m in missing]
        return count, first

    def missing_text(self, *, shown: int = 2) -> str:
        """``blocks (3,0), (17,2) and 40 more`` not whole; empty when none is missing."""
        count, first = self.missing_blocks(shown=shown)
        if not count:
            return ""
        text = ("block " if count == 1 else "blocks ") + ", ".join(block_text(*block) for block in first)
        more = count - len(first)
        return text + (f" and {more:,} more" if more else "")

    def detail(self) -> str:
        """What a launch not complete lost, in one line: the warps whole of those expected, the
        blocks not whole, and per reason the warps and events lost."""
        parts = []
        shape = self.expected_warps
        if shape is not None:
            parts.append(f"{self.warps_whole:,} of {shape:,} warps whole")
        else:
            parts.append(f"{self.warps_whole:,} of {self.warps_seen:,} warps seen whole (shape unknown)")
        missing = self.missing_text()
        if missing:
            parts.append(f"not whole: {missing}")
        lost = []
        for name, bit in _REASON_BITS.items():
            warps = self.warps_lost[name] + int(((self.open["state"] & bit) != 0).sum())
            if warps:
                events = self.events_lost[name]
                lost.append(
                    f"{warps:,} warp{'s' if warps != 1 else ''} {name}" + (f" ({events:,} events)" if events else "")
                )
        if self.unnamed_lapped:
            lost.append(f"the ring lapped {self.unnamed_lapped:,} unnamed warps while it ran")
        if self.unnamed_events:
            lost.append(f"the ring lost {self.unnamed_events:,} events while it ran")
        if self.dropped_events:
            lost.append(f"{self.dropped_events:,} events dropped at the source while it ran")
        if lost:
            parts.append("lost: " + ", ".join(lost))
        return " · ".join(parts)
