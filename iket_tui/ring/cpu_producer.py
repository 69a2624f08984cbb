"""A CPU producer that writes the ring's layout by the CUDA runtime's rules, so that drain,
decode, lapping, torn records and generation changes are tested without a GPU.

:class:`WarpWriter` is one warp: it stages events into a chunk, flushes when the chunk is full
or its first event is too old, stores the body, then publishes the previous chunk (fence,
tag), announces the next slot, and stores the segment's counters when the warp finishes. It
publishes one chunk per fence, where the runtime publishes up to
:data:`~iket_tui.ring.layout.PUBLISH_EVERY` (tests/ring runs the runtime itself on the host for
that). On purpose it can also tear a chunk (publish the tag before, or without, the body).
:func:`flood` writes many full chunks at once for benchmarks and lapping tests.
``python -m iket_tui.ring.cpu_producer RING_PATH ...`` runs :func:`synthetic_warps` in another
process.
"""

from __future__ import annotations

import argparse
import struct
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from iket_tui.ring.buffer import MappedRing, RingFormatError, RingView, store_fence
from iket_tui.ring.events import EventInfo, ModuleEvents
from iket_tui.ring.layout import (
    DEFAULT_FLUSH_NS,
    FLAG_WARP_END,
    ID_BITS_MIN,
    range_end_id,
)

Tear = Literal["tag_first", "tag_only"]
"""``tag_first``: the tag is published before the body is stored; ``tag_only``: the body is
never stored."""

_MASK32 = 0xFFFFFFFF


def payload_bits(value: int | float) -> int:
    """The 32 bits an event payload travels as: int32/uint32 two's complement, float32 IEEE."""
    if isinstance(value, float):
        return int(struct.unpack("<I", struct.pack("<f", value))[0])
    if not -(1 << 31) <= value < 1 << 32:
        raise ValueError(f"payload {value} does not fit in 32 bits")
    return value & _MASK32


