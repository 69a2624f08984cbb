"""A launch of the demo's ``traced_gemm`` in which one block waits, written into a ring by the CPU
producer: what the bundled recording shows of a kernel that does not finish, and what the tests
drive through a real agent.

The warps do what TileLang's warp-specialized kernel does on the GPU (see the H200 recording):
the four loader warps of a block open ``tile`` and mark ``first_a``, then end; the four compute
warps add, per k-step, a ``k_step`` mark with k, a ``load`` range and an ``mma`` range, then
close ``tile``. The compute warps of the held block stop inside the ``mma`` range of one
k-step until :meth:`WaitingLaunch.release`: every record they wrote before is readable at once,
as on the GPU, and nothing after it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from iket_tui.demo.sample import TRACED_EVENTS
from iket_tui.ring.buffer import RingView
from iket_tui.ring.cpu_producer import WarpWriter
from iket_tui.ring.drain import RingDrain
from iket_tui.ring.events import EventInfo, ModuleEvents
from iket_tui.ring.layout import ID_BITS_MIN, RingGeometry
from iket_tui.ring.wire import kernel_module, kernel_records

TILE, FIRST_A, K_STEP, LOAD, MMA = (
    TRACED_EVENTS.index(name) + 1 for name in ("tile", "first_a", "k_step", "load", "mma")
)
"""The events' ids, as TileLang numbers them (in table order, from 1)."""
GRID = (8, 8)
"""traced_gemm 1024^3 in 128x128 tiles."""
K_STEPS = 32
WARPS = 8
LOADERS = 4
HELD_BLOCK = (3, 0)
HELD_AT_K = 17
FIRST_A_VALUE = 0.3125
TRACED_TABLE = ModuleEvents(
    1,
    ID_BITS_MIN,
    ("traced_gemm_kernel",),
    (
        EventInfo(TILE, "tile", "range", "int32"),
        EventInfo(FIRST_A, "first_a", "mark", "float32"),
        EventInfo(K_STEP, "k_step", "mark", "uint32"),
        EventInfo(LOAD, "load", "range"),
        EventInfo(MMA, "mma", "range"),
    ),
)
"""traced_gemm's event table as TileLang builds it (module 1)."""


