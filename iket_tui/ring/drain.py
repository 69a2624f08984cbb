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
end read in each segment (each carries the segment's event count), which is how events of
lapped records are counted.

Where the ring is not in this process's memory (a GPU's device memory), a
:class:`RecordSource` brings it: the agent's copies it with a DMA engine.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

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
    RECORD_DTYPE,
    RECORD_END,
    RECORD_LAUNCH,
    WARP_SLOTS,
)

__all__ = ["DEFAULT_PERIOD_S", "DrainBatch", "LiveRing", "RecordSource", "RingCounters", "RingDrain", "sm_of"]

DEFAULT_PERIOD_S = 0.05
"""20 Hz."""

_MASK32 = 0xFFFFFFFF
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

    def copy(self, flat: Array) -> Array:
        """The records at flat indices ``flat`` (``RECORD_DTYPE``), a copy taken after :meth:`stamps`."""
        ...

    def stamps_after(self, flat: Array) -> Array:
        """The stamps at ``flat`` again, read after :meth:`copy`."""
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
        self._flat = ring.records.reshape(-1)

    def refresh(self) -> bool:
        return True

    def stamps(self) -> Array:
        return np.array(self.ring.records["stamp"])

    def copy(self, flat: Array) -> Array:
        return self._flat[flat]

    def stamps_after(self, flat: Array) -> Array:
        return self._flat["stamp"][flat]

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
        self, ring: RingView, *, period_s: float = DEFAULT_PERIOD_S, source: RecordSource | None = None
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
        """Whether the last pass read every record it saw written (no segment stopped early)."""

    @property
    def counters(self) -> RingCounters:
        return self._counters

    def drain(self) -> DrainBatch:
        """Read every record written since the last pass."""
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
            return DrainBatch(empty, self._counters, DEFAULT_LAYOUT, ring.ring_id, device_now_ns=now)
        chunks, counts = self._pass()
        if ring.generation != generation:  # reset under our feet: nothing of this pass counts
            return DrainBatch(empty, self._counters, DEFAULT_LAYOUT, ring.ring_id, changed, device_now_ns=now)
        self._commit(counts)
        return DrainBatch(chunks, self._counters, DEFAULT_LAYOUT, ring.ring_id, changed, device_now_ns=now)

    # ---- one pass ---------------------------------------------------------------------------

    def _pass(self) -> tuple[Array, _PassCounts]:
        cap = self.ring.geometry.records_per_segment
        before = self.source.stamps().astype(_I64)
        slots = np.arange(cap, dtype=_I64)
        written = (before != 0) & (((before - 1) & (cap - 1)) == slots)
        newest = np.where(written, before - 1, -1).max(axis=1)
        first = self._next
        active = np.flatnonzero(newest >= first)
        newest_a, first_a = newest[active], first[active]
        readable_from = np.maximum(first_a, newest_a - cap + 1)
        counts = newest_a - readable_from + 1
        starts = np.cumsum(counts) - counts
        total = int(counts.sum())
        group = np.repeat(np.arange(len(active)), counts)
        pos = np.repeat(readable_from - starts, counts) + np.arange(total)
        flat = active[group] * cap + (pos & (cap - 1))
        expected = (pos + 1) & _MASK32
        records = self.source.copy(flat)
        after = self.source.stamps_after(flat)
        ok = (before.reshape(-1)[flat] == expected) & (records["stamp"] == expected) & (after == expected)
        stop = newest_a + 1
        bad = np.flatnonzero(~ok)
        if len(bad):
            first_bad, at = np.unique(group[bad], return_index=True)
            stop[first_bad] = pos[bad[at]]
        self.caught_up = not len(bad)
        stop = self._whole_begins(stop, readable_from, starts, records)
        keep = pos < stop[group]
        kept = _Kept(active[group[keep]], pos[keep], records[keep], group[keep])
        chunks, counts_ = self._read(kept, active, first_a, readable_from, stop)
        return chunks, counts_

    def _whole_begins(self, stop: Array, readable_from: Array, starts: Array, records: Array) -> Array:
        """Stop a segment before a warp's begin records when not all of them are readable yet,
        so that a warp's identity is always read whole, in one pass."""
        words = records["word"]
        types = []
        for back in (1, 2):
            at = stop - back
            can = np.flatnonzero(at >= readable_from)
            kind = np.full(len(stop), -1, dtype=_I64)
            kind[can] = words[starts[can] + (at[can] - readable_from[can])] & 0xFFF
            types.append(kind)
        cut1 = types[0] == RECORD_BEGIN << 8
        cut2 = (types[1] == RECORD_BEGIN << 8) & (types[0] == RECORD_LAUNCH << 8)
        cut: Array = stop - cut1 - 2 * cut2
        return cut

    def _read(
        self, kept: _Kept, active: Array, first_a: Array, readable_from: Array, stop: Array
    ) -> tuple[Array, _PassCounts]:
        n = len(kept.pos)
        words = kept.records["word"].astype(_I64)
        is_event = (words & 0xFF) != 0
        rtype = np.where(is_event, 0, (words >> 8) & 0xF)
        seg_first = np.ones(n, dtype=bool)
        seg_first[1:] = kept.segment[1:] != kept.segment[:-1]
        first_index = np.maximum.accumulate(np.where(seg_first, np.arange(n), 0))
        # A warp's begin records: BEGIN, LAUNCH, BLOCK at consecutive positions of one segment.
        begins = np.flatnonzero(rtype == RECORD_BEGIN)
        whole = begins + 2 < n
        whole[whole] &= (rtype[begins[whole] + 1] == RECORD_LAUNCH) & (rtype[begins[whole] + 2] == RECORD_BLOCK)
        whole[whole] &= kept.segment[begins[whole] + 2] == kept.segment[begins[whole]]
        whole[whole] &= ((words[begins[whole]] >> 12) & 0xF) - 5 <= 3
        begins = begins[whole]
        member = np.zeros(n, dtype=bool)
        member[begins] = member[begins + 1] = member[begins + 2] = True
        torn = (rtype != 0) & ~member & (rtype != RECORD_END)
        ends = np.flatnonzero(rtype == RECORD_END)
        # The last begin and the last end at or before each record, within its segment.
        last_begin = np.full(n, -1, dtype=_I64)
        last_begin[begins] = begins
        last_begin = np.maximum.accumulate(last_begin)
        last_end = np.full(n, -1, dtype=_I64)
        last_end[ends] = ends
        last_end = np.maximum.accumulate(last_end)
        end_before = np.empty(n, dtype=_I64)
        end_before[:1] = -1
        end_before[1:] = last_end[:-1]
        in_pass = (last_begin >= first_index) & (last_begin > end_before)
        lapped = readable_from > first_a  # per active segment: the pass starts after a lap
        carried_ok = self._warp["valid"][active] & ~lapped
        carried = (last_begin < first_index) & (end_before < first_index) & carried_ok[kept.group]
        known = (in_pass | carried) & ~torn
        # Identity of every known record: from its begin records, or carried from an earlier pass.
        identity = self._identity(kept, words, last_begin, in_pass, known)
        valid_end = (rtype == RECORD_END) & known
        read_event = is_event & known
        read = read_event | member | valid_end
        # Events: anchored by each warp's block record (the segment's events before the warp)
        # and each end whose warp is known (events before it plus the warp's own).
        anchor = np.zeros(n, dtype=bool)
        anchor[begins + 2] = True
        anchor |= valid_end
        value = np.zeros(n, dtype=_I64)
        value[begins + 2] = kept.records["payload"][begins + 2]
        ended = np.flatnonzero(valid_end)
        value[ended] = identity["events_before"][ended] + kept.pos[ended] - identity["begin_pos"][ended] - BEGIN_RECORDS
        events_lost, events_end = self._event_counts(kept, read_event, anchor, value & _MASK32, seg_first, active)
        chunks = _pack(kept, words, is_event, rtype, read_event, begins, valid_end, identity)
        self._carry(kept, active, lapped, identity, begins, ends, rtype)
        written = int((stop - first_a).sum())
        n_read = int(read.sum())
        return chunks, _PassCounts(
            active=active,
            next_pos=stop,
            records_written=written,
            records_read=n_read,
            torn=int(torn.sum()),
            events_read=int(read_event.sum()),
            events_lost=events_lost,
            events_end=events_end,
        )

    def _identity(self, kept: _Kept, words: Array, last_begin: Array, in_pass: Array, known: Array) -> dict[str, Array]:
        n = len(words)
        out = {name: np.zeros(n, dtype=_I64) for name in _IDENTITY_FIELDS if name != "valid"}
        at = np.flatnonzero(known & in_pass)
        if len(at):
            b = last_begin[at]
            records = kept.records
            wb, wl, wk = words[b], words[b + 1], words[b + 2]
            out["id_bits"][at] = (wb >> 12) & 0xF
            out["kernel"][at] = (wb >> 16) & 0xFF
            out["warp"][at] = wb >> 24
            out["t_begin"][at] = records["hi"][b].astype(_I64) << 32 | records["payload"][b]
            out["module"][at] = wl >> 16
            out["launch"][at] = records["hi"][b + 1]
            out["block_x"][at] = records["payload"][b + 1]
            out["sm"][at] = wk >> 16
            hi = records["hi"][b + 2].astype(_I64)
            out["block_y"][at] = hi & 0xFFFF
            out["block_z"][at] = hi >> 16
            out["events_before"][at] = records["payload"][b + 2]
            out["begin_pos"][at] = kept.pos[b]
        at = np.flatnonzero(known & ~in_pass)
        if len(at):
            segment = kept.segment[at]
            for name in out:
                out[name][at] = self._warp[name][segment]
        return out

    def _event_counts(
        self, kept: _Kept, read_event: Array, anchor: Array, value: Array, seg_first: Array, active: Array
    ) -> tuple[int, tuple[Array, Array]]:
        """Events lost at each anchor (what its count says the segment wrote, less what was
        accounted before it), and each segment's events accounted after the pass."""
        if not len(kept.pos):
            return 0, (active[:0], active[:0])
        reads = np.cumsum(read_event, dtype=_I64)
        base = (reads - read_event)[seg_first]  # reads before each segment's first record
        seg_of = np.cumsum(seg_first) - 1
        segments = kept.segment[seg_first]
        at = np.flatnonzero(anchor)
        lost = 0
        end = (
            self._events_end[segments] + reads[np.r_[np.flatnonzero(seg_first)[1:], len(reads)] - 1] - base
        ) & _MASK32
        if len(at):
            g = seg_of[at]
            r = reads[at] - base[g]
            prev_value = np.empty(len(at), dtype=_I64)
            prev_reads = np.empty(len(at), dtype=_I64)
            same = np.zeros(len(at), dtype=bool)
            same[1:] = g[1:] == g[:-1]
            prev_value[~same] = self._events_end[segments[g[~same]]]
            prev_reads[~same] = 0
            prev_value[1:][same[1:]] = value[at[:-1]][same[1:]]
            prev_reads[1:][same[1:]] = r[:-1][same[1:]]
            lost = int(((value[at] - prev_value - (r - prev_reads)) & _MASK32).sum())
            last = np.ones(len(at), dtype=bool)
            last[:-1] = g[1:] != g[:-1]
            seg_total = reads[np.r_[np.flatnonzero(seg_first)[1:], len(reads)] - 1] - base
            end[g[last]] = (value[at[last]] + seg_total[g[last]] - r[last]) & _MASK32
        return lost, (segments, end)

    def _carry(
        self,
        kept: _Kept,
        active: Array,
        lapped: Array,
        identity: dict[str, Array],
        begins: Array,
        ends: Array,
        rtype: Array,
    ) -> None:
        """Remember, per segment, the warp its next records belong to."""
        warp = self._warp
        warp["valid"][active[lapped]] = False
        anchors = np.sort(np.concatenate([begins, ends]))
        if not len(anchors):
            return
        segment = kept.segment[anchors]
        last = np.ones(len(anchors), dtype=bool)
        last[:-1] = segment[1:] != segment[:-1]
        final = anchors[last]
        seg = segment[last]
        opened = rtype[final] == RECORD_BEGIN
        warp["valid"][seg] = opened
        at, seg = final[opened], seg[opened]
        for name in _IDENTITY_FIELDS:
            if name != "valid":
                warp[name][seg] = identity[name][at]

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
class _Kept:
    """The records a pass takes, in segment then position order."""

    segment: Array
    pos: Array
    records: Array
    group: Array
    """Index of each record's segment among the pass's active segments."""


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


