"""RingDrain: reads newly written records out of a ring, periodically, counts exactly what was
written, read and lost, and hands the records on as drained chunks.

A pass copies every record's stamp, works out for each segment which positions were written
since the last pass (the newest stamp says how far its writer got), copies those records, and
reads their stamps again: a record is taken only if its stamp names its position before and
after the copy (a record overwritten meanwhile, or not yet visible, is not). A segment's pass
stops at its first record not yet visible and starts there next time, so nothing is skipped;
positions a writer lapped before they were read are lost. Events are attributed to the warp
whose begin records precede them in the segment; after a lap, until the next warp begins, the
warp is unknown and its records are lost rather than misattributed. No Python runs per record.

Counting, per generation and in total: ``chunks_written = chunks_read + chunks_lost`` in
records, and ``events_written = events_read + events_lost`` after every pass. Record counts are
up to date with the newest record of each segment; event counts with the newest warp begin or
end read in each segment, or its counters once it is read up to them (each says the segment's
event count), which is how events of lapped records are counted.

Where the ring is not in this process's memory (a GPU's device memory), a
:class:`RecordSource` brings it: the agent's copies it with a DMA engine
(:class:`~iket_tui.ring.device_copy.DeviceRing`).

A pass's per-record work (the stamps checked, each segment's stop and the warps' own records
found, the events written into chunks) runs in a native pass where one can be built
(:mod:`~iket_tui.ring.native_drain`); the numpy code here is its reference and its fallback,
and everything else is shared, so both hand on the same chunks and counts.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from iket_tui.ring import native_drain
from iket_tui.ring.buffer import RingView
from iket_tui.ring.counters import DrainBatch, RingCounters
from iket_tui.ring.layout import (
    BEGIN_RECORDS,
    DEFAULT_LAYOUT,
    DRAINED_EVENTS_PER_CHUNK,
    END_DIVERGED,
    END_PARTIAL,
    FLAG_DIVERGED,
    FLAG_PARTIAL_WARP,
    FLAG_PAYLOAD_EVERY_EVENT,
    FLAG_WARP_BEGIN,
    FLAG_WARP_END,
    HEADER_WORDS,
    RECORD_BEGIN,
    RECORD_BLOCK,
    RECORD_END,
    RECORD_LAUNCH,
    WARP_SLOTS,
)
from iket_tui.ring.native_drain import NativePass

__all__ = [
    "DEFAULT_PERIOD_S",
    "DrainBatch",
    "LiveRing",
    "RecordSource",
    "RingCounters",
    "RingDrain",
    "record_words",
    "sm_of",
]

DEFAULT_PERIOD_S = 0.05
"""20 Hz."""

_MASK32 = 0xFFFFFFFF
_BLOCK_SEGMENTS = 64
"""Segments whose records a pass checks at a time: 512 KiB of records at 512 a segment."""
_I64 = np.int64
Array = np.ndarray[Any, Any]


class RecordSource(Protocol):
    """Where a drain reads a ring's records: the ring's own memory, or copies of it."""

    def refresh(self) -> bool:
        """Bring the header and counters up to date; ``False`` when no record can have changed
        since the last pass (the drain then skips the records)."""
        ...

    def stamps(self) -> Array:
        """Every record's stamp, a copy, shape (segments, records_per_segment)."""
        ...

    def rows(self, segments: Array) -> Array:
        """The records of ``segments``, a copy taken after :meth:`stamps`: ``uint32`` of shape
        (segments, records_per_segment, 4), the words of ``RECORD_DTYPE``."""
        ...

    def stamps_after(self, segments: Array) -> Array:
        """The stamps of ``segments`` again, read after :meth:`rows` (a view will do: the drain
        reads it at once)."""
        ...

    def device_now_ns(self) -> int | None:
        """The writers' clock now (``%globaltimer`` for a GPU), or ``None`` where unknown."""
        ...


class LiveRing:
    """A ring whose memory the writers write directly (a file mapping, or memory shared with a
    simulation): each read is of the live memory, in the order the drain asks."""

    def __init__(self, ring: RingView, clock: Callable[[], int] = time.monotonic_ns) -> None:
        self.ring = ring
        self.clock = clock

    def refresh(self) -> bool:
        return True

    def stamps(self) -> Array:
        return np.array(self.ring.records["stamp"])

    def rows(self, segments: Array) -> Array:
        return record_words(self.ring.records, segments)

    def stamps_after(self, segments: Array) -> Array:
        stamps = self.ring.records["stamp"]  # the live memory, read by the comparison that takes it
        return stamps if len(segments) == len(stamps) else stamps[segments]

    def device_now_ns(self) -> int | None:
        return self.clock()


_IDENTITY_FIELDS = (
    "valid",
    "id_bits",
    "kernel",
    "warp",
    "module",
    "launch",
    "block_x",
    "block_y",
    "block_z",
    "sm",
    "begin_pos",
    "events_before",
    "t_begin",
)


