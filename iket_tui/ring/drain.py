"""RingDrain: reads newly written records out of a ring, periodically, counts exactly what was
written, read and lost, and hands the records on as drained chunks.

A warp claims a region when it begins (the header's ``claims`` counts the claims), so a pass
looks only at the regions of claims it has not finished with: the claims made since the last
pass, and those of warps still running or not read to their end. For each it reads the region's
descriptor (who the warp is, and once it ended, how many records it wrote), the region's records,
and the descriptor again. A record is taken only when its stamp names the claim and the
position the reader expects next; a region's pass stops at its first record that does not and
starts there next time, so nothing is skipped. A warp that wrote more than its region holds
keeps its newest records (the positions it overwrote before they were read are lost, counted,
and the warp's next chunk says so); its name is in the descriptor, which its records never
overwrite, so no event is ever lost for want of its warp's name. When claims come round the
regions faster than the reader, the oldest claims are lost whole: a warp is read whole or
counted lost, never shredded, except where a region is claimed again while the reader copies it.
No Python runs per record.

Counting, per generation and in total: ``chunks_written = chunks_read + chunks_lost`` in
records (one record per event), and ``events_written = events_read + events_lost`` after every
pass. A warp's losses are counted when they are known: positions it overwrote before they were
read at once, a region claimed again once its claim is seen to have moved on, the records of
claims that were never read once the header's ``events_ended`` says how many the ended warps
wrote in all. Each loss the drain can name (the warp, its launch, the reason) is handed on with
the batch (:data:`LOSS_DTYPE`), so that a launch can say what it is missing and why.

Where the ring is not in this process's memory (a GPU's device memory), a
:class:`RecordSource` brings it: the agent's copies it with a DMA engine
(:class:`~iket_tui.ring.device_copy.DeviceRing`).
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
from iket_tui.ring.counters import LOSS_DTYPE, LOSS_LAPPED, LOSS_OVERWRITTEN, LOSS_TORN, DrainBatch, RingCounters
from iket_tui.ring.drain_threads import NativeThreads, default_threads
from iket_tui.ring.layout import (
    CLAIM_STRIPES,
    DEFAULT_LAYOUT,
    DESCRIPTOR_WORDS,
    DRAINED_EVENTS_PER_CHUNK,
    END_COUNT_BITS,
    END_DIVERGED,
    END_PARTIAL,
    FLAG_DIVERGED,
    FLAG_PARTIAL_WARP,
    FLAG_PAYLOAD_EVERY_EVENT,
    FLAG_WARP_BEGIN,
    FLAG_WARP_END,
    FLAG_WARP_LAPPED,
    HEADER_WORDS,
    ID_BITS_MAX,
    ID_BITS_MIN,
    STAMP_LAP_SHIFT,
    WARP_SLOTS,
    stripe_share,
)

__all__ = [
    "DEFAULT_PERIOD_S",
    "DrainBatch",
    "LiveRing",
    "RecordSource",
    "RegionCopy",
    "RingCounters",
    "RingDrain",
    "sm_of",
]

DEFAULT_PERIOD_S = 0.05
"""20 Hz."""

_MASK32 = 0xFFFFFFFF
_COUNT_MASK = (1 << END_COUNT_BITS) - 1
_STALE_PASSES = 4
"""Passes a warp that ended may keep records the reader cannot take (not visible yet) before
they are counted lost (torn)."""
_I64 = np.int64
Array = np.ndarray[Any, Any]


@dataclass(frozen=True)
class RegionCopy:
    """What a source read of some claims' regions, in the order asked: each region's descriptor
    (``uint32`` words, shape (n, 16)) before and after its records (shape (n, records, 4), or,
    with ``rows``, every region's, the claim ``i``'s in row ``rows[i]``: a GPU ring's mirror read
    in place), and for memory the writers write while it is read, each record's stamp before and
    after (shape (n, records))."""

    descriptors: Array
    records: Array
    descriptors_after: Array
    stamps_before: Array | None = None
    stamps_after: Array | None = None
    rows: Array | None = None


class RecordSource(Protocol):
    """Where a drain reads a ring: the ring's own memory, or copies of it."""

    def refresh(self) -> bool:
        """Bring the header up to date; ``False`` when no record can have changed since the
        last pass (the drain then reads no region)."""
        ...

    def read(self, claims: Array) -> RegionCopy:
        """The regions of ``claims`` (region = claim % regions), copied."""
        ...

    def device_now_ns(self) -> int | None:
        """The writers' clock now (``%globaltimer`` for a GPU), or ``None`` where unknown."""
        ...


