"""A CPU producer that writes the ring's layout by the CUDA runtime's rules, so that drain,
decode, lapping, warps that stop, generation changes and several processes are tested without
a GPU.

:class:`WarpWriter` is one warp: it writes its begin records, one record per event at the next
position of its segment, and its end record and the segment's counters when it finishes, as the
runtime does. The device stores a record in one instruction; here a record is stored in three
steps (its stamp cleared, its body, its stamp), which a reader that checks the stamp before and
after its copy never mistakes for a whole record. :func:`flood` writes many records at once for
benchmarks and lapping tests. ``python -m iket_tui.ring.cpu_producer RING_PATH ...`` runs
:func:`synthetic_warps` in another process.
"""

from __future__ import annotations

import argparse
import struct
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from iket_tui.ring.buffer import MappedRing, RingFormatError, RingView
from iket_tui.ring.events import EventInfo, ModuleEvents
from iket_tui.ring.layout import (
    BEGIN_RECORDS,
    END_PARTIAL,
    ID_BITS_MIN,
    RECORD_BEGIN,
    RECORD_BLOCK,
    RECORD_END,
    RECORD_LAUNCH,
    WARP_SLOTS,
    range_end_id,
)

_MASK32 = 0xFFFFFFFF


def payload_bits(value: int | float) -> int:
    """The 32 bits an event payload travels as: int32/uint32 two's complement, float32 IEEE."""
    if isinstance(value, float):
        return int(struct.unpack("<I", struct.pack("<f", value))[0])
    if not -(1 << 31) <= value < 1 << 32:
        raise ValueError(f"payload {value} does not fit in 32 bits")
    return value & _MASK32