class WarpWriter:
    """One warp writing its events into its segment, one chunk published per fence."""

    def __init__(
        self,
        ring: RingView,
        *,
        segment: int,
        module: int,
        kernel: int = 0,
        launch: int = 0,
        block: tuple[int, int, int] = (0, 0, 0),
        warp: int = 0,
        id_bits: int = ID_BITS_MIN,
        flush_ns: int = DEFAULT_FLUSH_NS,
        clock: Callable[[], int] = time.monotonic_ns,
        start_ns: int | None = None,
    ) -> None:
        self.ring = ring
        self.layout = ring.layout
        self.segment = segment
        self.module, self.kernel, self.launch, self.block, self.warp = module, kernel, launch, block, warp
        self.id_bits = id_bits
        self.id_mask = (1 << id_bits) - 1
        self.flush_ns = flush_ns
        self.clock = clock
        counters = ring.counters[segment]
        self.seq = int(counters["next_chunk"])
        self.events = int(counters["events"])
        self.pending = False
        self.tear: Tear | None = None
        self.on_torn: Callable[[], None] | None = None
        """Runs between the early tag and the body of a ``tag_first`` chunk: a test drains here."""
        self._slots = ring.chunks[segment]
        self._base = clock() if start_ns is None else start_ns
        self._reset_chunk()

    def _reset_chunk(self) -> None:
        self._words = np.zeros(self.layout.chunk_words, dtype="<u4")
        self._pe = self.layout.first_event
        self._pp = self.layout.last_payload

    @property
    def staged(self) -> bool:
        return self._pe != self.layout.first_event or self._pp != self.layout.last_payload

    def event(self, event_id: int, payload: int | float | None = None, t_ns: int | None = None) -> None:
        """Record event ``event_id`` (its range end is :meth:`end`) at ``t_ns`` (default: now)."""
        if not 1 <= event_id <= self.id_mask:
            raise ValueError(f"event id {event_id} outside 1..{self.id_mask}")
        t = self.clock() if t_ns is None else t_ns
        full = self._pe >= self._pp if payload is not None else self._pe > self._pp
        if full or ((t - self._base) & _MASK32) > self.flush_ns:
            if self.staged:
                self.flush(0, now=t)
            else:
                self._base = t
        self._words[self._pe] = (t & _MASK32 & ~self.id_mask) | event_id
        self._pe += 1
        if payload is not None:
            self._words[self._pp] = payload_bits(payload)
            self._pp -= 1

    def end(self, t_ns: int | None = None) -> None:
        """The end of the innermost open range of this warp."""
        self.event(range_end_id(self.id_bits), t_ns=t_ns)

    def flush(self, flags: int, now: int | None = None) -> None:
        """Store the staged chunk and publish the one before it."""
        self._publish_previous()
        words = self._words
        chunk = words.view(self.layout.chunk_dtype)[0]
        chunk["tag"] = 0
        chunk["stamp"] = self.seq + 1
        chunk["events_before"] = self.events & _MASK32
        chunk["module"] = self.module
        chunk["kernel"] = self.kernel
        chunk["flags"] = flags
        chunk["launch"] = self.launch & _MASK32
        chunk["block_x"], chunk["block_y"], chunk["block_z"] = self.block
        chunk["warp"] = self.warp
        chunk["n_events"] = self._pe - self.layout.first_event
        chunk["n_payloads"] = self.layout.last_payload - self._pp
        chunk["id_bits"] = self.id_bits
        chunk["t_base"] = self._base
        chunk["tail"] = self.seq + 1
        slot = self.seq % self.ring.geometry.chunks_per_segment
        if self.tear is not None:
            self._store_torn(slot, words)
        else:
            self._slots[slot : slot + 1].view("<u4")[:] = words
        self._slots[(self.seq + 1) % self.ring.geometry.chunks_per_segment]["tag"] = 0  # announce the next slot
        self.events += self._pe - self.layout.first_event
        self.seq += 1
        self.pending = self.tear is None
        self.tear = None
        self._reset_chunk()
        self._base = self.clock() if now is None else now

    def _store_torn(self, slot: int, words: np.ndarray[Any, np.dtype[np.uint32]]) -> None:
        self._slots[slot]["tag"] = self.seq + 1
        if self.tear == "tag_first":
            if self.on_torn is not None:
                self.on_torn()
            body = self._slots[slot : slot + 1].view("<u4")
            body[1:] = words[1:]

    def _publish_previous(self) -> None:
        if self.pending:
            store_fence()
            self._slots[(self.seq - 1) % self.ring.geometry.chunks_per_segment]["tag"] = self.seq
            self.pending = False

    def close(self) -> None:
        """The warp finishes: its last chunk, its counters, and the last publication."""
        if self.staged:
            self.flush(FLAG_WARP_END, now=self._base)
        if self.pending:
            counters = self.ring.counters[self.segment : self.segment + 1]
            counters["next_chunk"] = self.seq & _MASK32
            counters["events"] = self.events & _MASK32
            self._publish_previous()

    def __enter__(self) -> WarpWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def flood(
    ring: RingView,
    *,
    chunks_per_segment: int,
    segments: Sequence[int] | None = None,
    module: int = 1,
    id_bits: int = ID_BITS_MIN,
    t0: int = 1 << 40,
) -> int:
    """Write ``chunks_per_segment`` full chunks into each of ``segments`` (default: all), as
    many warps of the device would, all at once: announce, bodies, fence, tags, counters.
    Every event is a mark with id 1, ``2**id_bits`` ns after the one before. Returns the
    number of events written. Chunks beyond a segment's capacity lap the ring: only the newest
    ``chunks_per_segment`` of each segment remain to be read."""
    layout = ring.layout
    cap = ring.geometry.chunks_per_segment
    segs = np.arange(ring.geometry.segments) if segments is None else np.asarray(segments, dtype=np.int64)
    kept = min(chunks_per_segment, cap)
    start = ring.counters["next_chunk"][segs].astype(np.int64)
    events_start = ring.counters["events"][segs].astype(np.int64)
    n_events = layout.body_words
    step = 1 << id_bits
    seqs = start[:, None] + np.arange(chunks_per_segment - kept, chunks_per_segment)[None, :]
    bodies = np.zeros(seqs.shape, dtype=layout.chunk_dtype)
    bodies["stamp"] = seqs + 1
    bodies["tail"] = seqs + 1
    bodies["events_before"] = (events_start[:, None] + (seqs - start[:, None]) * n_events) & _MASK32
    bodies["module"] = module
    bodies["block_x"] = segs[:, None]
    bodies["warp"] = segs[:, None] % 32
    bodies["n_events"] = n_events
    bodies["id_bits"] = id_bits
    base = t0 + seqs * (n_events * step)
    bodies["t_base"] = base
    times = base[:, :, None] + np.arange(n_events, dtype=np.int64) * step
    bodies["words"][:, :, :n_events] = (times & _MASK32 & ~(step - 1)) | 1
    slots = seqs % cap
    tags = ring.chunks["tag"]
    tags[segs[:, None], slots] = 0
    store_fence()
    ring.chunks[segs[:, None], slots] = bodies
    store_fence()
    tags[segs[:, None], slots] = (seqs + 1).astype(np.uint32)
    ring.counters["next_chunk"][segs] = (start + chunks_per_segment) & _MASK32
    ring.counters["events"][segs] = (events_start + chunks_per_segment * n_events) & _MASK32
    return int(len(segs) * chunks_per_segment * n_events)