@dataclass
class WaitingLaunch:
    """One ``traced_gemm`` launch written into ``ring``, starting at device time ``t0_ns``,
    whose block :data:`HELD_BLOCK` waits inside k-step :data:`HELD_AT_K` until released.

    Block ``i`` (row-major over the grid) runs on SM ``first_sm + i``: the ring needs a region for
    from there (a warp that waits keeps its warp slot, so another launch at the same time runs
    on other SMs).
    """

    ring: RingView
    module: int
    launch: int
    t0_ns: int
    id_bits: int = ID_BITS_MIN
    held_block: tuple[int, int] = HELD_BLOCK
    held_at_k: int = HELD_AT_K
    first_sm: int = 0
    written: int = 0
    """Events written so far."""
    _held: list[WarpWriter] = field(default_factory=list)
    _held_at_ns: int = 0

    def run_until_held(self) -> int:
        """Every block but the held one runs to its end; the held block's loaders end and its
        compute warps stop in ``mma`` of k-step ``held_at_k``. Returns the device time of the
        last event written."""
        newest = self.t0_ns
        for index in range(GRID[0] * GRID[1]):
            block = (index % GRID[0], index // GRID[0])
            start = self.t0_ns + 32 * (index % 16)
            for warp in range(WARPS):
                writer = self._writer(index, block, warp, start)
                t = self._begin(writer, block, warp, start)
                if warp < LOADERS:
                    writer.close()
                    newest = max(newest, t)
                    continue
                stop = self.held_at_k if block == self.held_block else K_STEPS
                t = self._steps(writer, 0, stop, t)
                if block == self.held_block:
                    t = self._step_until_mma(writer, self.held_at_k, t)
                    self._held.append(writer)  # every record it wrote is readable: it hangs after them
                    self._held_at_ns = max(self._held_at_ns, t)
                else:
                    t += 64
                    writer.end(t_ns=t)  # tile
                    self.written += 1
                    writer.close()
                newest = max(newest, t)
        return newest

    def release(self, t_ns: int) -> int:
        """The held block goes on at device time ``t_ns`` and finishes; returns the time of its last event."""
        newest = t_ns
        for writer in self._held:
            t = t_ns + 32 * writer.warp
            t += 416
            writer.end(t_ns=t)  # mma
            self.written += 1
            t = self._steps(writer, self.held_at_k + 1, K_STEPS, t)
            t += 64
            writer.end(t_ns=t)  # tile
            self.written += 1
            writer.close()
            newest = max(newest, t)
        self._held = []
        return newest

    @property
    def held_since_ns(self) -> int:
        """The device time of the held warps' last event."""
        return self._held_at_ns

    def _writer(self, index: int, block: tuple[int, int], warp: int, start: int) -> WarpWriter:
        return WarpWriter(
            self.ring,
            sm=self.first_sm + index,
            grid=(GRID[0], GRID[1], 1),
            block_warps=WARPS,
            module=self.module,
            launch=self.launch,
            block=(block[0], block[1], 0),
            warp=warp,
            id_bits=self.id_bits,
            clock=_no_clock,
            start_ns=start,
        )

    def _begin(self, writer: WarpWriter, block: tuple[int, int], warp: int, start: int) -> int:
        t = start + (128 if warp < LOADERS else 32)
        writer.event(TILE, block[1] * GRID[0] + block[0], t_ns=t)
        t += 832
        writer.event(FIRST_A, FIRST_A_VALUE, t_ns=t)
        self.written += 2
        return t

    def _steps(self, writer: WarpWriter, first: int, stop: int, t: int) -> int:
        for k in range(first, stop):
            t = self._step_until_mma(writer, k, t)
            t += 416
            writer.end(t_ns=t)  # mma
            self.written += 1
        return t

    def _step_until_mma(self, writer: WarpWriter, k: int, t: int) -> int:
        """k-step ``k`` up to the start of its ``mma`` range."""
        t += 96
        writer.event(K_STEP, k, t_ns=t)
        t += 32
        writer.event(LOAD, t_ns=t)
        t += 32
        writer.end(t_ns=t)  # load
        t += 32
        writer.event(MMA, t_ns=t)
        self.written += 4
        return t


def _no_clock() -> int:
    raise AssertionError("the waiting launch gives every time explicitly")


@dataclass(frozen=True)
class WaitingStream:
    """What an agent sends of one :class:`WaitingLaunch`: the event table, the records of the
    drain that finds the block waiting, and those of the drain after its release."""

    table: dict[str, Any]
    held: dict[str, Any]
    released: dict[str, Any]
    held_since_ns: int
    """Device time of the held warps' last event."""
    newest_held_ns: int
    """Device time of the launch's newest event while its block waits."""


def waiting_stream(
    *, agent_t_ns: int, device_t_ns: int, hold_ns: int, ring_id: int, launch: int = 6, drain_ns: int = 50_000_000
) -> WaitingStream:
    """A launch starting at device time ``device_t_ns`` drained at agent time ``agent_t_ns`` plus
    ``drain_ns`` (its block waiting), released ``hold_ns`` later, and drained again after
    ``drain_ns``. Each ``kernel_records`` carries ``device_now_ns``, the device timer at its
    drain, as the ring's live transport sends it."""
    geometry = RingGeometry(GRID[0] * GRID[1] * WARPS, 256)
    ring = RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry, ring_id)
    drain = RingDrain(ring)
    writer = WaitingLaunch(ring, module=TRACED_TABLE.module, launch=launch, t0_ns=device_t_ns)
    newest = writer.run_until_held()
    offset = device_t_ns - agent_t_ns  # device time = agent time + offset
    if newest - device_t_ns >= drain_ns:
        raise ValueError(f"a drain every {drain_ns} ns comes before the launch stops (after {newest - device_t_ns} ns)")
    first = drain.drain()
    held = kernel_records(first, t_ns=agent_t_ns + drain_ns)
    held["device_now_ns"] = agent_t_ns + drain_ns + offset
    held_since = writer.held_since_ns
    released_at = held_since + hold_ns
    writer.release(released_at)
    released = kernel_records(drain.drain(), t_ns=released_at - offset + drain_ns)
    released["device_now_ns"] = released_at + drain_ns
    table = kernel_module(TRACED_TABLE, ring_id=ring_id, layout=first.layout, t_ns=agent_t_ns)
    return WaitingStream(table, held, released, held_since, newest)