class LiveRing:
    """A ring whose memory the writers write directly (a file mapping, or memory shared with a
    simulation): each read is of the live memory, in the order the drain needs."""

    def __init__(self, ring: RingView, clock: Callable[[], int] = time.monotonic_ns) -> None:
        self.ring = ring
        self.clock = clock

    def refresh(self) -> bool:
        return True

    def read(self, claims: Array) -> RegionCopy:
        ring = self.ring
        regions = claims & (ring.geometry.regions - 1)
        words = ring.record_words
        descriptors = ring.descriptor_words[regions]  # fancy indexing: each read is a copy
        stamps_before = words[regions, :, 3]
        records = words[regions]
        stamps_after = words[regions, :, 3]
        return RegionCopy(descriptors, records, ring.descriptor_words[regions], stamps_before, stamps_after)

    def device_now_ns(self) -> int | None:
        return self.clock()


_OPEN_DTYPE = np.dtype(
    [
        ("claim", "<i8"),
        ("known", "?"),  # the descriptor's begin parts were read
        ("began", "?"),  # the warp's begin was handed on
        ("lapped", "?"),  # positions were lost since the last chunk handed on
        ("read", "<i8"),  # the next position to read
        ("stale", "<i8"),  # passes since the warp ended with records still not taken
        ("desc", "<u4", (DESCRIPTOR_WORDS,)),
    ]
)
"""A claim the drain has not finished with."""


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
        threads: int | None = None,
    ) -> None:
        """``threads``: the most threads a pass of the native drain may run on (default
        :func:`~iket_tui.ring.drain_threads.default_threads`); a pass of fewer than about two
        million records runs on the drain's own thread alone."""
        if period_s <= 0:
            raise ValueError("the drain period must be positive")
        self.ring = ring
        self.period_s = period_s
        self.source: RecordSource = LiveRing(ring) if source is None else source
        self._generation = ring.generation & ~1
        self._counters = RingCounters(generation=self._generation)
        self._generation_counters = RingCounters(generation=self._generation)
        self._retired_events = ring.retired[1]
        self._next_claim = np.zeros(CLAIM_STRIPES, dtype=_I64)
        """Per claim stripe: the claims below this are opened or lost."""
        self._open = np.zeros(0, dtype=_OPEN_DTYPE)
        self.caught_up = True
        """Whether every claim made so far is finished with: once no warp runs, nothing is left
        to read."""
        self._native_wanted = native
        self._threads = default_threads() if threads is None else threads
        self._native: NativeThreads | None = None
        self.engine = "numpy (the native pass is loaded at the first pass)" if native else "numpy"
        """Which drain passes run: the native pass, or numpy and why."""

    @property
    def counters(self) -> RingCounters:
        return self._counters

    @property
    def threads_used(self) -> int:
        """Threads the last pass ran on (1 without the native pass)."""
        return 1 if self._native is None else self._native.used

    @property
    def open_claims(self) -> int:
        """Claims the drain is still reading (warps running, or not read to their end yet)."""
        return len(self._open)

    def drain(self) -> DrainBatch:
        """Read every record written since the last pass."""
        if self._native_wanted:  # the first pass loads (and, once per process, builds) the native pass
            self._native_wanted = False
            native, self.engine = native_drain.load()
            if native is not None:
                self._native = NativeThreads(native, self._threads)
                self.engine += f", up to {self._threads} threads"
        ring = self.ring
        empty = _no_chunks()
        changed_records = self.source.refresh()
        now = self.source.device_now_ns()
        generation = ring.generation
        if generation & 1:  # the owner is resetting the ring
            return DrainBatch(empty, self._counters, DEFAULT_LAYOUT, ring.ring_id, device_now_ns=now)
        changed = generation != self._generation
        if changed:
            self._begin_generation(generation)
        claims = np.array(ring.stripe_claims, dtype=_I64)
        if not changed_records and not changed and self.caught_up and (claims == self._next_claim).all():
            return DrainBatch(empty, self._counters, DEFAULT_LAYOUT, ring.ring_id, device_now_ns=now)
        chunks, losses, counts = self._pass(claims)
        if ring.generation != generation:  # reset under our feet: nothing of this pass counts
            return DrainBatch(empty, self._counters, DEFAULT_LAYOUT, ring.ring_id, changed, device_now_ns=now)
        self._add(**counts)
        self._settle()
        return DrainBatch(chunks, self._counters, DEFAULT_LAYOUT, ring.ring_id, changed, now, losses)

    # ---- one pass ---------------------------------------------------------------------------

    def _pass(self, claims: Array) -> tuple[Array, Array, dict[str, int]]:
        """One pass over the open claims, ``claims`` each stripe's count of claims now."""
        geometry = self.ring.geometry
        cap = geometry.records_per_region
        counts = {"events_read": 0, "events_lost": 0, "warps_lost": 0, "warps_unread": 0, "torn": 0}
        losses: list[Array] = []
        # Claims their stripe went round before they were read: lost whole, unnamed; open claims
        # among them were claimed again (what they had not handed on is lost).
        oldest = claims - stripe_share(geometry.regions)
        behind = np.maximum(oldest - self._next_claim, 0)
        counts["warps_unread"] += int(behind.sum())
        self._next_claim += behind
        open_claims = self._open["claim"]
        gone = open_claims // CLAIM_STRIPES < oldest[open_claims % CLAIM_STRIPES]
        if gone.any():
            self._close_lapped(self._open[gone], losses, counts)
            self._open = self._open[~gone]
        fresh = claims - self._next_claim
        if fresh.any():
            stripe = np.repeat(np.arange(CLAIM_STRIPES, dtype=_I64), fresh)
            first = np.repeat(self._next_claim, fresh)
            local = first + np.arange(int(fresh.sum()), dtype=_I64) - np.repeat(np.cumsum(fresh) - fresh, fresh)
            new = np.zeros(len(local), dtype=_OPEN_DTYPE)
            new["claim"] = local * CLAIM_STRIPES + stripe
            merged = np.concatenate([self._open, new])
            self._open = merged[np.argsort(merged["claim"], kind="stable")]
            self._next_claim = claims.copy()
        rows = self._open
        if not len(rows):
            self.caught_up = True
            return _no_chunks(), _no_losses(), counts
        copy = self.source.read(rows["claim"])
        c32 = (rows["claim"] + 1) & _MASK32  # the claim's tag
        d = copy.descriptors.astype(_I64)
        after = copy.descriptors_after.astype(_I64)
        begun = (d[:, 0] == c32) & (d[:, 4] == c32) & (d[:, 8] == c32) & (after[:, :12] == d[:, :12]).all(axis=1)
        id_bits = (d[:, 9] >> 8) & 0xF
        torn_begin = begun & ((id_bits < ID_BITS_MIN) | (id_bits > ID_BITS_MAX))
        begun &= ~torn_begin
        # A claim whose descriptor was read before and is no longer its own: claimed again.
        moved = rows["known"] & ~begun
        rows["desc"][begun & ~rows["known"]] = copy.descriptors[begun & ~rows["known"]]
        rows["known"] |= begun
        ended = begun & (d[:, 12] == c32) & (after[:, 12:] == d[:, 12:]).all(axis=1)
        rows["desc"][ended, 12:] = copy.descriptors[ended, 12:]
        count = np.where(ended, d[:, 15] & _COUNT_MASK, -1)
        # Records: a slot holds position p of this claim when its stamp is base + p.
        base = (((rows["claim"] >> geometry.region_bits) << STAMP_LAP_SHIFT) + 1) & _MASK32
        read = rows["read"]
        if self._native is not None:
            records = np.ascontiguousarray(copy.records)
            at = np.arange(len(rows), dtype=_I64) if copy.rows is None else copy.rows.astype(_I64)
            start, run = self._native.regions(
                records, copy.stamps_before, copy.stamps_after, base, read, count, begun, at
            )
        else:
            records = copy.records if copy.rows is None else copy.records[copy.rows]
            at = np.arange(len(rows), dtype=_I64)
            start, run = _runs(records, copy, base, read, count, begun, cap)
        overwritten = np.where(begun, start - read, 0)
        # The pass's chunks.
        done = ended & (start + run >= count)
        rows["lapped"] |= overwritten > 0
        chunks = _chunks(rows, records, at, start, run, done, cap, self._native)
        counts["events_read"] += int(run.sum())
        counts["events_lost"] += int(overwritten.sum())
        lapped_self = np.flatnonzero(overwritten > 0)
        if len(lapped_self):
            losses.append(_loss_rows(rows[lapped_self], overwritten[lapped_self], LOSS_OVERWRITTEN))
        rows["read"] = np.where(begun, start + run, read)
        rows["began"] |= begun & ((run > 0) | ~rows["began"])
        rows["lapped"] &= run == 0  # said by the chunk just handed on, or still to say
        # Warps that ended with records the reader cannot take: torn once they stay so.
        waiting = ended & ~done
        rows["stale"] = np.where(waiting, rows["stale"] + 1, 0)
        stale = waiting & (rows["stale"] > _STALE_PASSES)
        if stale.any():
            missing = count[stale] - rows["read"][stale]
            counts["events_lost"] += int(missing.sum())
            counts["torn"] += int(missing.sum())
            counts["warps_lost"] += int(stale.sum())
            losses.append(_loss_rows(rows[stale], missing, LOSS_TORN))
        torn_begins = int(torn_begin.sum())
        if torn_begins:
            counts["warps_lost"] += torn_begins
        if moved.any():
            self._close_lapped(rows[moved], losses, counts)
        finished = done | stale | moved | torn_begin
        self._open = rows[~finished]
        self.caught_up = not len(self._open)
        return chunks, np.concatenate(losses) if losses else _no_losses(), counts

    def _close_lapped(self, rows: Array, losses: list[Array], counts: dict[str, int]) -> None:
        """Claims whose regions went to later warps before they were read to their end."""
        known = rows[rows["known"]]
        counts["warps_unread"] += len(rows) - len(known)
        if not len(known):
            return
        count = known["desc"][:, 15].astype(_I64) & _COUNT_MASK
        ended = known["desc"][:, 12].astype(_I64) == (known["claim"] + 1) & _MASK32
        missing = np.where(ended, count - known["read"], 0)
        counts["events_lost"] += int(missing.sum())
        counts["warps_lost"] += len(known)
        losses.append(_loss_rows(known, np.where(ended, missing, -1), LOSS_LAPPED))

    # ---- bookkeeping --------------------------------------------------------------------------

    def _settle(self) -> None:
        """Once every warp that claimed a region has ended and every claim is finished with,
        the header's ``events_ended`` says what the warps wrote: what was not read and not yet
        counted lost (claims the ring went round before they were read) is counted now."""
        claims, ended, events = self.ring.warps
        if not self.caught_up or claims != ended or claims != int(self._next_claim.sum()):
            return
        missing = events - self._generation_counters.events_written
        if missing > 0:
            self._add(events_lost=missing)

    def _add(self, **deltas: int) -> None:
        """Count a pass's reads and losses (every record is one event: records and events move
        together)."""
        read, lost = deltas.pop("events_read", 0), deltas.pop("events_lost", 0)
        unread = deltas.get("warps_unread", 0)
        full = {
            "chunks_written": read + lost,
            "chunks_read": read,
            "chunks_lost": lost,
            "events_written": read + lost,
            "events_read": read,
            "events_lost": lost,
            "torn": deltas.get("torn", 0),
            "warps_lost": deltas.get("warps_lost", 0) + unread,
            "warps_unread": unread,
        }
        self._counters = self._counters.plus(full)
        self._generation_counters = self._generation_counters.plus(full)

    def _begin_generation(self, generation: int) -> None:
        """The ring was reset: what the old generation wrote and this drain never read is lost."""
        _, events = self.ring.retired
        unread = events - self._retired_events - self._generation_counters.events_written
        if unread > 0:
            self._add(events_lost=unread)
        self._generation = generation
        self._retired_events = events
        self._counters = replace(self._counters, generation=generation, resets=self._counters.resets + 1)
        self._generation_counters = RingCounters(generation=generation)
        self._next_claim = np.zeros(CLAIM_STRIPES, dtype=_I64)
        self._open = np.zeros(0, dtype=_OPEN_DTYPE)
        self.caught_up = True

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


