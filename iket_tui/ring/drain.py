"""RingDrain: copies newly published chunks out of a ring, periodically, and counts exactly
what was written, read and lost.

A pass reads every tag (one strided copy), works out for each segment which sequence numbers
were published since the last pass, copies those chunks, and reads their tags again: a chunk
is handed on only if its tag was the same before and after the copy and its two stamps (in the
body, written before the tag) match it. Whatever was published but cannot be handed on (lapped
before it was read, overwritten during the copy, torn) is lost and counted. No Python runs per
chunk or per event.

Counting, per generation and in total: ``chunks_written = chunks_read + chunks_lost`` and
``events_written = events_read + events_lost`` after every pass. Chunk counts are up to date
with the newest published chunk of each segment; event counts with the newest chunk that could
be read (a chunk's header says how many events its segment had before it, which is how events
of lost chunks are counted).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from iket_tui.ring.buffer import RingView
from iket_tui.ring.counters import DrainBatch, RingCounters
from iket_tui.ring.layout import PUBLISH_EVERY, WARP_SLOTS

__all__ = ["DEFAULT_PERIOD_S", "DrainBatch", "RingCounters", "RingDrain", "sm_of"]

DEFAULT_PERIOD_S = 0.05
"""20 Hz."""

_MASK32 = 0xFFFFFFFF


class RingDrain:
    """Reads one ring; :meth:`drain` is one pass, :meth:`run` drains periodically.

    Only one thread may drain a ring at a time; the counters and positions are its own.
    """

    def __init__(self, ring: RingView, *, period_s: float = DEFAULT_PERIOD_S) -> None:
        if period_s <= 0:
            raise ValueError("the drain period must be positive")
        self.ring = ring
        self.period_s = period_s
        segments = ring.geometry.segments
        self._next_seq = np.zeros(segments, dtype=np.int64)
        self._events_end = np.zeros(segments, dtype=np.int64)
        self._flat = ring.chunks.reshape(-1)
        self._tags = self._flat["tag"]
        self._rows = self._flat.view("<u8").reshape(len(self._flat), ring.layout.chunk_bytes // 8)
        self._generation = ring.generation & ~1
        self._retired = ring.retired
        self._counters = RingCounters(generation=self._generation)
        self._generation_counters = RingCounters(generation=self._generation)

    @property
    def counters(self) -> RingCounters:
        return self._counters

    def drain(self) -> DrainBatch:
        """Copy out every chunk published since the last pass."""
        ring = self.ring
        empty = ring.chunks[:0].copy().view(ring.layout.drained_dtype)
        generation = ring.generation
        if generation & 1:  # the owner is resetting the ring
            return DrainBatch(empty, self._counters, ring.layout, ring.ring_id)
        changed = generation != self._generation
        if changed:
            self._begin_generation(generation)
        chunks, counts = self._pass()
        if ring.generation != generation:  # reset under our feet: nothing of this pass counts
            return DrainBatch(empty, self._counters, ring.layout, ring.ring_id, changed)
        self._commit(counts)
        return DrainBatch(chunks, self._counters, ring.layout, ring.ring_id, changed)

    def _pass(self) -> tuple[np.ndarray[Any, np.dtype[np.void]], _PassCounts]:
        cap = self.ring.geometry.chunks_per_segment
        tags = self.ring.chunks["tag"].astype(np.int64)  # a copy: the tags before
        newest = tags.max(axis=1) - 1
        first = self._next_seq
        active = np.flatnonzero(newest >= first)
        newest_a = newest[active]
        first_a = first[active]
        readable_from = np.maximum(first_a, newest_a - cap + 1)
        counts = newest_a - readable_from + 1
        total = int(counts.sum())
        segment = np.repeat(active, counts)
        offsets = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        seq = np.repeat(readable_from, counts) + offsets
        flat = segment * cap + (seq & (cap - 1))
        published = tags.reshape(-1)[flat] == seq + 1
        stop = self._stops(counts, seq, published, newest_a)
        keep = published & (seq < np.repeat(stop, counts))
        flat, seq, segment = flat[keep], seq[keep], segment[keep]
        chunks = self._copy(flat)
        tags_after = self._tags[flat]
        expected = (seq + 1) & _MASK32
        unchanged = tags_after == expected
        intact = (chunks["stamp"] == expected) & (chunks["tail"] == expected) & self._sane(chunks)
        good = unchanged & intact
        torn = int(np.count_nonzero(unchanged & ~intact))
        chunks = chunks[good].view(self.ring.layout.drained_dtype)
        segment = segment[good]
        chunks["segment"] = segment
        events_lost, events_read = self._event_counts(chunks, segment)
        written = int((stop - first_a).sum())
        return chunks, _PassCounts(
            active=active,
            next_seq=stop,
            chunks_written=written,
            chunks_read=len(chunks),
            torn=torn,
            events_read=events_read,
            events_lost=events_lost,
            events_end=self._new_events_end(chunks, segment),
        )

    def _stops(
        self,
        counts: np.ndarray[Any, Any],
        seq: np.ndarray[Any, Any],
        published: np.ndarray[Any, Any],
        newest: np.ndarray[Any, Any],
    ) -> np.ndarray[Any, Any]:
        """Per active segment, where this pass stops: past its newest published chunk, or at the
        first chunk of the newest batch whose tag has not arrived yet. A warp publishes up to
        :data:`PUBLISH_EVERY` chunks with one fence, so their tags may become visible in any
        order; an older chunk without its tag, or one whose slot a warp may already have
        announced again, is lost instead."""
        stop = newest + 1
        missing = np.flatnonzero(~published)
        if len(missing) == 0:
            return stop
        group = np.searchsorted(np.cumsum(counts), missing, side="right")
        seq_m, newest_m = seq[missing], newest[group]
        cap = self.ring.geometry.chunks_per_segment
        late = (seq_m > newest_m - PUBLISH_EVERY) & (seq_m + cap > newest_m + 2 * PUBLISH_EVERY + 1)
        np.minimum.at(stop, group[late], seq_m[late])
        return stop

    def _copy(self, flat: np.ndarray[Any, Any]) -> np.ndarray[Any, np.dtype[np.void]]:
        """The chunks at ``flat``: rows of 64-bit words copy as whole rows, the fastest way numpy has."""
        copied: np.ndarray[Any, np.dtype[np.void]] = self._rows[flat].view(self.ring.layout.chunk_dtype).reshape(-1)
        return copied

    def _sane(self, chunks: np.ndarray[Any, np.dtype[np.void]]) -> np.ndarray[Any, np.dtype[np.bool_]]:
        n_events = chunks["n_events"].astype(np.int64)
        id_bits = chunks["id_bits"]
        sane: np.ndarray[Any, np.dtype[np.bool_]] = (
            (n_events + chunks["n_payloads"] <= self.ring.layout.body_words) & (id_bits >= 5) & (id_bits <= 8)
        )
        return sane

    def _event_counts(
        self, chunks: np.ndarray[Any, np.dtype[np.void]], segment: np.ndarray[Any, Any]
    ) -> tuple[int, int]:
        if len(chunks) == 0:
            return 0, 0
        before = chunks["events_before"].astype(np.int64)
        n_events = chunks["n_events"].astype(np.int64)
        previous_end = np.empty_like(before)
        previous_end[1:] = (before[:-1] + n_events[:-1]) & _MASK32
        starts = np.ones(len(chunks), dtype=bool)
        starts[1:] = segment[1:] != segment[:-1]
        previous_end[starts] = self._events_end[segment[starts]]
        gaps = (before - previous_end) & _MASK32
        return int(gaps.sum()), int(n_events.sum())

    def _new_events_end(
        self, chunks: np.ndarray[Any, np.dtype[np.void]], segment: np.ndarray[Any, Any]
    ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        if len(chunks) == 0:
            return segment, segment
        last = np.ones(len(chunks), dtype=bool)
        last[:-1] = segment[1:] != segment[:-1]
        ends = (chunks["events_before"][last].astype(np.int64) + chunks["n_events"][last]) & _MASK32
        return segment[last], ends

    def _commit(self, counts: _PassCounts) -> None:
        self._next_seq[counts.active] = counts.next_seq
        segments, ends = counts.events_end
        self._events_end[segments] = ends
        lost_chunks = counts.chunks_written - counts.chunks_read
        self._add(
            chunks_written=counts.chunks_written,
            chunks_read=counts.chunks_read,
            chunks_lost=lost_chunks,
            events_written=counts.events_read + counts.events_lost,
            events_read=counts.events_read,
            events_lost=counts.events_lost,
            torn=counts.torn,
        )

    def _add(self, **deltas: int) -> None:
        for name in ("_counters", "_generation_counters"):
            current: RingCounters = getattr(self, name)
            setattr(self, name, replace(current, **{k: getattr(current, k) + v for k, v in deltas.items()}))

    def _begin_generation(self, generation: int) -> None:
        """The owner reset the ring: what the old generation wrote and we never saw is lost."""
        retired_chunks, retired_events = self.ring.retired
        old_chunks = retired_chunks - self._retired[0]
        old_events = retired_events - self._retired[1]
        seen = self._generation_counters
        self._add(
            chunks_written=max(0, old_chunks - seen.chunks_written),
            chunks_lost=max(0, old_chunks - seen.chunks_written),
            events_written=max(0, old_events - seen.events_written),
            events_lost=max(0, old_events - seen.events_written),
        )
        self._counters = replace(self._counters, generation=generation, resets=self._counters.resets + 1)
        self._generation_counters = RingCounters(generation=generation)
        self._generation = generation
        self._retired = (retired_chunks, retired_events)
        self._next_seq[:] = 0
        self._events_end[:] = 0

    def batches(self, stop: threading.Event) -> Iterator[DrainBatch]:
        """A batch every period (only batches that hold chunks or changed the counters), until
        ``stop`` is set; a last pass runs after it is set, so nothing published before is missed."""
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
class _PassCounts:
    active: np.ndarray[Any, Any]
    next_seq: np.ndarray[Any, Any]
    chunks_written: int
    chunks_read: int
    torn: int
    events_read: int
    events_lost: int
    events_end: tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]


def sm_of(chunks: np.ndarray[Any, np.dtype[np.void]], warp_slots: int = WARP_SLOTS) -> np.ndarray[Any, Any]:
    """The SM each drained chunk was written on."""
    return chunks["segment"] // warp_slots
