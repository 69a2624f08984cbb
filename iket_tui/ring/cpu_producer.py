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
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

import numpy as np

from iket_tui.ring.buffer import MappedRing, RingFormatError, RingView
from iket_tui.ring.events import EventInfo, ModuleEvents
from iket_tui.ring.layout import (
    CLAIM_STRIPES,
    END_COUNT_BITS,
    END_PARTIAL,
    ID_BITS_MIN,
    STAMP_LAP_SHIFT,
    claim_number,
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


_claim_lock = threading.Lock()


def claim_region(ring: RingView, sm: int = 0) -> int:
    """The next claim of ``ring`` for a warp on SM ``sm`` (its region is ``claim % regions``), as
    the warp's one atomic add on its stripe's counter."""
    stripe = sm % CLAIM_STRIPES
    counters = ring.header["claims"][0]
    with _claim_lock:
        taken = int(counters[stripe])
        counters[stripe] = taken + 1
    return claim_number(taken, stripe)


class WarpWriter:
    """One warp of one block writing into the region it claims: its descriptor at once, then a
    record per event, each visible to a reader as soon as it is written."""

    def __init__(
        self,
        ring: RingView,
        *,
        module: int,
        kernel: int = 0,
        launch: int = 0,
        block: tuple[int, int, int] = (0, 0, 0),
        warp: int = 0,
        id_bits: int = ID_BITS_MIN,
        sm: int = 0,
        grid: tuple[int, int, int] = (1, 1, 1),
        block_warps: int = 1,
        clock: Callable[[], int] = time.monotonic_ns,
        start_ns: int | None = None,
    ) -> None:
        self.ring = ring
        self.module, self.kernel, self.launch, self.block, self.warp = module, kernel, launch, block, warp
        self.id_bits = id_bits
        self.id_mask = (1 << id_bits) - 1
        self.clock = clock
        self.closed = False
        self.claim = claim_region(ring, sm)
        geometry = ring.geometry
        self.region = self.claim & (geometry.regions - 1)
        self._words = ring.record_words[self.region]
        self._descriptor = ring.descriptor_words[self.region]
        self._cap = geometry.records_per_region
        self._base = geometry.stamp_base(self.claim)
        self.pos = 0
        t = clock() if start_ns is None else start_ns
        self.last_ns = t
        """The time of the newest record (what :meth:`close` ends at by default)."""
        self._part(0, launch, block[0], block[1] | block[2] << 16)
        self._part(1, module << 16 | kernel << 8 | warp, t, t >> 32)
        self._part(2, sm | id_bits << 8 | block_warps << 16, grid[0], grid[1] | grid[2] << 16)

    @property
    def events(self) -> int:
        """Events this warp has written."""
        return self.pos

    def _part(self, index: int, a: int, b: int, c: int) -> None:
        part = self._descriptor[4 * index : 4 * index + 4]
        part[0] = 0
        part[1:] = (a & _MASK32, b & _MASK32, c & _MASK32)
        part[0] = (self.claim + 1) & _MASK32

    def _store(self, word: int, hi: int, payload: int) -> None:
        row = self._words[self.pos % self._cap]
        row[3] = 0
        row[:3] = (word & _MASK32, hi & _MASK32, payload & _MASK32)
        row[3] = (self._base + self.pos) & _MASK32
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
        """The warp finishes: its descriptor's end part (at ``t_ns``, default the time of its
        newest record), then the header's counters; ``partial`` says not every lane was active."""
        if self.closed:
            return
        self.closed = True
        t = self.last_ns if t_ns is None else t_ns
        flags = END_PARTIAL if partial else 0
        self._part(3, t, t >> 32, self.pos | flags << END_COUNT_BITS)
        header = self.ring.header
        with _claim_lock:
            header["warps_ended"] += 1
            header["events_ended"] += self.pos

    def __enter__(self) -> WarpWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def flood(
    ring: RingView,
    *,
    records_per_warp: int,
    warps: int | None = None,
    module: int = 1,
    launch: int = 0,
    block_warps: int = 1,
    id_bits: int = ID_BITS_MIN,
    t0: int = 1 << 40,
) -> int:
    """One launch of ``warps`` warps (default: one per region), ``block_warps`` to a block (warp
    ``i`` is warp ``i % block_warps`` of block ``i // block_warps``, on SM ``i % CLAIM_STRIPES``), of
    ``records_per_warp`` events each (marks with id 1, ``2**id_bits`` ns apart), each claiming a region and ending, as
    the device's warps would, all at once. Returns the number of events written. A warp that
    writes more than its region holds laps it (only its newest records remain), and claims beyond
    the ring's regions take the oldest warps' regions."""
    geometry = ring.geometry
    cap = geometry.records_per_region
    n = geometry.regions if warps is None else warps
    if records_per_warp < 0 or n < 0:
        raise ValueError("a flood needs a count of warps and of records per warp")
    counters = ring.header["claims"][0]
    with _claim_lock:
        first = counters.astype(np.int64)
        counters += np.bincount(np.arange(n) % CLAIM_STRIPES, minlength=CLAIM_STRIPES).astype(np.uint64)
    index = np.arange(n, dtype=np.int64)
    stripe = index % CLAIM_STRIPES
    claims = (first[stripe] + index // CLAIM_STRIPES) * CLAIM_STRIPES + stripe
    # a later warp's claim takes an earlier one's region: only the last warp of each region stays
    last = np.unique((claims % geometry.regions)[::-1], return_index=True)[1]
    kept_warps = np.sort(n - 1 - last)
    index, stripe, claims = index[kept_warps], stripe[kept_warps], claims[kept_warps]
    regions = claims & (geometry.regions - 1)
    kept = min(records_per_warp, cap)
    step = 1 << id_bits
    positions = np.arange(records_per_warp - kept, records_per_warp, dtype=np.int64)
    times = t0 + positions * step
    base = (((claims >> geometry.region_bits) << STAMP_LAP_SHIFT) + 1) & _MASK32
    words = ring.record_words
    slots = positions % cap
    body = np.zeros((len(claims), kept, 4), dtype="<u4")
    body[..., 0] = (times & _MASK32 & ~(step - 1)) | 1
    body[..., 1] = times >> 32
    body[..., 3] = (base[:, None] + positions[None, :]) & _MASK32
    words[regions[:, None], slots[None, :], 3] = 0
    words[regions[:, None], slots[None, :], :3] = body[..., :3]
    words[regions[:, None], slots[None, :], 3] = body[..., 3]
    t_end = t0 + max(records_per_warp - 1, 0) * step
    descriptor = np.zeros((len(claims), 16), dtype="<u4")
    tags = (claims + 1) & _MASK32
    descriptor[:, 0] = descriptor[:, 4] = descriptor[:, 8] = descriptor[:, 12] = tags
    descriptor[:, 1] = launch & _MASK32
    descriptor[:, 2] = index // block_warps
    descriptor[:, 5] = module << 16 | index % block_warps
    descriptor[:, 6], descriptor[:, 7] = (t0 - step) & _MASK32, (t0 - step) >> 32
    descriptor[:, 9] = stripe | id_bits << 8 | block_warps << 16  # on SM ``i % CLAIM_STRIPES``
    descriptor[:, 10], descriptor[:, 11] = max(-(-n // block_warps), 1), 1 | 1 << 16
    descriptor[:, 13], descriptor[:, 14] = t_end & _MASK32, t_end >> 32
    descriptor[:, 15] = records_per_warp
    ring.descriptor_words[regions] = descriptor
    with _claim_lock:
        ring.header["warps_ended"] += n
        ring.header["events_ended"] += n * records_per_warp
    return n * records_per_warp


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


SYNTHETIC_SMS: Final = 132
"""The SMs synthetic warps run on, as an H200's: their claims spread over every claim stripe."""


def write_synthetic(ring: RingView, warps: int, events_per_warp: int, *, seed: int = 0, module: int = 1) -> int:
    """Write :func:`synthetic_warps` into ``ring``, warp ``w`` as block ``w`` of launch ``seed``
    on SM ``w % SYNTHETIC_SMS``, one warp after the other; returns the number of events."""
    total = 0
    for warp, events in synthetic_warps(warps, events_per_warp, seed=seed):
        writer = WarpWriter(
            ring,
            module=module,
            launch=seed,
            block=(warp, 0, 0),
            warp=warp % 32,
            sm=warp % SYNTHETIC_SMS,
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