def _no_chunks() -> Array:
    return np.zeros(0, dtype=DEFAULT_LAYOUT.drained_dtype)


def _no_losses() -> Array:
    return np.zeros(0, dtype=LOSS_DTYPE)


def _loss_rows(rows: Array, events: Array, reason: int) -> Array:
    """One loss per claim of ``rows`` (their descriptors read), ``events`` lost (-1: unknown)."""
    d = rows["desc"].astype(_I64)
    out = np.zeros(len(rows), dtype=LOSS_DTYPE)
    out["launch"] = d[:, 1]
    out["block_x"] = d[:, 2]
    out["block_y"] = d[:, 3] & 0xFFFF
    out["block_z"] = d[:, 3] >> 16
    out["module"] = d[:, 5] >> 16
    out["kernel"] = (d[:, 5] >> 8) & 0xFF
    out["warp"] = d[:, 5] & 0xFF
    out["sm"] = d[:, 9] & 0xFF
    out["reason"] = reason
    out["events"] = np.where(events < 0, -1, events)
    return out


def _runs(
    records: Array, copy: RegionCopy, base: Array, read: Array, count: Array, begun: Array, cap: int
) -> tuple[Array, Array]:
    """Each region's run (its records ``records[i]``): where it starts (the next position to read,
    or later where the warp overwrote positions before they were read) and how many positions it
    takes (numpy, the native pass's reference)."""
    stamps = records[:, :, 3]
    p = (stamps.astype(_I64) - base[:, None]) & _MASK32
    slot = np.arange(cap, dtype=_I64)
    valid = (p < 1 << 31) & ((p & (cap - 1)) == slot[None, :]) & begun[:, None] & (p >= read[:, None])
    if copy.stamps_before is not None and copy.stamps_after is not None:
        valid &= (copy.stamps_before == stamps) & (copy.stamps_after == stamps)
    valid &= np.where(count[:, None] >= 0, p < count[:, None], True)
    # A position counts as the newest only where the one before it is there too (or it is the
    # next to read): one damaged stamp never passes for the warp's newest record.
    before = np.roll(valid, 1, axis=1) & (np.roll(p, 1, axis=1) == p - 1) if cap > 1 else valid & False
    newest = np.where(valid & (before | (p == read[:, None])), p, -1).max(axis=1)
    start = np.maximum(read, newest - cap + 1)
    # The run of positions start, start + 1, ... in slot order, to its first gap.
    expect = start[:, None] + ((slot[None, :] - start[:, None]) & (cap - 1))
    ok = valid & (p == expect)
    doubled = np.concatenate([ok, ok], axis=1)
    rolled = np.lib.stride_tricks.sliding_window_view(doubled, cap, axis=1)[np.arange(len(read)), start & (cap - 1)]
    gap = np.where(rolled.all(axis=1), cap, rolled.argmin(axis=1))
    run = np.clip(np.minimum(gap, newest + 1 - start), 0, None)
    run[~begun] = 0
    return start, run