class RingDrain:
    """Reads one ring; :meth:`drain` is one pass, :meth:`run` drains periodically.

    Only one thread may drain a ring at a time; the counters and positions are its own.
    """

    def __init__(
        self,
        ring: RingView,
        *,
        period_s: float = DEFAULT_PERIOD_S,
        source: RecordSource | None = None,
        native: bool = True,
    ) -> None:
        if period_s <= 0:
            raise ValueError("the drain period must be positive")
        self.ring = ring
        self.period_s = period_s
        self.source: RecordSource = LiveRing(ring) if source is None else source
        segments = ring.geometry.segments
        self._next = np.zeros(segments, dtype=_I64)
        self._events_end = np.zeros(segments, dtype=_I64)
        self._warp = {name: np.zeros(segments, dtype=bool if name == "valid" else _I64) for name in _IDENTITY_FIELDS}
        """The warp each segment's next records belong to, from its begin records (``valid``:
        known; after a lap it is not, until the next warp begins)."""
        self._generation = ring.generation & ~1
        self._retired = ring.retired
        self._counters = RingCounters(generation=self._generation)
        self._generation_counters = RingCounters(generation=self._generation)
        self.caught_up = True
        """Whether every segment is read up to its counters (the ``next`` its last warp stored
        when it ended): once no warp runs, nothing is left to read."""
        self._slots = np.arange(ring.geometry.records_per_segment, dtype=np.uint32)
        self._buffers: _Scratch | None = None
        """Work arrays of the passes while the ring is busy; let go when a pass finds nothing."""
        self._own: Array | None = None
        self._native_wanted = native
        self._native: NativePass | None = None
        self.engine = "numpy (the native pass is loaded at the first pass)" if native else "numpy"
        """Which drain passes run: the native pass, or numpy and why."""

    @property
    def counters(self) -> RingCounters:
        return self._counters

    def drain(self) -> DrainBatch:
        """Read every record written since the last pass."""
        if self._native_wanted:  # the first pass loads (and, once per process, builds) the native pass
            self._native_wanted = False
            self._native, self.engine = native_drain.load()
        ring = self.ring
        empty = np.zeros(0, dtype=DEFAULT_LAYOUT.drained_dtype)
        changed_records = self.source.refresh()
        now = self.source.device_now_ns()
        generation = ring.generation
        if generation & 1:  # the owner is resetting the ring
            return DrainBatch(empty, self._counters, DEFAULT_LAYOUT, ring.ring_id, device_now_ns=now)
        changed = generation != self._generation
        if changed:
            self._begin_generation(generation)
        if not changed_records and not changed and self.caught_up:
            self._buffers = None
            return DrainBatch(empty, self._counters, DEFAULT_LAYOUT, ring.ring_id, device_now_ns=now)
        chunks, counts = self._pass()
        if ring.generation != generation:  # reset under our feet: nothing of this pass counts
            return DrainBatch(empty, self._counters, DEFAULT_LAYOUT, ring.ring_id, changed, device_now_ns=now)
        self._commit(counts)
        return DrainBatch(chunks, self._counters, DEFAULT_LAYOUT, ring.ring_id, changed, device_now_ns=now)

    # ---- one pass ---------------------------------------------------------------------------
    #
    # Per record, only a few whole-array operations run (the stamp checks, finding the warps' own
    # records, one gather into chunks); everything else works on the warps' own records and the
    # runs of events between them, a few per warp.

    def _pass(self) -> tuple[Array, _PassCounts]:
        cap = self.ring.geometry.records_per_segment
        mask = cap - 1
        before = self.source.stamps()
        first = self._next
        # Each segment's stamp at its read position says whether it moved: the next record is
        # there (moved), a later lap's is (lapped: only then is the newest stamp looked for), or
        # an older one or none (idle, left out of the pass).
        at = before[np.arange(len(first)), first & mask].astype(_I64)
        ahead = (at - first - 1) & _MASK32
        lapped = (ahead != 0) & (ahead < 1 << 31) & (at != 0)
        active = np.flatnonzero((ahead == 0) | lapped)
        if not len(active):
            self._buffers = None
            return _no_chunks(), _PassCounts.nothing(active)
        every = len(active) == len(first)
        f = first[active]
        rf = f.copy()  # readable from: older positions were lapped
        laps = np.flatnonzero(lapped[active])
        if len(laps):
            since = (before[active[laps]].astype(_I64) - (f[laps] + 1)[:, None]) & _MASK32
            since[since >= 1 << 31] = 0
            rf[laps] = f[laps] + 1 + since.max(axis=1) - cap
        off = rf & mask
        n = len(active)
        if self._native is not None and before.dtype == np.uint32 and before.ndim == 2:
            return self._native_pass(active, before, f, rf, off)
        scratch = self._scratch(n * cap)
        expected = scratch.expected[: n * cap].reshape(n, cap)  # rf + 1 + the slot's relative position
        np.subtract(self._slots[None, :], off.astype(np.uint32)[:, None], out=expected)
        np.bitwise_and(expected, np.uint32(mask), out=expected)
        np.add(expected, (rf + 1).astype(np.uint32)[:, None], out=expected)
        ok = scratch.ok[: n * cap].reshape(n, cap)
        check = scratch.check[: n * cap].reshape(n, cap)
        own = scratch.own[: n * cap].reshape(n, cap)
        stamped = before if every else before[active]
        records = self.source.rows(active)
        low = records.view(np.uint8).reshape(n, cap, 16)[..., 0]  # a word's low byte: 0 for own records
        # The stamps checked and the own records found a few segments at a time: where the
        # records are the copy the stamps came from (a GPU ring's mirror), the second reads what
        # the first brought into the cache (cheaper than two whole passes: docs/benchmark-log.md).
        for at in range(0, n, _BLOCK_SEGMENTS):
            block = slice(at, at + _BLOCK_SEGMENTS)
            np.equal(stamped[block], expected[block], out=ok[block])
            np.equal(low[block], 0, out=own[block])
        if not np.may_share_memory(records, before):  # a copy of its own: check its stamps too
            np.logical_and(ok, np.equal(records[..., 3], expected, out=check), out=ok)
        np.logical_and(ok, np.equal(self.source.stamps_after(active), expected, out=check), out=ok)
        # Each segment's first record not taken, in position order: the rows rolled to start at
        # the read position (bytes, a doubled row viewed at an offset), then one argmin.
        doubled = scratch.doubled[: 2 * n * cap].reshape(n, 2 * cap)
        doubled[:, :cap] = ok
        doubled[:, cap:] = ok
        rolled = np.lib.stride_tricks.sliding_window_view(doubled, cap, axis=1)[np.arange(n), off]
        stop = rolled.argmin(axis=1).astype(_I64)
        stop[rolled[np.arange(n), stop]] = cap
        own_row, own_slot = np.divmod(np.flatnonzero(own), cap)
        ctrl = _Own.of(records, (own_row, own_slot), (own_slot - off[own_row]) & mask, stop)
        stop = ctrl.whole_begins(stop)
        ctrl = ctrl.before(stop)
        return self._read(active, f, rf, stop, records, ctrl)

    def _native_pass(self, active: Array, before: Array, f: Array, rf: Array, off: Array) -> tuple[Array, _PassCounts]:
        """The per-record part of :meth:`_pass` in one native pass over each segment's readable
        records (stamps checked, stop and own records found); the rest is shared."""
        native = self._native
        assert native is not None
        cap = self.ring.geometry.records_per_segment
        n = len(active)
        records = np.ascontiguousarray(self.source.rows(active))
        after = self.source.stamps_after(active)
        own = self._own_scratch(n * cap // 8)
        stop, k = native.scan(before, active, records, after, off, rf, own)
        if k < 0:  # more own records than expected: scanned again with room for every record
            own = self._own_scratch(n * cap)
            stop, k = native.scan(before, active, records, after, off, rf, own)
        row, rel = np.divmod(own[0, :k], cap)
        word = own[1, :k]
        ctrl = _Own(row, rel, word, own[2, :k], own[3, :k], (word >> 8) & 0xF)
        whole = ctrl.whole_begins(stop)
        if (whole != stop).any():
            ctrl = ctrl.before(whole)
        return self._read(active, f, rf, whole, records, ctrl)

    def _own_scratch(self, size: int) -> Array:
        """Room for the own records a native pass notes (where, word, hi, payload), kept between
        passes like :meth:`_scratch`."""
        size = max(size, 1024)
        if self._own is None or self._own.shape[1] < size:
            self._own = np.empty((4, size), dtype=_I64)
        return self._own

    def _scratch(self, size: int) -> _Scratch:
        """Buffers of a pass, kept between the passes of a busy ring (fresh pages of that size
        cost more than the work done in them)."""
        if self._buffers is None or len(self._buffers.ok) < size:
            self._buffers = _Scratch.of(size)
        return self._buffers

    def _read(
        self, active: Array, f: Array, rf: Array, stop: Array, records: Array, ctrl: _Own
    ) -> tuple[Array, _PassCounts]:
        n_rows = len(active)
        k = len(ctrl.row)
        lapped = rf > f
        # The runs of events: one leading each segment's range, one trailing each own record.
        row_first = np.searchsorted(ctrl.row, np.arange(n_rows))
        row_end = np.searchsorted(ctrl.row, np.arange(n_rows), side="right")
        has = row_end > row_first
        lead_end = np.where(has, ctrl.rel[np.minimum(row_first, max(k - 1, 0))] if k else 0, stop)
        nxt_same = np.zeros(k, dtype=bool)
        nxt_same[:-1] = ctrl.row[1:] == ctrl.row[:-1]
        trail_end = np.where(nxt_same, np.r_[ctrl.rel[1:], 0], stop[ctrl.row]) if k else np.zeros(0, _I64)
        trail_start = ctrl.rel + 1
        trail_len = np.maximum(trail_end - trail_start, 0)
        lead_len = lead_end
        # Whose events each run holds: the warp of the begin records before it (its block record
        # owns the trailing run), the warp carried from the last pass for a leading run, none
        # after an end or a broken begin; the run after a record of no type is its predecessor's.
        group = ctrl.groups()
        member = np.zeros(k, dtype=bool)
        member[group] = member[group + 1] = member[group + 2] = True
        is_end = ctrl.type == RECORD_END
        # A launch or block record outside a whole group lost its begin record to a lap: lost
        # like the rest of that warp's records. A record of no type there is, or a begin record
        # without its group, was stored whole yet is impossible: torn.
        unknown = (ctrl.type < RECORD_BEGIN) | (ctrl.type > RECORD_END)
        torn = ~member & (unknown | (ctrl.type == RECORD_BEGIN))
        source = np.full(k, -2, dtype=_I64)  # -2 unknown, -1 carried, else the block record's index
        source[group + 2] = group + 2
        lead_source = np.where(self._warp["valid"][active] & ~lapped, -1, -2)
        for t in np.flatnonzero(unknown):  # rare: a record of no type there is
            prev = t - 1
            source[t] = source[prev] if prev >= 0 and ctrl.row[prev] == ctrl.row[t] else lead_source[ctrl.row[t]]
        # the run before each own record, and so the warp an end record ends
        before_src = np.where(
            np.r_[False, nxt_same[:-1]] if k else np.zeros(0, bool),
            np.r_[-2, source[:-1]] if k else source,
            lead_source[ctrl.row] if k else source,
        )
        valid_end = is_end & (before_src != -2)
        lead_known = lead_source != -2
        trail_known = source != -2
        # Identity tables: one row per source (carried per segment, or a begin group).
        ident = self._identities(active, rf, ctrl, group)
        # Events read and lost.
        lead_read = np.where(lead_known, lead_len, 0)
        trail_read = np.where(trail_known, trail_len, 0)
        events_read = int(lead_read.sum() + trail_read.sum())
        anchor = np.zeros(k, dtype=bool)
        anchor[group + 2] = True
        anchor |= valid_end
        value = np.zeros(k, dtype=_I64)
        value[group + 2] = ctrl.payload[group + 2]
        ends = np.flatnonzero(valid_end)
        src = before_src[ends]
        eb, begin_pos = ident.field("events_before", src, ctrl.row[ends]), ident.field("begin_pos", src, ctrl.row[ends])
        value[ends] = eb + rf[ctrl.row[ends]] + ctrl.rel[ends] - begin_pos - BEGIN_RECORDS
        events_lost, events_end = self._event_counts(
            active, ctrl, lead_read, trail_read, anchor, value & _MASK32, row_first, row_end
        )
        chunks = _pack(
            self._native,
            active,
            rf,
            records,
            ctrl,
            group,
            ident,
            lead_len,
            lead_source,
            trail_start,
            trail_len,
            source,
            valid_end,
            before_src,
        )
        self._carry(active, ctrl, lead_source, source, row_end, has, ident)
        n_records_read = events_read + 3 * len(group) + int(valid_end.sum())
        return chunks, _PassCounts(
            active=active,
            next_pos=rf + stop,
            records_written=int((rf + stop - f).sum()),
            records_read=n_records_read,
            torn=int(torn.sum()),
            events_read=events_read,
            events_lost=events_lost,
            events_end=events_end,
        )

    def _identities(self, active: Array, rf: Array, ctrl: _Own, group: Array) -> _Identities:
        carried = {name: self._warp[name][active] for name in _IDENTITY_FIELDS if name != "valid"}
        b, launch, k = group, group + 1, group + 2
        grouped = {
            "id_bits": (ctrl.word[b] >> 12) & 0xF,
            "kernel": (ctrl.word[b] >> 16) & 0xFF,
            "warp": ctrl.word[b] >> 24,
            "t_begin": ctrl.hi[b] << 32 | ctrl.payload[b],
            "module": ctrl.word[launch] >> 16,
            "launch": ctrl.hi[launch],
            "block_x": ctrl.payload[launch],
            "sm": ctrl.word[k] >> 16,
            "block_y": ctrl.hi[k] & 0xFFFF,
            "block_z": ctrl.hi[k] >> 16,
            "events_before": ctrl.payload[k],
            "begin_pos": rf[ctrl.row[b]] + ctrl.rel[b],
        }
        slot_of = np.full(len(ctrl.row), -1, dtype=_I64)
        slot_of[k] = np.arange(len(group))
        return _Identities(carried, grouped, slot_of)

    def _event_counts(
        self,
        active: Array,
        ctrl: _Own,
        lead_read: Array,
        trail_read: Array,
        anchor: Array,
        value: Array,
        row_first: Array,
        row_end: Array,
    ) -> tuple[int, tuple[Array, Array]]:
        """Events lost at each anchor (what its count says the segment wrote, less what was
        accounted before it), and each segment's events accounted after the pass."""
        k = len(ctrl.row)
        cum = np.cumsum(trail_read) - trail_read if k else trail_read  # trailing reads before each own record
        base = np.where(row_end > row_first, cum[np.minimum(row_first, max(k - 1, 0))] if k else 0, 0)
        reads_at = (
            lead_read[ctrl.row] + cum - base[ctrl.row] if k else cum
        )  # reads in the segment before each own record
        row_total = lead_read + np.bincount(ctrl.row, weights=trail_read, minlength=len(active)).astype(_I64)
        at = np.flatnonzero(anchor)
        start = self._events_end[active]
        end = (start + row_total) & _MASK32
        if not len(at):
            return 0, (active, end)
        g = ctrl.row[at]
        r = reads_at[at]
        same = np.zeros(len(at), dtype=bool)
        same[1:] = g[1:] == g[:-1]
        prev_value = np.where(same, np.r_[0, value[at][:-1]], start[g])
        prev_reads = np.where(same, np.r_[0, r[:-1]], 0)
        lost = int(((value[at] - prev_value - (r - prev_reads)) & _MASK32).sum())
        last = np.ones(len(at), dtype=bool)
        last[:-1] = ~same[1:]
        end[g[last]] = (value[at[last]] + row_total[g[last]] - r[last]) & _MASK32
        return lost, (active, end)

    def _carry(
        self,
        active: Array,
        ctrl: _Own,
        lead_source: Array,
        source: Array,
        row_end: Array,
        has: Array,
        ident: _Identities,
    ) -> None:
        """Remember, per segment, the warp its next records belong to: that of its last run."""
        k = len(ctrl.row)
        last_src = np.where(has, source[np.maximum(row_end - 1, 0)] if k else -2, lead_source)
        warp = self._warp
        warp["valid"][active] = last_src != -2
        grouped = np.flatnonzero(last_src >= 0)
        for name in _IDENTITY_FIELDS:
            if name != "valid":
                warp[name][active[grouped]] = ident.field(name, last_src[grouped], grouped)

    # ---- bookkeeping --------------------------------------------------------------------------

    def _commit(self, counts: _PassCounts) -> None:
        self._next[counts.active] = counts.next_pos
        segments, ends = counts.events_end
        self._events_end[segments] = ends
        events_lost = counts.events_lost + self._settle()
        self._add(
            chunks_written=counts.records_written,
            chunks_read=counts.records_read,
            chunks_lost=counts.records_written - counts.records_read,
            events_written=counts.events_read + events_lost,
            events_read=counts.events_read,
            events_lost=events_lost,
            torn=counts.torn,
        )

    def _settle(self) -> int:
        """Events lost in segments read up to where their last warp ended: the segment's
        counters (stored by that warp after its end record) say how many events it holds, so
        events of warps whose begin was lapped away are counted now, not when the next warp in
        the slot begins."""
        pairs = self.ring.counters.view("<u8").astype(_I64)  # each pair read whole, as a warp stores it
        done = np.flatnonzero((pairs & _MASK32) == (self._next & _MASK32))
        self.caught_up = len(done) == len(pairs)
        total = pairs[done] >> 32
        gap = (total - self._events_end[done]) & _MASK32
        settle = gap < 1 << 31
        self._events_end[done[settle]] = total[settle]
        return int(gap[settle].sum())

    def _add(self, **deltas: int) -> None:
        for name in ("_counters", "_generation_counters"):
            current: RingCounters = getattr(self, name)
            setattr(self, name, replace(current, **{k: getattr(current, k) + v for k, v in deltas.items()}))

    def _begin_generation(self, generation: int) -> None:
        """The owner reset the ring: what the old generation wrote and we never saw is lost."""
        retired_records, retired_events = self.ring.retired
        old_records = retired_records - self._retired[0]
        old_events = retired_events - self._retired[1]
        seen = self._generation_counters
        self._add(
            chunks_written=max(0, old_records - seen.chunks_written),
            chunks_lost=max(0, old_records - seen.chunks_written),
            events_written=max(0, old_events - seen.events_written),
            events_lost=max(0, old_events - seen.events_written),
        )
        self._counters = replace(self._counters, generation=generation, resets=self._counters.resets + 1)
        self._generation_counters = RingCounters(generation=generation)
        self._generation = generation
        self._retired = (retired_records, retired_events)
        self._next[:] = 0
        self._events_end[:] = 0
        self._warp["valid"][:] = False
        self.caught_up = False

    def batches(self, stop: threading.Event) -> Iterator[DrainBatch]:
        """A batch every period (only batches that hold chunks or changed the counters), until
        ``stop`` is set; a last pass runs after it is set, so nothing written before is missed."""
        last = self._counters
        while True:
            stopping = stop.wait(self.period_s)
            batch = self.drain()
            if len(batch.chunks) or batch.counters != last:
                last = batch.counters
                yield batch
            if stopping:
                return

    def run(self, emit: Callable[[DrainBatch], None], stop: threading.Event) -> threading.Thread:
        """Drain on a daemon thread named ``iket-tui-ring-drain``, passing each batch to ``emit``."""

        def loop() -> None:
            for batch in self.batches(stop):
                emit(batch)

        thread = threading.Thread(target=loop, name="iket-tui-ring-drain", daemon=True)
        thread.start()
        return thread


@dataclass(frozen=True)
class _Own:
    """The warps' own records of a pass (begin, launch, block and end records, and records of
    no type there is), in segment then position order."""

    row: Array
    """Index of each record's segment among the pass's active segments."""
    rel: Array
    """Its position, relative to where the segment's readable records start."""
    word: Array
    hi: Array
    payload: Array
    type: Array

    @classmethod
    def of(cls, records: Array, own: tuple[Array, Array], relative: Array, stop: Array) -> _Own:
        row, slot = own
        readable = relative < stop[row]
        row, slot, relative = row[readable], slot[readable], relative[readable]
        order = np.lexsort((relative, row))
        row, slot, relative = row[order].astype(_I64), slot[order], relative[order]
        picked = records[row, slot].astype(_I64)
        word = picked[:, 0]
        found = cls(row, relative, word, picked[:, 1], picked[:, 2], (word >> 8) & 0xF)
        return found.before(stop)

    def before(self, stop: Array) -> _Own:
        keep = self.rel < stop[self.row]
        return _Own(self.row[keep], self.rel[keep], self.word[keep], self.hi[keep], self.payload[keep], self.type[keep])

    def whole_begins(self, stop: Array) -> Array:
        """``stop`` moved back before a warp's begin records where not all of them are readable
        yet, so that a warp's identity is always read whole, in one pass."""
        stop = stop.copy()
        k = len(self.row)
        if not k:
            return stop
        last = np.ones(k, dtype=bool)
        last[:-1] = self.row[1:] != self.row[:-1]
        at = np.flatnonzero(last)
        row = self.row[at]
        cut1 = (self.type[at] == RECORD_BEGIN) & (self.rel[at] == stop[row] - 1)
        prev = np.maximum(at - 1, 0)
        cut2 = (
            (self.type[at] == RECORD_LAUNCH)
            & (self.rel[at] == stop[row] - 1)
            & (at > 0)
            & (self.row[prev] == row)
            & (self.type[prev] == RECORD_BEGIN)
            & (self.rel[prev] == stop[row] - 2)
        )
        stop[row[cut1]] -= 1
        stop[row[cut2]] -= 2
        return stop

    def groups(self) -> Array:
        """Where each whole begin group (begin, launch and block records at consecutive
        positions, with a width of event ids there is) starts."""
        k = len(self.row)
        begins = np.flatnonzero(self.type == RECORD_BEGIN)
        begins = begins[begins + 2 < k]
        whole = (
            (self.row[begins + 2] == self.row[begins])
            & (self.type[begins + 1] == RECORD_LAUNCH)
            & (self.type[begins + 2] == RECORD_BLOCK)
            & (self.rel[begins + 1] == self.rel[begins] + 1)
            & (self.rel[begins + 2] == self.rel[begins] + 2)
            & (((self.word[begins] >> 12) & 0xF) >= 5)
            & (((self.word[begins] >> 12) & 0xF) <= 8)
        )
        grouped: Array = begins[whole]
        return grouped


@dataclass(frozen=True)
class _Scratch:
    """A pass's per-record work arrays, one slot per record of the ring."""

    expected: Array
    ok: Array
    check: Array
    own: Array
    doubled: Array

    @classmethod
    def of(cls, size: int) -> _Scratch:
        return cls(
            np.empty(size, dtype=np.uint32),
            np.empty(size, dtype=bool),
            np.empty(size, dtype=bool),
            np.empty(size, dtype=bool),
            np.empty(2 * size, dtype=bool),
        )


@dataclass(frozen=True)
class _Identities:
    """Warp identities of a pass: carried per active segment from the last pass, or read from a
    begin group (found by its block record's index among the pass's own records)."""

    carried: dict[str, Array]
    grouped: dict[str, Array]
    slot_of: Array

    def header_table(self) -> Array:
        """Words 3 to 7 of a drained chunk's header (flags and event counts left 0) for every
        warp of the pass: the carried ones (one per active segment), then the grouped ones."""
        table: Array = np.concatenate([_header_words(self.carried), _header_words(self.grouped)])
        return table

    def header_index(self, source: Array, row: Array) -> Array:
        """The row of :meth:`header_table` of the warp ``source`` names in segment ``row``."""
        if not len(self.grouped["module"]):
            return row
        index: Array = np.where(source >= 0, self.slot_of[np.maximum(source, 0)] + len(self.carried["module"]), row)
        return index

    def field(self, name: str, source: Array, row: Array) -> Array:
        """``name`` of the warp ``source`` names (-1: the one carried in segment ``row``)."""
        carried = self.carried[name][row]
        grouped = self.grouped[name]
        if not len(grouped):
            return carried
        picked = grouped[self.slot_of[np.maximum(source, 0)]]
        out: Array = np.where(source >= 0, picked, carried)
        return out


def _header_words(fields: dict[str, Array]) -> Array:
    """Words 3 to 7 of a drained chunk's header, one row per warp of ``fields``."""
    words = np.empty((len(fields["module"]), 5), dtype=np.uint32)
    words[:, 0] = fields["module"] | fields["kernel"] << 16
    words[:, 1] = fields["launch"]
    words[:, 2] = fields["block_x"]
    words[:, 3] = fields["block_y"] | fields["block_z"] << 16
    words[:, 4] = fields["warp"] | fields["id_bits"] << 24
    return words


@dataclass(frozen=True)
class _PassCounts:
    active: Array
    next_pos: Array
    records_written: int
    records_read: int
    torn: int
    events_read: int
    events_lost: int
    events_end: tuple[Array, Array]

    @classmethod
    def nothing(cls, active: Array) -> _PassCounts:
        return cls(active, active, 0, 0, 0, 0, 0, (active, active))


def _no_chunks() -> Array:
    return np.zeros(0, dtype=DEFAULT_LAYOUT.drained_dtype)


def _pack(
    native: NativePass | None,
    active: Array,
    rf: Array,
    records: Array,
    ctrl: _Own,
    group: Array,
    ident: _Identities,
    lead_len: Array,
    lead_source: Array,
    trail_start: Array,
    trail_len: Array,
    source: Array,
    valid_end: Array,
    before_src: Array,
) -> Array:
    """The drained chunks of a pass: each run of a known warp's events cut into chunks of at most
    :data:`DRAINED_EVENTS_PER_CHUNK` (and where it wraps around its segment, and where its events
    would lie 2**32 ns or more from the chunk's first), the first flagged when the warp began in
    this pass, the last when it ended; a warp that began or ended with no event beside it gets a
    chunk of its own with no events, its ``t_base`` the time it began or ended. With the
    ``native`` pass, the chunks are written from the pieces they are cut from in one go."""
    layout = DEFAULT_LAYOUT
    cap = records.shape[1]
    k = len(ctrl.row)
    n_rows = len(active)
    next_is_end = np.zeros(k, dtype=bool)
    if k:
        next_is_end[:-1] = valid_end[1:] & (ctrl.row[1:] == ctrl.row[:-1])
    first_of_row = np.searchsorted(ctrl.row, np.arange(n_rows))
    lead_ended = np.zeros(n_rows, dtype=bool)
    if k:
        has = first_of_row < k
        lead_ended[has] = valid_end[first_of_row[has]] & (ctrl.row[first_of_row[has]] == np.flatnonzero(has))
    # Runs: (row, start rel, length, source, began here, ended here).
    began_here = np.zeros(k, dtype=bool)
    began_here[group + 2] = True
    run_row = np.r_[np.arange(n_rows), ctrl.row]
    run_start = np.r_[np.zeros(n_rows, dtype=_I64), trail_start]
    run_len = np.r_[lead_len, trail_len]
    run_src = np.r_[lead_source, source]
    run_began = np.r_[np.zeros(n_rows, dtype=bool), began_here]
    run_ended = np.r_[lead_ended, next_is_end]
    use = (run_src != -2) & (run_len > 0)
    # Warps with no event beside their begin or end in this pass: a chunk of their own.
    empty_begin = group[trail_len[group + 2] == 0] if k else group
    ended = np.flatnonzero(valid_end)
    prev_run_used = np.zeros(len(ended), dtype=bool)
    if len(ended):
        prev_same = (ended > 0) & (ctrl.row[np.maximum(ended - 1, 0)] == ctrl.row[ended])
        prev_run_used = np.where(
            prev_same,
            use[n_rows + np.maximum(ended - 1, 0)],
            use[ctrl.row[ended]],
        )
    empty_end = ended[~prev_run_used]
    r_row, r_start, r_len, r_src = run_row[use], run_start[use], run_len[use], run_src[use]
    r_began, r_ended = run_began[use], run_ended[use]
    # Pieces: each run cut where it wraps around its segment, and a piece of no events for each
    # warp that began or ended with none beside it in this pass. They are sorted once, in
    # segment then position order (a few per warp), so the chunks cut from them come out in
    # order; a piece's first chunk takes its begin flag, its last its end flag.
    slot0 = (rf[r_row] + r_start) & (cap - 1)
    first_len = np.minimum(r_len, cap - slot0)
    wraps = np.flatnonzero(first_len < r_len)
    no_events = np.zeros(len(empty_begin) + len(empty_end), dtype=_I64)
    p_row = np.r_[r_row, r_row[wraps], ctrl.row[empty_begin], ctrl.row[empty_end]]
    p_rel = np.r_[r_start, r_start[wraps] + first_len[wraps], ctrl.rel[empty_begin], ctrl.rel[empty_end]]
    p_slot = np.r_[slot0, np.zeros(len(wraps), dtype=_I64), no_events]
    p_len = np.r_[first_len, r_len[wraps] - first_len[wraps], no_events]
    p_src = np.r_[r_src, r_src[wraps], empty_begin + 2, before_src[empty_end]]
    ended_whole = r_ended.copy()
    ended_whole[wraps] = False
    p_first = np.r_[
        np.where(r_began, FLAG_WARP_BEGIN, 0),
        np.zeros(len(wraps), dtype=_I64),
        np.full(len(empty_begin), FLAG_WARP_BEGIN, dtype=_I64),
        np.zeros(len(empty_end), dtype=_I64),
    ]
    p_last = np.r_[
        np.where(ended_whole, FLAG_WARP_END, 0),
        np.where(r_ended[wraps], FLAG_WARP_END, 0),
        np.zeros(len(empty_begin), dtype=_I64),
        np.full(len(empty_end), FLAG_WARP_END, dtype=_I64),
    ]
    order = np.argsort(p_row << 32 | p_rel, kind="stable")
    p_row, p_rel, p_slot, p_len, p_src = p_row[order], p_rel[order], p_slot[order], p_len[order], p_src[order]
    p_first, p_last = p_first[order], p_last[order]
    table = ident.header_table()
    p_header = ident.header_index(p_src, p_row)
    if native is not None:
        written = _native_chunks(
            native, active, records, ctrl, table, p_row, p_rel, p_slot, p_len, p_header, p_first, p_last
        )
        if written is not None:
            return written
    # Chunks: every DRAINED_EVENTS_PER_CHUNK events of a piece, one for a piece of none.
    per = DRAINED_EVENTS_PER_CHUNK
    n_chunks = np.maximum(-(-p_len // per), 1)
    first_chunk = np.cumsum(n_chunks) - n_chunks
    last_chunk = first_chunk + n_chunks - 1
    piece = np.repeat(np.arange(len(p_len)), n_chunks)
    index_in = per * (np.arange(len(piece)) - first_chunk[piece])
    c_row = p_row[piece]
    c_rel = p_rel[piece] + index_in
    c_slot = p_slot[piece] + index_in
    c_n = np.full(len(piece), per, dtype=_I64)
    c_n[last_chunk] = p_len - per * (n_chunks - 1)
    c_header = p_header[piece]
    c_flags = np.full(len(piece), FLAG_PAYLOAD_EVERY_EVENT, dtype=_I64)
    c_flags[first_chunk] |= p_first
    c_flags[last_chunk] |= p_last
    id_bits = (table[c_header, 4] >> 24).astype(_I64)
    t_first, t_last = _span(records, c_row, c_slot, c_n, id_bits)
    wide = np.flatnonzero(t_last - t_first >= 1 << 32)
    if len(wide):  # events seconds apart (a warp that waited): rare, cut by hand
        c_row, c_rel, c_slot, c_n, c_header, c_flags = _cut_wide(
            wide, records, id_bits, c_row, c_rel, c_slot, c_n, c_header, c_flags
        )
        id_bits = (table[c_header, 4] >> 24).astype(_I64)
        t_first, _ = _span(records, c_row, c_slot, c_n, id_bits)
    # A chunk of no events: its t_base is when its warp began or ended, from that record; an
    # ended warp's last chunk takes the end record's flags (partial warp, diverged lanes).
    key = ctrl.row << 32 | ctrl.rel
    empty = np.flatnonzero(c_n == 0)
    own = np.searchsorted(key, c_row[empty] << 32 | c_rel[empty])
    t_first[empty] = ctrl.hi[own] << 32 | ctrl.payload[own]
    ended = np.flatnonzero(c_flags & FLAG_WARP_END)
    end_flags = (ctrl.word[np.searchsorted(key, c_row[ended] << 32 | (c_rel[ended] + c_n[ended]))] >> 12) & 0xF
    c_flags[ended] |= np.where(end_flags & END_PARTIAL, FLAG_PARTIAL_WARP, 0) | np.where(
        end_flags & END_DIVERGED, FLAG_DIVERGED, 0
    )
    row, slot, n = c_row, c_slot, c_n
    out = np.zeros(len(row), dtype=layout.drained_dtype)
    body = out.view("<u4").reshape(len(out), layout.chunk_words)
    body[:, 3:8] = table[c_header]  # module and kernel, launch, block, warp and id bits
    body[:, 3] |= c_flags.astype(np.uint32) << 24
    body[:, 7] |= n.astype(np.uint32) * 0x10100  # n_events and n_payloads
    out["segment"] = active[row]
    out["t_base"] = t_first
    # The events: each chunk's words and payloads (columns 0 and 2 of its records) gathered in
    # one go, as windows of DRAINED_EVENTS_PER_CHUNK consecutive records, into its 26 event words
    # and the 26 payload words after them; places past a chunk's events are zeroed. (Gathering
    # the columns one by one, as 64-bit pairs or as whole 416-byte windows measured slower:
    # benchmarks/ring_drain_variants.py.)
    columns = records.reshape(-1, 4)[:, ::2]  # (records, 2): word and payload
    start = row * cap + slot
    if len(columns) >= per:
        windows = np.lib.stride_tricks.sliding_window_view(columns, per, axis=0)  # (records - per + 1, 2, per)
        picked = windows[np.minimum(start, len(windows) - 1)]
    else:
        picked = np.zeros((len(out), 2, per), dtype=np.uint32)
    for c in np.flatnonzero(start + per > len(columns)):  # at most the last chunks of the last segment
        picked[c] = 0
        picked[c, :, : n[c]] = columns[start[c] : start[c] + n[c]].T
    partial = np.flatnonzero(n < per)
    picked[partial] *= np.arange(per)[None, None, :] < n[partial, None, None]
    body[:, HEADER_WORDS : HEADER_WORDS + 2 * per].reshape(len(out), 2, per)[...] = picked
    return out


def _native_chunks(
    native: NativePass,
    active: Array,
    records: Array,
    ctrl: _Own,
    table: Array,
    p_row: Array,
    p_rel: Array,
    p_slot: Array,
    p_len: Array,
    p_header: Array,
    p_first: Array,
    p_last: Array,
) -> Array | None:
    """The chunks :func:`_pack` cuts from its pieces, written by the native pass; ``None``
    where a chunk's events lie 2**32 ns or more apart (numpy then cuts them, as always).

    What each chunk takes from its warp's own records is found per piece: a piece of no events
    has the time of the record it stands for (its warp's begin or end), an ended warp's last
    piece the end record's flags (the chunk cut last from it carries them)."""
    key = ctrl.row << 32 | ctrl.rel
    empty_t = np.zeros(len(p_len), dtype=_I64)
    empty = np.flatnonzero(p_len == 0)
    own = np.searchsorted(key, p_row[empty] << 32 | p_rel[empty])
    empty_t[empty] = ctrl.hi[own] << 32 | ctrl.payload[own]
    last = p_last.copy()
    ended = np.flatnonzero(p_last & FLAG_WARP_END)
    end_flags = (ctrl.word[np.searchsorted(key, p_row[ended] << 32 | (p_rel[ended] + p_len[ended]))] >> 12) & 0xF
    last[ended] |= np.where(end_flags & END_PARTIAL, FLAG_PARTIAL_WARP, 0) | np.where(
        end_flags & END_DIVERGED, FLAG_DIVERGED, 0
    )
    n_chunks = int(np.maximum(-(-p_len // DRAINED_EVENTS_PER_CHUNK), 1).sum())
    out = np.empty(n_chunks, dtype=DEFAULT_LAYOUT.drained_dtype)
    body = out.view("<u4").reshape(n_chunks, DEFAULT_LAYOUT.chunk_words)
    fits = native.chunks(records, p_row, p_slot, p_len, p_header, p_first, last, empty_t, active, table, body)
    return out if fits else None


def _span(records: Array, row: Array, slot: Array, n: Array, id_bits: Array) -> tuple[Array, Array]:
    """The times of each chunk's first and last event."""
    cap = records.shape[1]
    times = records.reshape(-1, 4).view("<i8")[:, 0]  # word | hi << 32: the time, the id in its low bits
    start = row * cap + slot
    not_id = ~((np.int64(1) << id_bits) - 1)
    t_first = times[start] & not_id
    t_last = times[start + np.maximum(n - 1, 0)] & not_id
    return t_first, t_last


def _cut_wide(
    wide: Array, records: Array, id_bits: Array, *columns: Array
) -> tuple[Array, Array, Array, Array, Array, Array]:
    """Chunks ``wide`` cut where an event lies 2**32 ns or more after its chunk's first, so that
    every 32-bit time word reads back exactly; a warp's begin flag stays on the first piece,
    its end flag goes to the last."""
    cap = records.shape[1]
    flat = records.reshape(-1, 4)
    row, rel, slot, n, src, flags = (list(column) for column in columns)
    for c in sorted(wide.tolist(), reverse=True):
        start = int(row[c]) * cap + int(slot[c])
        chunk = flat[start : start + int(n[c])].astype(_I64)
        times = chunk[:, 1] << 32 | (chunk[:, 0] & ~((1 << int(id_bits[c])) - 1))
        cuts = [0]
        for i in range(1, len(times)):
            if times[i] - times[cuts[-1]] >= 1 << 32:
                cuts.append(i)
        pieces = [(a, b) for a, b in zip(cuts, [*cuts[1:], int(n[c])], strict=True)]
        new = []
        for index, (a, b) in enumerate(pieces):
            flag = FLAG_PAYLOAD_EVERY_EVENT
            if index == 0:
                flag |= flags[c] & FLAG_WARP_BEGIN
            if index == len(pieces) - 1:
                flag |= flags[c] & FLAG_WARP_END
            new.append((row[c], rel[c] + a, slot[c] + a, b - a, src[c], flag))
        for target, values in zip((row, rel, slot, n, src, flags), zip(*new, strict=True), strict=True):
            target[c : c + 1] = list(values)
    out = tuple(np.asarray(column, dtype=_I64) for column in (row, rel, slot, n, src, flags))
    return out[0], out[1], out[2], out[3], out[4], out[5]


def record_words(records: Array, segments: Array, *, copy: bool = True) -> Array:
    """The records of ``segments`` as plain 32-bit words, shape (segments, records, 4): a copy,
    or (``copy=False``, for memory nothing writes meanwhile) a view where all are asked for."""
    words = records.view("<u4").reshape(*records.shape, 4)
    if len(segments) == len(records):
        whole: Array = np.array(words) if copy else words
        return whole
    picked: Array = np.take(words, segments, axis=0)
    return picked


def sm_of(chunks: Array, warp_slots: int = WARP_SLOTS) -> Array:
    """The SM each drained chunk was written on (the segment's SM; the begin records say the
    SM itself, which is the same where the ring has a segment for every warp slot)."""
    return chunks["segment"] // warp_slots
