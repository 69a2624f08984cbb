"""Recordings of kernel launches written through the CPU producer and the real drain, as the agent
records a traced program: a module of two kernels, ``gemm`` (ranges ``tile`` around k-steps of
``load`` and ``mma``, a ``k_step`` mark carrying the step) and ``softmax`` (a ``row`` range), their
durations jittered by a few timer steps as a GPU's are, and any range made slower on request."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from iket_tui.model import synthetic
from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import encode_batch
from iket_tui.ring.buffer import RingView
from iket_tui.ring.cpu_producer import WarpWriter
from iket_tui.ring.drain import RingDrain
from iket_tui.ring.events import EventInfo, ModuleEvents
from iket_tui.ring.layout import DEFAULT_LAYOUT, ID_BITS_MIN, RingGeometry
from iket_tui.ring.wire import kernel_module, kernel_records
from iket_tui.sources.recorder import RecordingWriter

RING = 5
S = 1_000_000_000
TILE, K_STEP, LOAD, MMA, ROW = 1, 2, 3, 4, 5
TABLE = ModuleEvents(
    1,
    ID_BITS_MIN,
    ("gemm", "softmax"),
    (
        EventInfo(TILE, "tile", "range", "int32", 1),
        EventInfo(K_STEP, "k_step", "mark", "uint32"),
        EventInfo(LOAD, "load", "range", "none", 2),
        EventInfo(MMA, "mma", "range", "none", 3),
        EventInfo(ROW, "row", "range", "none", 4),
    ),
)
GEMM_GRID = (4, 2, 1)
SOFTMAX_GRID = (8, 1, 1)
K_STEPS = 8
RANGE_NS: Mapping[str, int] = {"load": 320, "mma": 640, "row": 1_600}
"""Each range's own time; ``tile`` holds only the gaps between the k-steps'."""
GAP_NS = 64


def _no_clock() -> int:
    raise AssertionError("every event time is given")


def _launch(
    ring: RingView,
    kernel: int,
    launch: int,
    grid: tuple[int, int, int],
    start: int,
    times: Mapping[str, int],
    rng: np.random.Generator,
    k_steps: int,
) -> None:
    """Every block of ``grid`` with two warps, each running the kernel's ranges."""

    def took(name: str) -> int:
        return times[name] + 32 * int(rng.integers(-1, 2))  # a timer step either way

    for index, (x, y) in enumerate((x, y) for y in range(grid[1]) for x in range(grid[0])):
        for warp in range(2):
            t = start + 1_000 * index
            common = {"module": 1, "kernel": kernel, "launch": launch, "warp": warp, "clock": _no_clock}
            with WarpWriter(
                ring, block=(x, y, 0), grid=grid, block_warps=2, sm=index % 8, start_ns=t, **common
            ) as writer:
                if kernel == 1:
                    writer.event(ROW, t_ns=t)
                    t += took("row")
                    writer.end(t_ns=t)
                    continue
                writer.event(TILE, index, t_ns=t)
                for k in range(k_steps):
                    t += GAP_NS
                    writer.event(K_STEP, k, t_ns=t)
                    writer.event(LOAD, t_ns=t)
                    t += took("load")
                    writer.end(t_ns=t)
                    writer.event(MMA, t_ns=t)
                    t += took("mma")
                    writer.end(t_ns=t)
                t += GAP_NS
                writer.end(t_ns=t)


def kernel_messages(
    *,
    slower: Mapping[str, int] | None = None,
    seed: int = 0,
    launches: Sequence[int] = (3, 4),
    k_steps: int = K_STEPS,
    then_slower: Sequence[Mapping[str, int]] = (),
) -> Iterator[m.Message]:
    """The kernel messages of a program that launched ``gemm`` (of ``k_steps`` k-steps) then
    ``softmax``, numbered ``launches``; ``slower`` adds that many ns to a range of ``gemm`` (by
    name) in every block. Each of ``then_slower`` launches both again (the next numbers), its
    ``gemm`` slower by that."""
    rng = np.random.default_rng(seed)
    geometry = RingGeometry(64, 64)
    ring = RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry, RING)
    yield {"type": m.KERNEL_TRACING, "enabled": True, "device": "NVIDIA H200", "reason": None, "t_ns": S}
    yield kernel_module(TABLE, ring_id=RING, layout=DEFAULT_LAYOUT, t_ns=S)
    drain = RingDrain(ring)
    for round, more in enumerate((slower or {}, *then_slower)):
        gemm_times = {name: ns + more.get(name, 0) for name, ns in RANGE_NS.items()}
        at = (1 << 40) + 2 * round * S
        _launch(ring, 0, launches[0] + 2 * round, GEMM_GRID, at, gemm_times, rng, k_steps)
        yield kernel_records(drain.drain(), t_ns=2 * S + 2 * round * S)
        _launch(ring, 1, launches[1] + 2 * round, SOFTMAX_GRID, at + S, RANGE_NS, rng, k_steps)
        yield kernel_records(drain.drain(), t_ns=3 * S + 2 * round * S)


def kernel_recording(
    path: Path,
    *,
    slower: Mapping[str, int] | None = None,
    seed: int = 0,
    k_steps: int = K_STEPS,
    then_slower: Sequence[Mapping[str, int]] = (),
    compiles: Sequence[synthetic.Lowering] = (),
) -> Path:
    """A recording of ``compiles`` (if any), then the kernel messages of :func:`kernel_messages`."""
    writer = RecordingWriter(path, source="pid 4242: python kernels.py")
    writer.write(synthetic.agent_hello())
    for lowering in compiles:
        messages = lowering.messages()
        writer.write_frames(encode_batch(messages), messages)
    for msg in kernel_messages(slower=slower, seed=seed, k_steps=k_steps, then_slower=then_slower):
        writer.write(msg)
    writer.close("target exited")
    return path