def _chunks(
    rows: Array,
    records: Array,
    at: Array,
    start: Array,
    run: Array,
    done: Array,
    cap: int,
    native: NativeThreads | None,
) -> Array:
    """The drained chunks of a pass: each region's run cut into chunks of at most
    :data:`DRAINED_EVENTS_PER_CHUNK` (and where it wraps around its region, and where its events
    would lie 2**32 ns or more from the chunk's first). A warp's first chunk is flagged when its
    begin is handed on with its first events, its last when it ended; a warp that began or ended
    with no event of the pass beside it gets a chunk of its own with no events, its ``t_base``
    the time it began or ended. Region ``i``'s records are row ``at[i]`` of ``records``."""
    layout = DEFAULT_LAYOUT
    d = rows["desc"].astype(_I64)
    known = rows["known"]
    begin_now = known & ~rows["began"]
    whole_begin = begin_now & (start == 0) & (run > 0)  # the begin travels with the first events
    empty_begin = np.flatnonzero(begin_now & ~whole_begin)
    with_events = np.flatnonzero(known & (run > 0))
    empty_end = np.flatnonzero(done & (run == 0))
    end_with_events = done & (run > 0)
    # Pieces: each run cut where it wraps around its region, then the begin and end pieces of no
    # events, sorted by region row then by place (begin first, end last).
    slot0 = start[with_events] & (cap - 1)
    length = run[with_events]
    first_len = np.minimum(length, cap - slot0)
    wraps = np.flatnonzero(first_len < length)
    r = with_events
    p_row = np.r_[empty_begin, r, r[wraps], empty_end]
    p_order = np.r_[
        np.zeros(len(empty_begin), _I64),
        np.ones(len(r), _I64),
        np.full(len(wraps), 2, _I64),
        np.full(len(empty_end), 3, _I64),
    ]
    p_slot = np.r_[np.zeros(len(empty_begin), _I64), slot0, np.zeros(len(wraps), _I64), np.zeros(len(empty_end), _I64)]
    p_len = np.r_[
        np.zeros(len(empty_begin), _I64), first_len, length[wraps] - first_len[wraps], np.zeros(len(empty_end), _I64)
    ]
    last_of_run = np.ones(len(r), dtype=bool)
    last_of_run[wraps] = False
    p_first = np.r_[
        np.full(len(empty_begin), FLAG_WARP_BEGIN, _I64),
        np.where(whole_begin[r], FLAG_WARP_BEGIN, 0) | np.where(rows["lapped"][r], FLAG_WARP_LAPPED, 0),
        np.zeros(len(wraps), _I64),
        np.zeros(len(empty_end), _I64),
    ]
    p_last = np.r_[
        np.zeros(len(empty_begin), _I64),
        np.where(end_with_events[r] & last_of_run, FLAG_WARP_END, 0),
        np.where(end_with_events[r[wraps]], FLAG_WARP_END, 0),
        np.full(len(empty_end), FLAG_WARP_END, _I64),
    ]
    p_empty_t = np.r_[
        d[empty_begin, 7] << 32 | d[empty_begin, 6],
        np.zeros(len(r) + len(wraps), _I64),
        d[empty_end, 14] << 32 | d[empty_end, 13],
    ]
    order = np.lexsort((p_order, p_row))
    p_row, p_slot, p_len, p_first, p_last, p_empty_t = (
        a[order] for a in (p_row, p_slot, p_len, p_first, p_last, p_empty_t)
    )
    # An ended warp's last piece carries its end flags (partial warp, diverged lanes).
    end_flags = d[p_row, 15] >> END_COUNT_BITS
    ends = (p_last & FLAG_WARP_END) != 0
    p_last |= np.where(ends & (end_flags & END_PARTIAL != 0), FLAG_PARTIAL_WARP, 0)
    p_last |= np.where(ends & (end_flags & END_DIVERGED != 0), FLAG_DIVERGED, 0)
    table = _header_table(d)
    if native is not None:
        n_chunks = int(np.maximum(-(-p_len // DRAINED_EVENTS_PER_CHUNK), 1).sum())
        out = np.empty(n_chunks, dtype=layout.drained_dtype)
        body = out.view("<u4").reshape(n_chunks, layout.chunk_words)
        if native.chunks(records, at, p_row, p_slot, p_len, p_first, p_last, p_empty_t, table, body):
            return out
        records = records[at]  # numpy cuts what the native pass gave up on, from the pass's regions alone
    # Chunks: every DRAINED_EVENTS_PER_CHUNK events of a piece, one for a piece of none.
    per = DRAINED_EVENTS_PER_CHUNK
    n_chunks_of = np.maximum(-(-p_len // per), 1)
    first_chunk = np.cumsum(n_chunks_of) - n_chunks_of
    last_chunk = first_chunk + n_chunks_of - 1
    piece = np.repeat(np.arange(len(p_len)), n_chunks_of)
    index_in = per * (np.arange(len(piece)) - first_chunk[piece])
    c_row = p_row[piece]
    c_slot = p_slot[piece] + index_in
    c_n = np.full(len(piece), per, dtype=_I64)
    c_n[last_chunk] = p_len - per * (n_chunks_of - 1)
    c_flags = np.full(len(piece), FLAG_PAYLOAD_EVERY_EVENT, dtype=_I64)
    c_flags[first_chunk] |= p_first
    c_flags[last_chunk] |= p_last
    c_empty_t = p_empty_t[piece]
    id_bits = (d[c_row, 9] >> 8) & 0xF
    t_first, t_last = _span(records, c_row, c_slot, c_n, id_bits)
    wide = np.flatnonzero(t_last - t_first >= 1 << 32)
    if len(wide):  # events seconds apart (a warp that waited): rare, cut by hand
        c_row, c_slot, c_n, c_flags, c_empty_t = _cut_wide(
            wide, records, id_bits, c_row, c_slot, c_n, c_flags, c_empty_t
        )
        id_bits = (d[c_row, 9] >> 8) & 0xF
        t_first, _ = _span(records, c_row, c_slot, c_n, id_bits)
    empty = c_n == 0
    t_first[empty] = c_empty_t[empty]
    out = np.zeros(len(c_row), dtype=layout.drained_dtype)
    body = out.view("<u4").reshape(len(out), layout.chunk_words)
    rows_table = table[c_row]
    body[:, 3:8] = rows_table[:, :5]
    body[:, 0:3] = rows_table[:, 5:8]
    body[:, layout.tail] = rows_table[:, 8]
    body[:, 3] |= c_flags.astype(np.uint32) << 24
    body[:, 7] |= c_n.astype(np.uint32) * 0x10100  # n_events and n_payloads
    out["t_base"] = t_first
    # The events: each chunk's words and payloads (columns 0 and 2 of its records) gathered in
    # one go, as windows of DRAINED_EVENTS_PER_CHUNK consecutive records, into its 26 event words
    # and the 26 payload words after them; places past a chunk's events are zeroed.
    columns = records.reshape(-1, 4)[:, ::2]  # (records, 2): word and payload
    at = c_row * cap + c_slot
    n = c_n
    if len(columns) >= per:
        windows = np.lib.stride_tricks.sliding_window_view(columns, per, axis=0)  # (records - per + 1, 2, per)
        picked = windows[np.minimum(at, len(windows) - 1)]
    else:
        picked = np.zeros((len(out), 2, per), dtype=np.uint32)
    for c in np.flatnonzero(at + per > len(columns)):  # at most the last chunks of the last region
        picked[c] = 0
        picked[c, :, : n[c]] = columns[at[c] : at[c] + n[c]].T
    partial = np.flatnonzero(n < per)
    picked[partial] *= np.arange(per)[None, None, :] < n[partial, None, None]
    body[:, HEADER_WORDS : HEADER_WORDS + 2 * per].reshape(len(out), 2, per)[...] = picked
    return out


def _header_table(d: Array) -> Array:
    """A drained chunk's header words for each warp (descriptor words ``d``, one row each):
    words 3 to 7 (flags and counts left 0), then words 0, 1, 2 and the tail."""
    table = np.empty((len(d), 9), dtype=np.uint32)
    warp = d[:, 5] & 0xFF
    table[:, 0] = (d[:, 5] >> 16) | ((d[:, 5] >> 8) & 0xFF) << 16  # module, kernel
    table[:, 1] = d[:, 1]  # launch
    table[:, 2] = d[:, 2]  # block_x
    table[:, 3] = d[:, 3]  # block_y | block_z << 16
    table[:, 4] = warp | ((d[:, 9] >> 8) & 0xF) << 24  # warp, id bits
    table[:, 5] = (d[:, 9] & 0xFF) * WARP_SLOTS + (warp & (WARP_SLOTS - 1))  # segment: SM and warp
    table[:, 6] = d[:, 10]  # grid_x
    table[:, 7] = d[:, 11]  # grid_y | grid_z << 16
    table[:, 8] = d[:, 9] >> 16  # warps per block
    return table


def _span(records: Array, row: Array, slot: Array, n: Array, id_bits: Array) -> tuple[Array, Array]:
    """The times of each chunk's first and last event."""
    cap = records.shape[1]
    times = np.ascontiguousarray(records).reshape(-1, 4).view("<i8")[:, 0]  # word | hi << 32
    start = row * cap + slot
    not_id = ~((np.int64(1) << id_bits) - 1)
    t_first = times[start] & not_id
    t_last = times[start + np.maximum(n - 1, 0)] & not_id
    return t_first, t_last


def _cut_wide(wide: Array, records: Array, id_bits: Array, *columns: Array) -> tuple[Array, Array, Array, Array, Array]:
    """Chunks ``wide`` cut where an event lies 2**32 ns or more after its chunk's first, so that
    every 32-bit time word reads back exactly; a warp's begin and lapped flags stay on the first
    piece, its end flag goes to the last."""
    cap = records.shape[1]
    flat = records.reshape(-1, 4)
    row, slot, n, flags, empty_t = (list(column) for column in columns)
    for c in sorted(wide.tolist(), reverse=True):
        start = int(row[c]) * cap + int(slot[c])
        chunk = flat[start : start + int(n[c])].astype(_I64)
        times = chunk[:, 1] << 32 | (chunk[:, 0] & ~((1 << int(id_bits[c])) - 1))
        cuts = [0]
        for i in range(1, len(times)):
            if times[i] - times[cuts[-1]] >= 1 << 32:
                cuts.append(i)
        pieces = list(zip(cuts, [*cuts[1:], int(n[c])], strict=True))
        new = []
        for index, (a, b) in enumerate(pieces):
            flag = FLAG_PAYLOAD_EVERY_EVENT
            if index == 0:
                flag |= flags[c] & (FLAG_WARP_BEGIN | FLAG_WARP_LAPPED)
            if index == len(pieces) - 1:
                flag |= flags[c] & FLAG_WARP_END
            new.append((row[c], slot[c] + a, b - a, flag, empty_t[c]))
        for target, values in zip((row, slot, n, flags, empty_t), zip(*new, strict=True), strict=True):
            target[c : c + 1] = list(values)
    out = tuple(np.asarray(column, dtype=_I64) for column in (row, slot, n, flags, empty_t))
    return out[0], out[1], out[2], out[3], out[4]


def sm_of(chunks: Array, warp_slots: int = WARP_SLOTS) -> Array:
    """The SM each drained chunk was written on."""
    return chunks["segment"] // warp_slots