class WarpWriter:
    """One warp writing into its segment: its begin records at once, then a record per event,
    each visible to a reader as soon as it is written."""

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
        sm: int | None = None,
        clock: Callable[[], int] = time.monotonic_ns,
        start_ns: int | None = None,
    ) -> None:
        self.ring = ring
        self.segment = segment
        self.module, self.kernel, self.launch, self.block, self.warp = module, kernel, launch, block, warp
        self.id_bits = id_bits
        self.id_mask = (1 << id_bits) - 1
        self.clock = clock
        self.closed = False
        self._slots = ring.records[segment]
        self._words = self._slots.view("<u4").reshape(-1, 4)
        self._cap = ring.geometry.records_per_segment
        counters = ring.counters[segment]
        self.pos = int(counters["next"])
        self.events_before = int(counters["events"])
        self._first = self.pos + BEGIN_RECORDS
        t = clock() if start_ns is None else start_ns
        self.last_ns = t
        """The time of the newest record (what :meth:`close` ends at by default)."""
        sm = segment // WARP_SLOTS if sm is None else sm
        self._store(RECORD_BEGIN << 8 | id_bits << 12 | kernel << 16 | warp << 24, t >> 32, t & _MASK32)
        self._store(RECORD_LAUNCH << 8 | module << 16, launch & _MASK32, block[0])
        self._store(RECORD_BLOCK << 8 | sm << 16, block[1] | block[2] << 16, self.events_before & _MASK32)
        ring.header["warps_started"] += 1

    @property
    def events(self) -> int:
        """Events this warp has written."""
        return self.pos - self._first

    def _store(self, word: int, hi: int, payload: int) -> None:
        row = self._words[self.pos % self._cap]
        row[3] = 0
        row[:3] = (word & _MASK32, hi & _MASK32, payload & _MASK32)
        row[3] = (self.pos + 1) & _MASK32
        self.pos += 1

    def event(self, event_id: int, payload: int | float | None = None, t_ns: int | None = None) -> None:
        """Record event ``event_id`` (its range end is :meth:`end`) at ``t_ns`` (default: now)."""
        if not 1 <= event_id <= self.id_mask:
            raise ValueError(f"event id {event_id} outside 1..{self.id_mask}")
        t = self.clock() if t_ns is None else t_ns
        bits = 0 if payload is None else payload_bits(payload)
        self.last_ns = t
        self._store((t & _MASK32 & ~self.id_mask) | event_id, t >> 32, bits)

    def end(self, t_ns: int | None = None) -> None:
        """The end of the innermost open range of this warp."""
        self.event(range_end_id(self.id_bits), t_ns=t_ns)

    def close(self, t_ns: int | None = None, *, partial: bool = False) -> None:
        """The warp finishes: its end record (at ``t_ns``, default the time of its newest
        record), then the segment's counters for the next warp in the slot; ``partial`` says not
        every lane was active."""
        if self.closed:
            return
        self.closed = True
        t = self.last_ns if t_ns is None else t_ns
        events = self.events
        self._store(RECORD_END << 8 | (END_PARTIAL if partial else 0) << 12, t >> 32, t & _MASK32)
        # one 8-byte store, as the device's: a reader never sees one half new and the other old
        pair = self.pos & _MASK32 | ((self.events_before + events) & _MASK32) << 32
        self.ring.counters.view("<u8")[self.segment] = pair
        self.ring.header["warps_ended"] += 1

    def __enter__(self) -> WarpWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def flood(
    ring: RingView,
    *,
    records_per_segment: int,
    segments: Sequence[int] | None = None,
    module: int = 1,
    id_bits: int = ID_BITS_MIN,
    t0: int = 1 << 40,
) -> int:
    """Write one warp of ``records_per_segment`` records (its begin records, marks with id 1,
    ``2**id_bits`` ns apart, and its end record) into each of ``segments`` (default: all), as
    many warps of the device would, all at once. Returns the number of events written. Records
    beyond a segment's capacity lap the ring: only the newest ``records_per_segment`` of each
    segment remain to be read."""
    cap = ring.geometry.records_per_segment
    segs = np.arange(ring.geometry.segments) if segments is None else np.asarray(segments, dtype=np.int64)
    total = records_per_segment
    if total < BEGIN_RECORDS + 1:
        raise ValueError(f"a warp writes at least {BEGIN_RECORDS + 1} records")
    n_events = total - BEGIN_RECORDS - 1
    kept = min(total, cap)
    start = ring.counters["next"][segs].astype(np.int64)
    events_start = ring.counters["events"][segs].astype(np.int64)
    step = 1 << id_bits
    offsets = np.arange(total - kept, total)
    pos = start[:, None] + offsets[None, :]
    rows = np.zeros((*pos.shape, 4), dtype="<u4")
    times = t0 + (offsets[None, :] - BEGIN_RECORDS) * step + np.zeros_like(pos)
    rows[..., 0] = (times & _MASK32 & ~(step - 1)) | 1
    rows[..., 1] = times >> 32
    begin_t = t0 - step
    first = {
        0: (RECORD_BEGIN << 8 | id_bits << 12, begin_t >> 32, begin_t & _MASK32),
        1: (RECORD_LAUNCH << 8 | module << 16, 0, None),
        2: (RECORD_BLOCK << 8, 0, None),
        total - 1: (RECORD_END << 8, (t0 + n_events * step) >> 32, (t0 + n_events * step) & _MASK32),
    }
    for offset, (word, hi, payload) in first.items():
        column = offset - (total - kept)
        if column < 0:
            continue
        rows[:, column, 0] = word | (segs // WARP_SLOTS << 16 if offset == 2 else 0)
        rows[:, column, 1] = hi
        if offset == 1:
            rows[:, column, 2] = segs
        elif offset == 2:
            rows[:, column, 2] = events_start & _MASK32
        else:
            rows[:, column, 2] = payload
    rows[..., 3] = (pos + 1) & _MASK32
    slots = pos % cap
    words = ring.records.view("<u4").reshape(ring.geometry.segments, cap, 4)
    words[segs[:, None], slots, 3] = 0
    words[segs[:, None], slots, :3] = rows[..., :3]
    words[segs[:, None], slots, 3] = rows[..., 3]
    ring.counters.view("<u8")[segs] = (start + total) & _MASK32 | ((events_start + n_events) & _MASK32) << 32
    ring.header["warps_started"] += len(segs)
    ring.header["warps_ended"] += len(segs)
    return int(len(segs) * n_events)


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
        for event in events:
            writer.event(event.event_id, event.payload, t_ns=event.t_ns)
        writer.close(events[-1].t_ns if events else 0)
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