@dataclass(frozen=True)
class SyntheticEvent:
    """One event of a synthetic warp, as a test expects to decode it."""

    event_id: int
    t_ns: int
    payload: int | float | None


SYNTHETIC_EVENTS: tuple[EventInfo, ...] = (
    EventInfo(1, "tick", "mark"),
    EventInfo(2, "work", "range"),
    EventInfo(3, "row", "mark", "int32"),
    EventInfo(4, "mask", "mark", "uint32"),
    EventInfo(5, "scale", "mark", "float32"),
)
"""The event table of :func:`synthetic_warps` (with the module's range end, id 31)."""


def synthetic_table(module: int = 1) -> ModuleEvents:
    return ModuleEvents(module, ID_BITS_MIN, ("synthetic",), SYNTHETIC_EVENTS)


def synthetic_warps(warps: int, events_per_warp: int, *, seed: int = 0) -> Iterator[tuple[int, list[SyntheticEvent]]]:
    """A reproducible stream: for each warp (its index), events of :data:`SYNTHETIC_EVENTS`
    and range ends, 40 to 3000 ns apart, with payloads of each event's type."""
    rng = np.random.default_rng(seed)
    choices = (1, 2, 31, 3, 4, 5)
    for warp in range(warps):
        t = int(rng.integers(1 << 40, 1 << 41))
        events = []
        for _ in range(events_per_warp):
            t += int(rng.integers(40, 3000))
            event_id = choices[int(rng.integers(0, len(choices)))]
            payload: int | float | None = None
            if event_id == 3:
                payload = int(rng.integers(-(1 << 31), 1 << 31))
            elif event_id == 4:
                payload = int(rng.integers(0, 1 << 32))
            elif event_id == 5:
                payload = float(rng.integers(-4000, 4000)) / 8
            events.append(SyntheticEvent(event_id, t, payload))
        yield warp, events


def write_synthetic(
    ring: RingView, warps: int, events_per_warp: int, *, seed: int = 0, module: int = 1, segments: int | None = None
) -> int:
    """Write :func:`synthetic_warps` into ``ring``, warp ``w`` into segment ``w % segments``,
    one warp after the other; returns the number of events."""
    segments = ring.geometry.segments if segments is None else segments
    total = 0
    for warp, events in synthetic_warps(warps, events_per_warp, seed=seed):
        writer = WarpWriter(
            ring,
            segment=warp % segments,
            module=module,
            launch=seed,
            block=(warp, 0, 0),
            warp=warp % 32,
            clock=_never,
            start_ns=events[0].t_ns if events else 0,
        )
        with writer:
            for event in events:
                writer.event(event.event_id, event.payload, t_ns=event.t_ns)
        total += len(events)
    return total


def _never() -> int:
    raise AssertionError("synthetic warps give every time explicitly")


def main(argv: list[str] | None = None) -> int:
    """Write a synthetic stream into an existing ring file, from this process."""
    parser = argparse.ArgumentParser(prog="python -m iket_tui.ring.cpu_producer", description=main.__doc__)
    parser.add_argument("ring", help="path of a ring file made with MappedRing.create")
    parser.add_argument("--warps", type=int, default=64)
    parser.add_argument("--events", type=int, default=200, help="events per warp")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--module", type=int, default=1)
    args = parser.parse_args(argv)
    try:
        mapped = MappedRing.open(args.ring)
    except (OSError, RingFormatError) as exc:
        print(f"iket-tui: cannot open ring: {exc}", file=sys.stderr)
        return 2
    total = write_synthetic(mapped.view, args.warps, args.events, seed=args.seed, module=args.module)
    print(total)
    return 0


if __name__ == "__main__":
    sys.exit(main())
