"""Which warps of a launch began and have not ended, and the last event each of them executed:
what a kernel that does not finish (a deadlocked pipeline, a barrier one warp never reaches, a
spin on a flag nobody sets) looks like while it runs.

:class:`WarpProgress` is kept per launch and updated with each batch of its decoded events,
with numpy (no Python per event): it holds one row per warp that has not ended, so it is
bounded by the warps running, not by the events. A warp has begun once any row of it arrived;
it has ended with the row that carries ``EVENT_WARP_END``. A row flagged ``EVENT_WARP_BEGIN``
with event id 0 (the ring's row for a warp that began and has written nothing yet) begins a
warp without an event: "not ended, no event yet". A warp (block and warp of one launch)
begins and ends once.

:func:`unfinished` turns those rows into what a user reads: per block, the warps with the same
last event grouped into ranges (``warps 4-7``), those quiet past the threshold apart from the
others, the longest quiet first, each with how long ago it was on the device's clock (see
:class:`DeviceClock`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from iket_tui.durations import duration
from iket_tui.ring.events import ModuleEvents
from iket_tui.ring.layout import EVENT_WARP_BEGIN, EVENT_WARP_END, KIND_END, KIND_MASK

DEFAULT_STUCK_AFTER_NS: Final = 2_000_000_000
"""A launch with an unfinished warp that has run no event for this long is running past the threshold."""

NO_EVENT: Final = 0xFF
"""``kind`` of a warp that began without an event yet."""

OPEN_WARP_DTYPE: Final = np.dtype(
    [
        ("t_ns", "<u8"),  # device time of the warp's last event (or of its begin record)
        ("block_x", "<u4"),
        ("block_y", "<u2"),
        ("block_z", "<u2"),
        ("payload", "<u4"),
        ("context_payload", "<u4"),
        ("warp", "u1"),
        ("sm", "u1"),
        ("event", "u1"),
        ("kind", "u1"),  # KIND_* of the last event, or NO_EVENT
        ("payload_type", "u1"),
        ("context_event", "u1"),  # the warp's latest event with a payload (0: none seen)
        ("context_payload_type", "u1"),
    ]
)
"""One warp that began and has not ended, with its last event, and its latest event that
carried a payload (for a last event without one: ``mma`` after ``k_step`` 17)."""

_SIGNATURE = ("event", "kind", "payload", "payload_type", "context_event", "context_payload", "context_payload_type")


class WarpProgress:
    """The warps of one launch that began and have not ended, each with its last event.

    ``open`` is sorted by (block z, y, x, warp); ``ended`` counts warps that ended.
    """

    def __init__(self) -> None:
        self.open: np.ndarray[Any, np.dtype[np.void]] = np.zeros(0, dtype=OPEN_WARP_DTYPE)
        self.ended = 0
        self.lost = 0
        """Warps that began and will never end as far as the records go: the ring lost their end."""

    @property
    def unfinished(self) -> int:
        """Warps that began and have not ended."""
        return len(self.open)

    def add(self, events: np.ndarray[Any, np.dtype[np.void]]) -> None:
        """Take in a batch of decoded events of this launch (``EVENT_DTYPE``), in any order.

        The events are ordered by warp only (a drain delivers each warp's events together, which
        a stable sort keeps cheap); each warp's last event is the one with the newest time (the
        last of those that share it), found per group. Only columns are gathered, and whole rows
        only for each warp's last event: gathering whole 32-byte rows of a large batch would
        cost more than ordering it."""
        n = len(events)
        if not n:
            return
        order, starts = warp_groups(events)
        sizes = np.diff(np.r_[starts, n])
        group = np.repeat(np.arange(len(starts)), sizes)
        position = np.arange(n)
        t = events["t_ns"][order]
        newest = np.maximum.reduceat(t, starts)
        last = np.maximum.reduceat(np.where(t == newest[group], position, -1), starts)
        ended = np.maximum.reduceat((events["kind"][order] & EVENT_WARP_END) != 0, starts)
        # Each warp's newest event with a payload (none is newer than its last event).
        has_payload = events["payload_type"][order] != 0
        newest_paid = np.maximum.reduceat(np.where(has_payload, t, 0), starts)
        paid = np.maximum.reduceat(np.where(has_payload & (t == newest_paid[group]), position, -1), starts)
        found = paid >= 0

        rows = np.zeros(len(starts), dtype=OPEN_WARP_DTYPE)
        tail = events[order[last]]
        for name in ("t_ns", "block_x", "block_y", "block_z", "payload", "warp", "sm", "event", "payload_type"):
            rows[name] = tail[name]
        rows["kind"] = tail["kind"] & KIND_MASK
        rows["kind"][(tail["event"] == 0) & ((tail["kind"] & EVENT_WARP_BEGIN) != 0)] = NO_EVENT
        context = events[order[paid[found]]]
        rows["context_event"][found] = context["event"]
        rows["context_payload"][found] = context["payload"]
        rows["context_payload_type"][found] = context["payload_type"]
        self._merge(rows, ended)

    def _merge(self, rows: np.ndarray[Any, np.dtype[np.void]], ended: np.ndarray[Any, np.dtype[np.bool_]]) -> None:
        """Replace the open rows of the warps in ``rows`` with theirs, and drop the warps that ended."""
        old = self.open
        both = np.concatenate([old, rows])
        newer = np.r_[np.zeros(len(old), dtype=np.int8), np.ones(len(rows), dtype=np.int8)]
        done = np.r_[np.zeros(len(old), dtype=bool), ended]
        order, starts = warp_groups(both)  # stable: a warp's open row before the batch's
        both, newer, done = both[order], newer[order], done[order]
        last = np.r_[starts[1:], len(both)] - 1
        kept = both[last]
        # A batch row without a payload-bearing event keeps the one an earlier batch saw.
        inherit = (last > starts) & (kept["context_event"] == 0) & (newer[last] == 1)
        if inherit.any():
            earlier = both[starts[inherit]]
            for name in ("context_event", "context_payload", "context_payload_type"):
                kept[name][inherit] = earlier[name]
        finished = done[last]
        self.ended += int(finished.sum())
        self.open = kept[~finished]

    def lose(self, warps: np.ndarray[Any, np.dtype[np.void]]) -> int:
        """Forget the open warps among ``warps`` (any rows with ``block_x``, ``block_y``,
        ``block_z`` and ``warp``): the ring lost the rest of them for good (their region went to
        a later warp, or their records never became readable), so they will never end and must
        not read as running. Returns how many were open."""
        old = self.open
        if not len(old) or not len(warps):
            return 0
        both = np.zeros(len(old) + len(warps), dtype=[(name, old.dtype[name]) for name in _WARP_FIELDS])
        for name in _WARP_FIELDS:
            both[name][: len(old)] = old[name]
            both[name][len(old) :] = warps[name]
        order, starts = warp_groups(both)
        group = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(both)]))
        named = np.zeros(len(starts), dtype=bool)
        named[group[order >= len(old)]] = True
        gone = np.zeros(len(old), dtype=bool)
        mine = order < len(old)
        gone[order[mine]] = named[group[mine]]
        count = int(gone.sum())
        if count:
            self.open = old[~gone]
            self.lost += count
        return count


_WARP_FIELDS: Final = ("warp", "block_x", "block_y", "block_z")


def warp_groups(
    rows: np.ndarray[Any, np.dtype[np.void]],
) -> tuple[np.ndarray[Any, np.dtype[np.intp]], np.ndarray[Any, np.dtype[np.intp]]]:
    """A stable order of ``rows`` by warp (block z, y, x, warp), and where each warp's rows
    begin in it: by one int64 key per row where the indices seen fit in 63 bits (those of any
    real grid do), else by the four fields."""
    widths = [int(rows[name].max()).bit_length() for name in _WARP_FIELDS]
    if sum(widths) > 63:
        order = np.lexsort(tuple(rows[name] for name in _WARP_FIELDS))
        return order, _starts(rows[order], _WARP_FIELDS)
    key = np.zeros(len(rows), dtype=np.int64)
    shift = 0
    for name, width in zip(_WARP_FIELDS, widths, strict=True):
        key |= rows[name].astype(np.int64) << shift
        shift += width
    order = np.argsort(key, kind="stable")
    ordered = key[order]
    return order, np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])


@dataclass
class DeviceClock:
    """The device's timer as of one ring's latest ``kernel_records``, so that "how long ago" for
    an event is measured on the clock that stamped it.

    ``device_now_ns`` is the device timer the agent read at that drain, where the message says
    (the ring's live transport sends it); without it the newest event time seen on the ring
    stands in for it, so a warp reads as quiet since the ring's last event, a lower bound. The
    agent-clock time elapsed since that batch (``t_ns``) is added either way: in a replay that
    is the stream's time at the current point, not the wall clock.
    """

    batch_t_ns: int
    device_now_ns: int | None
    newest_event_ns: int = 0

    def now_ns(self, agent_now_ns: int) -> int:
        """The device timer at agent time ``agent_now_ns``."""
        base = self.device_now_ns if self.device_now_ns is not None else self.newest_event_ns
        return base + max(0, agent_now_ns - self.batch_t_ns)


@dataclass(frozen=True)
class WarpGroup:
    """Warps of one block that have not ended, whose last event is the same, all quiet past
    the threshold or all not."""

    block: tuple[int, int, int]
    warps: tuple[int, ...]
    last: str
    """The last event in words: ```mma`` (k_step 17)`, or ``no event yet``."""
    t_ns: int
    """Device time of the group's newest event."""
    ago_ns: int
    """How long before the device's now that was."""
    stuck: bool
    """Quiet for longer than the threshold."""

    @property
    def block_text(self) -> str:
        x, y, z = self.block
        return f"({x},{y})" if z == 0 else f"({x},{y},{z})"

    @property
    def warps_text(self) -> str:
        """``warp 3``, ``warps 4-7``, ``warps 0-1, 4-7``."""
        return ("warp " if len(self.warps) == 1 else "warps ") + warp_ranges(self.warps)

    def columns(self) -> tuple[str, str, str, str]:
        """Block, warps, last event, how long ago: one row of the list of unfinished warps."""
        return (f"block {self.block_text}", self.warps_text, self.last, f"{duration(self.ago_ns)} ago")

    def describe(self) -> str:
        """``block (3,0), warps 4-7 last at `mma` (k_step 17), 12.4 s ago``."""
        where = "with no event yet" if self.last == NO_EVENT_TEXT else f"last at {self.last}"
        return f"block {self.block_text}, {self.warps_text} {where}, {duration(self.ago_ns)} ago"


NO_EVENT_TEXT: Final = "no event yet"


def warp_ranges(warps: tuple[int, ...] | list[int]) -> str:
    """Sorted warp indices as ranges: ``0-3, 6, 8-9``."""
    parts: list[str] = []
    values = sorted(warps)
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        parts.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ", ".join(parts)


def payload_value(payload_type: int, bits: int) -> str:
    """The 32 payload bits read as their type says (int32, uint32, float32); empty without one."""
    if payload_type == 1:
        return str(bits - (1 << 32) if bits >= 1 << 31 else bits)
    if payload_type == 2:
        return str(bits)
    if payload_type == 3:
        return f"{struct.unpack('<f', bits.to_bytes(4, 'little'))[0]:g}"
    return ""


def last_event_text(module: ModuleEvents | None, row: np.void) -> str:
    """A warp's last event in words: its name and payload, and for one without a payload the
    latest event that had one (``mma`` (k_step 17)); ``no event yet`` for a warp that only began."""
    kind = int(row["kind"])
    if kind == NO_EVENT:
        return NO_EVENT_TEXT
    text = "a range end" if kind == KIND_END else f"`{_event_name(module, int(row['event']))}`"
    own = payload_value(int(row["payload_type"]), int(row["payload"]))
    if own:
        return f"{text} {own}"
    context = int(row["context_event"])
    if context:
        value = payload_value(int(row["context_payload_type"]), int(row["context_payload"]))
        return f"{text} ({_event_name(module, context)} {value})"
    return text


def _event_name(module: ModuleEvents | None, event: int) -> str:
    if module is not None:
        for info in module.events:
            if info.event_id == event:
                return info.name
    return f"event {event}"


@dataclass(frozen=True)
class Unfinished:
    """The warps of a launch that have not ended, as a user reads them."""

    groups: list[WarpGroup]
    """Per block, warps with the same last event, the longest quiet first (at most the limit asked)."""
    group_count: int
    """Groups in all, shown or not."""
    blocks: int
    """Blocks with a warp that has not ended."""
    warps: int
    who: str = ""
    """The process the launch ran in (``pid 123 (rank 3)``), in a session of several; else empty."""

    def summary(self, total_blocks: int, *, shown: int = 2) -> str:
        """``1 of 64 blocks not finished: block (3,0), warps 4-7 last at `mma` (k_step 17), 12.4 s ago``:
        the ``shown`` longest quiet groups, then how many more; empty when every warp ended. In a
        session of several processes it begins with the process: ``pid 123 (rank 3): 1 of 64 ...``."""
        if not self.groups:
            return ""
        of_total = total_blocks >= self.blocks
        head = f"{self.blocks} of {total_blocks}" if of_total else f"{self.blocks}"
        text = f"{self.who}: " if self.who else ""
        text += f"{head} block{'s' if (total_blocks if of_total else self.blocks) != 1 else ''} not finished: "
        text += "; ".join(group.describe() for group in self.groups[:shown])
        more = self.group_count - min(shown, len(self.groups))
        return text + (f"; {more} more group{'s' if more != 1 else ''} of warps" if more > 0 else "")


def unfinished(
    progress: WarpProgress,
    module: ModuleEvents | None,
    *,
    device_now_ns: int,
    stuck_after_ns: int,
    limit: int = 200,
) -> Unfinished:
    """The unfinished warps of a launch grouped per block by their last event and by whether
    they are quiet past ``stuck_after_ns``, the longest quiet first; Python runs only for the
    ``limit`` groups returned.

    Warps with the same last event at different times share a group, dated by its newest event,
    only on the same side of the threshold: a warp quiet for 10 s is never hidden in a group
    with one that ran that event just now."""
    rows = progress.open
    if not len(rows):
        return Unfinished([], 0, 0, 0)
    stale = (device_now_ns - rows["t_ns"].astype(np.int64)) > stuck_after_ns
    keys = [rows[name] for name in reversed(_SIGNATURE)]
    order = np.lexsort((*keys, stale, rows["block_x"], rows["block_y"], rows["block_z"]))
    ordered = rows[order]
    starts = _starts(ordered, ("block_x", "block_y", "block_z", *_SIGNATURE), also=stale[order])
    blocks = len(_starts(ordered, ("block_x", "block_y", "block_z")))
    newest = np.maximum.reduceat(ordered["t_ns"], starts)
    by_age = np.argsort(newest, kind="stable")[:limit]  # the oldest newest event first
    bounds = np.r_[starts, len(ordered)]
    groups: list[WarpGroup] = []
    for index in by_age.tolist():
        first = ordered[bounds[index]]
        members = ordered["warp"][bounds[index] : bounds[index + 1]]
        t_ns = int(newest[index])
        ago = max(0, device_now_ns - t_ns)
        groups.append(
            WarpGroup(
                block=(int(first["block_x"]), int(first["block_y"]), int(first["block_z"])),
                warps=tuple(sorted(int(w) for w in members)),
                last=last_event_text(module, first),
                t_ns=t_ns,
                ago_ns=ago,
                stuck=ago > stuck_after_ns,
            )
        )
    return Unfinished(groups, len(starts), blocks, len(rows))


def open_lanes(progress: WarpProgress, blocks: np.ndarray[Any, np.dtype[np.uint32]]) -> frozenset[tuple[int, int]]:
    """The (block index, warp) of each warp that has not ended, with blocks indexed as in
    ``blocks`` (shape (n, 3): x, y, z, sorted by z, y, x, as a launch's spans hold them)."""
    rows = progress.open
    if not len(rows) or not len(blocks):
        return frozenset()
    known = blocks[:, 2].astype(np.uint64) << 48 | blocks[:, 1].astype(np.uint64) << 32 | blocks[:, 0].astype(np.uint64)
    wanted = (
        rows["block_z"].astype(np.uint64) << 48
        | rows["block_y"].astype(np.uint64) << 32
        | rows["block_x"].astype(np.uint64)
    )
    index = np.minimum(np.searchsorted(known, wanted), len(known) - 1)
    found = known[index] == wanted  # a warp whose block has no span or mark yet has no row to mark
    return frozenset(zip(index[found].tolist(), rows["warp"][found].tolist(), strict=True))


def _starts(
    rows: np.ndarray[Any, np.dtype[np.void]],
    fields: tuple[str, ...],
    *,
    also: np.ndarray[Any, np.dtype[np.bool_]] | None = None,
) -> np.ndarray[Any, np.dtype[np.intp]]:
    """Where each run of equal ``fields`` (and equal ``also``, one value per row) begins in
    ``rows`` (sorted so that equal rows are together)."""
    if not len(rows):
        return np.zeros(0, dtype=np.intp)
    change = np.zeros(len(rows), dtype=bool)
    change[0] = True
    for column in [rows[name] for name in fields] + ([] if also is None else [also]):
        change[1:] |= column[1:] != column[:-1]
    return np.flatnonzero(change)