def _pack(
    kept: _Kept,
    words: Array,
    is_event: Array,
    rtype: Array,
    read_event: Array,
    begins: Array,
    valid_end: Array,
    identity: dict[str, Array],
) -> Array:
    """The drained chunks of a pass: for each warp, its begin, events and end in order, cut into
    chunks of at most :data:`DRAINED_EVENTS_PER_CHUNK` events that lie within 2**32 ns of the
    chunk's first (so a chunk's 32-bit time words are exact against its ``t_base``)."""
    layout = DEFAULT_LAYOUT
    is_begin = np.zeros(len(words), dtype=bool)
    is_begin[begins] = True
    items = np.flatnonzero(read_event | is_begin | valid_end)
    if not len(items):
        return np.zeros(0, dtype=layout.drained_dtype)
    records = kept.records[items]
    hi = records["hi"].astype(_I64) << 32
    ev = is_event[items]
    mask = (np.int64(1) << identity["id_bits"][items]) - 1
    t = np.where(ev, hi | (words[items] & ~mask), hi | records["payload"])
    begin = is_begin[items]
    warp_key = np.where(begin, items, 0)
    warp_key = np.maximum.accumulate(warp_key)  # begins start warps; others follow the one before
    segment = kept.segment[items]
    new_group = np.ones(len(items), dtype=bool)
    new_group[1:] = (segment[1:] != segment[:-1]) | (warp_key[1:] != warp_key[:-1])
    new_group |= begin
    starts = _chunk_starts(new_group, ev)
    chunk = np.cumsum(starts) - 1
    span = np.zeros(int(chunk[-1]) + 1, dtype=_I64)
    np.maximum.at(span, chunk, t - t[np.flatnonzero(starts)][chunk])
    if (span >= 1 << 32).any():  # events seconds apart: cut those chunks where bit 31 of the time changes
        wide = span[chunk] >= 1 << 32
        new_group[1:] |= wide[1:] & ((t[1:] >> 31) != (t[:-1] >> 31))
        starts = _chunk_starts(new_group, ev)
        chunk = np.cumsum(starts) - 1
    first = np.flatnonzero(starts)
    n_chunks = len(first)
    out = np.zeros(n_chunks, dtype=layout.drained_dtype)
    out["segment"] = segment[first]
    out["module"] = identity["module"][items[first]]
    out["kernel"] = identity["kernel"][items[first]]
    out["launch"] = identity["launch"][items[first]]
    out["block_x"] = identity["block_x"][items[first]]
    out["block_y"] = identity["block_y"][items[first]]
    out["block_z"] = identity["block_z"][items[first]]
    out["warp"] = identity["warp"][items[first]]
    out["id_bits"] = identity["id_bits"][items[first]]
    out["t_base"] = t[first]
    out["n_events"] = np.bincount(chunk, weights=ev, minlength=n_chunks).astype(np.uint8)
    out["n_payloads"] = out["n_events"]
    flags = np.full(n_chunks, FLAG_PAYLOAD_EVERY_EVENT, dtype=_I64)
    flags[begin[first]] |= FLAG_WARP_BEGIN
    end_items = np.flatnonzero(valid_end[items])
    end_flags = (words[items[end_items]] >> 12) & 0xF
    flags[chunk[end_items]] |= (
        FLAG_WARP_END
        | np.where(end_flags & END_PARTIAL, FLAG_PARTIAL_WARP, 0)
        | np.where(end_flags & END_DIVERGED, FLAG_DIVERGED, 0)
    )
    out["flags"] = flags
    e = np.flatnonzero(ev)
    ev_count = np.cumsum(ev, dtype=_I64) - ev
    position = ev_count[e] - ev_count[first[chunk[e]]]
    body = out.view("<u4").reshape(n_chunks, layout.chunk_words)
    body[chunk[e], HEADER_WORDS + position] = words[items[e]]
    body[chunk[e], layout.last_payload - position] = records["payload"][e]
    return out


def _chunk_starts(new_group: Array, ev: Array) -> Array:
    """Where chunks start: at each group's start, and after every :data:`DRAINED_EVENTS_PER_CHUNK`
    events of a group."""
    ev_count = np.cumsum(ev, dtype=_I64) - ev
    group_start = np.maximum.accumulate(np.where(new_group, np.arange(len(ev)), 0))
    ev_in_group = ev_count - ev_count[group_start]
    starts: Array = new_group | (ev & (ev_in_group > 0) & (ev_in_group % DRAINED_EVENTS_PER_CHUNK == 0))
    return starts


def sm_of(chunks: Array, warp_slots: int = WARP_SLOTS) -> Array:
    """The SM each drained chunk was written on (the segment's SM; the begin records say the
    SM itself, which is the same where the ring has a segment for every warp slot)."""
    return chunks["segment"] // warp_slots


assert RECORD_DTYPE.itemsize == 16
