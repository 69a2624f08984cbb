# mypy: disable-error-code="valid-type, untyped-decorator, no-untyped-call"
"""The kernel event ring on a real GPU: correctness, loss accounting, liveness, a block that
waits, overhead, drain.

Needs an NVIDIA GPU (run on the H200), CuPy, torch and TileLang:

    PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 python3 benchmarks/gpu_ring_check.py [--overhead-only]

It allocates the ring in device memory (:class:`~iket_tui.ring.device_copy.DeviceRing`, copied
to the host by a DMA engine on a stream of its own while kernels run), compiles TileLang kernels
with the iket-tui runtime through TileLang's CUDA post-processing callback, launches them on
torch tensors, drains the ring and prints one table; with ``$OUT`` set it also writes
``$OUT/gpu_ring_check.json``. Two rings: the agent's default (``KernelOptions()``), and one of
16 records per region with room for every warp of its kernel, so that each warp laps its own
region and must keep its newest 16 events, named by its block and warp.

The kernel builders below are plain TileLang and need no GPU: the CPU tests lower and nvcc them
(tests/ring/test_ring_tilelang.py), so that what runs here has compiled before.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from iket_tui.agent.kernel_options import KernelOptions
from iket_tui.ring.counters import LOSS_OVERWRITTEN, DrainBatch
from iket_tui.ring.decode import EventTables
from iket_tui.ring.device import RingTarget
from iket_tui.ring.drain import RingDrain
from iket_tui.ring.events import ModuleEvents
from iket_tui.ring.layout import (
    EVENT_DTYPE,
    EVENT_WARP_BEGIN,
    EVENT_WARP_END,
    EVENT_WARP_ROW,
    KIND_END,
    KIND_MARK,
    KIND_MASK,
    KIND_START,
    RingGeometry,
)
from iket_tui.ring.runtime import DeviceRuntime, installed

TARGET = {"kind": "cuda", "arch": "sm_90a"}
THREADS = 128
GEMM_SIZE = 4096
GEMM_TILE = (128, 128, 32)
GEMM_STAGES = 3
GEMM_VARIANTS = ("plain", "ksteps", "block")
SCALE = 1.25
"""The float payload of the known-count kernel's last mark."""


# ---- kernels (TileLang only; no GPU needed to build, lower or nvcc them) -------------------------


def known_count_kernel(blocks: int, steps: int) -> Any:
    """A kernel whose events are known in advance: per warp, ``begin`` (payload: block index),
    ``steps`` ranges ``step`` (payload: the step) each holding a ``tick`` mark, then ``scale``
    (payload: ``Scale[0]``, a float)."""
    import tilelang.language as T
    from tilelang.tools.cuda import iket

    @T.prim_func
    def known_count(Out: T.Tensor((blocks * THREADS,), T.int32), Scale: T.Tensor((1,), T.float32)) -> None:
        with T.Kernel(blocks, threads=THREADS) as bx:
            T.evaluate(iket.mark("begin", payload=iket.payload(bx, "int32")))
            for i in T.serial(steps):
                with iket.range("step", payload=iket.payload(i, "uint32")):
                    T.evaluate(iket.mark("tick"))
            T.evaluate(iket.mark("scale", payload=iket.payload(Scale[0], "float32")))
            for j in T.Parallel(THREADS):
                Out[bx * THREADS + j] = bx

    return known_count


def known_count_per_warp(steps: int) -> int:
    return 3 * steps + 2


def long_running_kernel(blocks: int, outer: int, inner: int) -> Any:
    """Each warp marks ``beat`` (payload: the beat) every ``inner`` dependent multiply-adds,
    ``outer`` times: seconds of work with events all along."""
    import tilelang.language as T
    from tilelang.tools.cuda import iket

    @T.prim_func
    def long_running(Out: T.Tensor((blocks * THREADS,), T.float32)) -> None:
        with T.Kernel(blocks, threads=THREADS) as bx:
            acc = T.alloc_local((1,), T.float32)
            acc[0] = T.float32(0)
            for o in T.serial(outer):
                for _ in T.serial(inner):
                    acc[0] = acc[0] * T.float32(0.999) + T.float32(1)
                T.evaluate(iket.mark("beat", payload=iket.payload(o, "int32")))
            for j in T.Parallel(THREADS):
                Out[bx * THREADS + j] = acc[0]

    return long_running


def gemm_kernel(variant: str, size: int = GEMM_SIZE) -> Any:
    """C = A @ B, fp16 in, fp32 accumulate, 128x128x32 tiles, 3 stages; ``variant`` is
    ``plain`` (no IKET), ``ksteps`` (a range around the loads and one around the MMA of every
    k-step) or ``block`` (one range around each block's work)."""
    import tilelang.language as T
    from tilelang.tools.cuda import iket

    if variant not in GEMM_VARIANTS:
        raise ValueError(f"unknown GEMM variant {variant!r}")
    block_m, block_n, block_k = GEMM_TILE
    per_step = variant == "ksteps"
    per_block = variant == "block"

    @T.prim_func
    def gemm(
        A: T.Tensor((size, size), T.float16),
        B: T.Tensor((size, size), T.float16),
        C: T.Tensor((size, size), T.float16),
    ) -> None:
        with T.Kernel(T.ceildiv(size, block_n), T.ceildiv(size, block_m), threads=THREADS) as (bx, by):
            A_shared = T.alloc_shared((block_m, block_k), T.float16)
            B_shared = T.alloc_shared((block_k, block_n), T.float16)
            C_local = T.alloc_fragment((block_m, block_n), T.float32)
            if per_block:
                T.evaluate(iket.range_push("block"))
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(size, block_k), num_stages=GEMM_STAGES):
                if per_step:
                    T.evaluate(iket.range_push("load"))
                T.copy(A[by * block_m, ko * block_k], A_shared)
                T.copy(B[ko * block_k, bx * block_n], B_shared)
                if per_step:
                    T.evaluate(iket.range_pop("load"))
                    T.evaluate(iket.range_push("mma"))
                T.gemm(A_shared, B_shared, C_local)
                if per_step:
                    T.evaluate(iket.range_pop("mma"))
            T.copy(C_local, C[by * block_m, bx * block_n])
            if per_block:
                T.evaluate(iket.range_pop("block"))

    return gemm


def compile_kernel(runtime: DeviceRuntime, func: Any) -> Any:
    """``tilelang.compile`` with the runtime as the CUDA post-processing callback, cache off."""
    import tilelang
    from tilelang.tools.cuda import iket

    tilelang.disable_cache()
    iket.reset()
    with installed(runtime):
        return tilelang.compile(func, target=dict(TARGET))


def lower_kernel(runtime: DeviceRuntime, func: Any) -> str:
    """The generated CUDA of ``func`` with the runtime in it (no nvcc, no GPU)."""
    import tilelang
    from tilelang import tvm
    from tilelang.tools.cuda import iket

    tilelang.disable_cache()
    iket.reset()
    target = tvm.target.Target(dict(TARGET))
    with installed(runtime), target:
        return str(tilelang.lower(func, target=target, enable_device_compile=False).kernel_source)


# ---- the ring in device memory --------------------------------------------------------------------


def agent_geometry() -> RingGeometry:
    """The ring the agent gives a GPU by default (``KernelOptions()``)."""
    options = KernelOptions()
    return RingGeometry(options.regions, options.records_per_region)


LAPPING_RECORDS = 16
"""Records per region of the small ring: a warp of the known-count kernel laps its region."""
LAPPING_BLOCKS_PER_SM = 16
"""Blocks per SM of the known-count kernel on the small ring (800 steps: 2,402 events a warp)."""


def lapping_geometry(warps: int) -> RingGeometry:
    """A ring of :data:`LAPPING_RECORDS` records per region with at least two regions for each
    of ``warps`` warps (so that no claim comes round again, however unevenly the SMs' claim
    counters share them): every warp laps its own region and keeps its newest
    :data:`LAPPING_RECORDS` events."""
    return RingGeometry(1 << (2 * warps - 1).bit_length(), LAPPING_RECORDS)


class GpuRing:
    """A ring in device memory with its drain (copies by a DMA engine, while kernels run).

    ``cuda_runtime`` replaces the runtime's CUDA text (``gpu_ring_variants.py`` measures edited copies)."""

    def __init__(self, geometry: RingGeometry, cuda_runtime: str | None = None) -> None:
        from iket_tui.ring.device_copy import DeviceRing

        self.device = DeviceRing(geometry)
        self.view = self.device.view
        self.target = RingTarget(self.device.address, geometry, self.view.ring_id)
        self.tables = EventTables()
        self.runtime = DeviceRuntime(self.target, on_module=self._on_module, cuda_runtime=cuda_runtime)
        self.drain = RingDrain(self.view, period_s=1.0 / KernelOptions().drain_hz, source=self.device)

    def _on_module(self, events: ModuleEvents, target: RingTarget | None) -> None:
        self.tables.add(events)


@dataclass
class Collected:
    """What a drain thread gathered: batches with the host time they arrived."""

    keep: bool = True
    batches: list[tuple[float, DrainBatch]] = field(default_factory=list)
    events_read: int = 0

    def add(self, batch: DrainBatch) -> None:
        self.events_read += batch.events
        if self.keep:
            self.batches.append((time.monotonic(), batch))

    def events(self, tables: EventTables, warp_rows: bool = False) -> np.ndarray[Any, Any]:
        """The events of every batch (with the warp rows of warps that began or ended alone, if asked)."""
        parts = [batch.decode(tables) for _, batch in self.batches]
        events = np.concatenate(parts) if parts else np.empty(0, dtype=EVENT_DTYPE)
        return events if warp_rows else events[(events["kind"] & EVENT_WARP_ROW) == 0]


@contextmanager
def draining(ring: GpuRing, keep: bool = True) -> Iterator[Collected]:
    """Drain ``ring`` at 20 Hz on a thread inside the block; the last pass runs after it."""
    collected = Collected(keep)
    stop = threading.Event()
    thread = ring.drain.run(collected.add, stop)
    try:
        yield collected
    finally:
        stop.set()
        thread.join(timeout=60)


# ---- checks ---------------------------------------------------------------------------------------


class Hung(RuntimeError):
    """A kernel did not finish in time: the GPU context cannot be trusted any more."""


def finish(what: str, seconds: float = 30.0) -> float:
    """Wait for the work queued so far, at most ``seconds``; the seconds it took."""
    import torch

    done = torch.cuda.Event()
    done.record()
    t0 = time.monotonic()
    while not done.query():
        if time.monotonic() - t0 > seconds:
            raise Hung(f"{what} did not finish in {seconds:.0f} s")
        time.sleep(0.001)
    return time.monotonic() - t0


@dataclass
class Row:
    check: str
    ok: bool
    measured: str
    expected: str


def check_known_count(ring: GpuRing, blocks: int, steps: int, label: str, expect_loss: bool) -> list[Row]:
    """Launch the known-count kernel once, drain, and account for every event."""
    import torch

    kernel = compile_kernel(ring.runtime, known_count_kernel(blocks, steps))
    out = torch.zeros(blocks * THREADS, dtype=torch.int32, device="cuda")
    scale = torch.full((1,), SCALE, dtype=torch.float32, device="cuda")
    with draining(ring) as collected:
        kernel(out, scale)
        finish(f"{label}: known-count kernel")
    counters = ring.drain.counters
    warps = blocks * THREADS // 32
    expected = warps * known_count_per_warp(steps)
    events = collected.events(ring.tables)
    rows_all = collected.events(ring.tables, warp_rows=True)
    began = int(((rows_all["kind"] & EVENT_WARP_BEGIN) != 0).sum())
    ended = int(((rows_all["kind"] & EVENT_WARP_END) != 0).sum())
    rows = [
        Row(
            f"{label}: kernel result",
            bool((out.cpu() == torch.arange(blocks).repeat_interleave(THREADS)).all()),
            "",
            "",
        ),
        Row(
            f"{label}: written = read + lost",
            counters.balanced and counters.events_written == expected,
            f"written {counters.events_written}, read {counters.events_read}, lost {counters.events_lost}",
            f"written {expected}",
        ),
        Row(f"{label}: torn", counters.torn == 0, str(counters.torn), "0"),
    ]
    rows.append(Row(f"{label}: every warp began and ended", began == ended == warps, f"{began}, {ended}", str(warps)))
    if expect_loss:
        losses = np.concatenate([batch.losses for _, batch in collected.batches]) if collected.batches else None
        rows += _check_lapped_warps(events, losses, counters, blocks, steps, label)
        return rows
    rows.append(Row(f"{label}: received", len(events) == expected, str(len(events)), str(expected)))
    rows.append(Row(f"{label}: lost", counters.events_lost == 0, str(counters.events_lost), "0"))
    rows.extend(_check_known_events(events, blocks, steps, label))
    return rows


def _check_lapped_warps(
    events: np.ndarray[Any, Any],
    losses: np.ndarray[Any, Any] | None,
    counters: Any,
    blocks: int,
    steps: int,
    label: str,
) -> list[Row]:
    """Every warp of the known-count kernel wrote more than its region holds: it keeps its
    newest :data:`LAPPING_RECORDS` events, named by its block and warp, and the drain names it
    as overwritten with exactly the rest."""
    per_warp = known_count_per_warp(steps)
    kept = min(LAPPING_RECORDS, per_warp)
    warps = blocks * THREADS // 32
    lost_each = per_warp - kept
    rows = [
        Row(
            f"{label}: events read = warps x {kept}, lost = the rest",
            counters.events_read == warps * kept and counters.events_lost == warps * lost_each,
            f"read {counters.events_read}, lost {counters.events_lost}",
            f"read {warps * kept}, lost {warps * lost_each}",
        )
    ]
    keys = events["block_x"].astype(np.int64) * 64 + events["warp"]
    found, counts = np.unique(keys, return_counts=True)
    every = np.array([block * 64 + warp for block in range(blocks) for warp in range(THREADS // 32)], dtype=np.int64)
    rows.append(
        Row(
            f"{label}: each warp's newest {kept} events, named by its block and warp",
            len(found) == len(every) and bool((found == every).all()) and bool((counts == kept).all()),
            f"{len(found)} warps, {sorted(set(counts.tolist()))} events each",
            f"{warps} warps (blocks 0..{blocks - 1}, warps 0..{THREADS // 32 - 1}), {kept} each",
        )
    )
    # The newest events of the known sequence: the last `kept` of mark, (start, tick, end) x steps, scale.
    expected_kinds = np.array([KIND_MARK] + [KIND_START, KIND_MARK, KIND_END] * steps + [KIND_MARK])[-kept:]
    expected_payloads = np.zeros(per_warp, dtype=np.uint32)
    expected_payloads[1 : 1 + 3 * steps : 3] = np.arange(steps, dtype=np.uint32)
    expected_payloads[-1] = np.float32(SCALE).view(np.uint32)
    ordered = events[np.argsort(keys, kind="stable")]
    in_order = len(ordered) == warps * kept
    if in_order:
        kinds = (ordered["kind"] & KIND_MASK).reshape(-1, kept)
        payloads = ordered["payload"].reshape(-1, kept)
        in_order = bool((kinds == expected_kinds).all()) and bool((payloads == expected_payloads[-kept:]).all())
    rows.append(Row(f"{label}: the kept events are each warp's last, in order, with their payloads", in_order, "", ""))
    if losses is None or not len(losses):
        rows.append(Row(f"{label}: losses name each warp, overwritten", False, "no loss named", f"{warps} warps"))
        return rows
    loss_keys = losses["block_x"].astype(np.int64) * 64 + losses["warp"]
    named, where = np.unique(loss_keys, return_inverse=True)
    per_named = np.bincount(where, weights=losses["events"].astype(np.int64)).astype(np.int64)
    reasons = sorted(set(losses["reason"].tolist()))
    rows.append(
        Row(
            f"{label}: losses name each warp, overwritten, with its lost events",
            reasons == [LOSS_OVERWRITTEN]
            and len(named) == len(every)
            and bool((named == every).all())
            and bool((per_named == lost_each).all()),
            f"{len(named)} warps named, reasons {reasons}, {sorted(set(per_named.tolist()))[:4]} events each",
            f"{warps} warps, reason {LOSS_OVERWRITTEN} (overwritten), {lost_each} each",
        )
    )
    return rows


def _check_known_events(events: np.ndarray[Any, Any], blocks: int, steps: int, label: str) -> list[Row]:
    per_warp = known_count_per_warp(steps)
    order = np.lexsort((events["warp"], events["block_x"]))
    ordered = events[order]
    if len(ordered) % per_warp:
        return [Row(f"{label}: per-warp sequences", False, f"{len(ordered)} events", f"multiple of {per_warp}")]
    kinds = (ordered["kind"] & KIND_MASK).reshape(-1, per_warp)
    expected_kinds = np.array([KIND_MARK] + [KIND_START, KIND_MARK, KIND_END] * steps + [KIND_MARK])
    payloads = ordered["payload"].reshape(-1, per_warp)
    blocks_seen = ordered["block_x"].reshape(-1, per_warp)[:, 0]
    step_payloads = payloads[:, 1 : 1 + 3 * steps : 3]
    scale_bits = np.float32(SCALE).view(np.uint32)
    warps_ok = len(kinds) == blocks * THREADS // 32
    return [
        Row(f"{label}: every warp's events in order", bool(warps_ok and (kinds == expected_kinds).all()), "", ""),
        Row(f"{label}: int32 payload = block", bool((payloads[:, 0] == blocks_seen).all()), "", ""),
        Row(f"{label}: uint32 payloads = steps", bool((step_payloads == np.arange(steps)).all()), "", ""),
        Row(f"{label}: float32 payload", bool((payloads[:, -1] == scale_bits).all()), "", f"{SCALE}"),
        Row(
            f"{label}: timestamps rise within each warp",
            bool((np.diff(ordered["t_ns"].reshape(-1, per_warp).astype(np.int64), axis=1) >= 0).all()),
            "",
            "",
        ),
    ]


def check_liveness(ring: GpuRing, blocks: int, outer: int, inner: int) -> list[Row]:
    """A kernel that runs for seconds: its records must reach the host while it runs."""
    import torch

    kernel = compile_kernel(ring.runtime, long_running_kernel(blocks, outer, inner))
    out = torch.zeros(blocks * THREADS, dtype=torch.float32, device="cuda")
    done = torch.cuda.Event()
    before = ring.drain.counters.events_read
    with draining(ring) as collected:
        started = time.monotonic()
        kernel(out)
        done.record()
        while not done.query():
            if time.monotonic() - started > 60:
                raise Hung("the long-running kernel did not finish in 60 s")
            time.sleep(0.005)
        finished = time.monotonic()
        time.sleep(0.2)
    during = sum(batch.events for at, batch in collected.batches if at < finished)
    total = ring.drain.counters.events_read - before
    first = min((at for at, batch in collected.batches if len(batch.chunks)), default=float("nan"))
    expected = blocks * THREADS // 32 * outer
    seconds = finished - started
    return [
        Row("liveness: kernel ran", seconds > 0.5, f"{seconds:.2f} s", "> 0.5 s"),
        Row(
            "liveness: records while running",
            during > 0 and first < finished,
            f"{during} of {total} events, first after {1000 * (first - started):.0f} ms",
            "> 0 before the end",
        ),
        Row("liveness: all records", total == expected, str(total), str(expected)),
    ]


def check_overhead(ring: GpuRing, rounds: int, launches: int, size: int) -> tuple[list[Row], dict[str, float]]:
    """Median time of the traced GEMMs against the plain one, launches interleaved, the ring
    drained meanwhile (the live transport, as the agent runs it)."""
    import torch

    kernels = {}
    for variant in GEMM_VARIANTS:
        t0 = time.monotonic()
        kernels[variant] = compile_kernel(ring.runtime, gemm_kernel(variant, size))
        print(f"  compiled GEMM {variant} in {time.monotonic() - t0:.1f} s", flush=True)
    a = torch.randn(size, size, dtype=torch.float16, device="cuda")
    b = torch.randn(size, size, dtype=torch.float16, device="cuda")
    reference = a.float() @ b.float()
    rows: list[Row] = []
    outputs = {}
    for variant, kernel in kernels.items():
        c = torch.empty(size, size, dtype=torch.float16, device="cuda")
        kernel(a, b, c)
        seconds = finish(f"GEMM {variant}")
        error = float((c.float() - reference).abs().max() / reference.abs().max())
        rows.append(
            Row(
                f"GEMM {size} {variant}: result",
                error < 1e-2,
                f"max rel err {error:.1e}, first in {seconds * 1e3:.1f} ms",
                "< 1e-2",
            )
        )
        outputs[variant] = c
    times: dict[str, list[float]] = {variant: [] for variant in GEMM_VARIANTS}
    read_before = ring.drain.counters.events_read
    order = list(kernels.items())
    with draining(ring, keep=False):
        t0 = time.monotonic()
        for round_ in range(rounds):
            shift = round_ % len(order)
            for variant, kernel in order[shift:] + order[:shift]:
                times[variant] += timed_launches(kernel, (a, b, outputs[variant]), launches, f"timed GEMM {variant}")
        elapsed = time.monotonic() - t0
    medians = {variant: statistics.median(values) for variant, values in times.items()}
    drained = ring.drain.counters.events_read - read_before
    ratio_steps = medians["ksteps"] / medians["plain"]
    ratio_block = medians["block"] / medians["plain"]
    tflops = 2 * size**3 / (medians["plain"] * 1e-3) / 1e12
    counters = ring.drain.counters
    rows += [
        Row(f"GEMM {size} plain", True, f"{medians['plain'] * 1000:.1f} us ({tflops:.0f} TFLOP/s)", ""),
        Row(f"overhead {size}: ranges every k-step", ratio_steps <= 1.10, f"{ratio_steps:.3f}", "<= 1.10"),
        Row(f"overhead {size}: one range per block", ratio_block <= 1.01, f"{ratio_block:.3f}", "<= 1.01"),
        Row("drained during GEMMs", True, f"{drained / elapsed / 1e6:.1f} M events/s read", ""),
        Row("drain during GEMMs: engine, threads", True, drain_engine(ring.drain), ""),
        Row(
            "counters during GEMMs",
            counters.balanced and counters.torn == 0,
            f"written {counters.events_written}, read {counters.events_read}, lost {counters.events_lost}, "
            f"torn {counters.torn}",
            "balanced, torn 0",
        ),
    ]
    figures = {f"gemm{size}_{k}_us": v * 1000 for k, v in medians.items()}
    figures |= {f"ratio{size}_ksteps": ratio_steps, f"ratio{size}_block": ratio_block}
    return rows, figures


def drain_engine(drain: RingDrain) -> str:
    """Which pass a drain runs and on how many threads its last pass ran."""
    return f"{drain.engine}; last pass on {drain.threads_used} thread(s)"


QUEUE_SPIN_S = 0.1
"""Seconds the GPU spins before each timed batch of launches, while the host queues the batch."""


def timed_launches(kernel: Any, args: tuple[Any, ...], launches: int, what: str) -> list[float]:
    """Milliseconds of each of ``launches`` back-to-back launches, from CUDA events.

    The batch waits behind a spin of :data:`QUEUE_SPIN_S` on the GPU so that all of it is queued
    before the GPU reaches it: a launch timed by CUDA events otherwise counts the time the host
    took to queue it, which drain threads make long (without the spin, ``gpu_ring_variants.py``
    with 23 rings drained measured rounds from 0.5 to 2.7 times the plain GEMM)."""
    import torch

    torch.cuda._sleep(int(QUEUE_SPIN_S * 1.98e9))  # cycles at the H200's boost clock
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(launches)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(launches)]
    for start, end in zip(starts, ends, strict=True):
        start.record()
        kernel(*args)
        end.record()
    finish(what)
    return [start.elapsed_time(end) for start, end in zip(starts, ends, strict=True)]


def check_drain_rate() -> list[Row]:
    """The host drain of a copy of the agent's default ring, filled by the CPU producer."""
    from benchmarks.ring_drain import measure

    result = measure()
    return [
        Row(
            f"host drain rate of a GPU ring's copy (up to {result['threads']} threads)",
            result["drain_events_per_s"] >= 200e6,
            f"{result['drain_events_per_s'] / 1e6:.0f} M/s ({result['engine']})",
            ">= 200 M/s",
        ),
        Row(
            "host drain rate of a GPU ring's copy, one thread",
            True,
            f"{result['drain_one_thread_events_per_s'] / 1e6:.0f} M/s",
            "",
        ),
        Row("host drain rate of a ring file", True, f"{result['drain_live_events_per_s'] / 1e6:.0f} M/s", ""),
        Row("host drain + decode rate", True, f"{result['drain_decode_events_per_s'] / 1e6:.0f} M/s", ""),
    ]


def _warps(events: np.ndarray[Any, Any]) -> dict[tuple[int, int], np.ndarray[Any, Any]]:
    """Each warp's rows, by (block, warp), in the order they were drained."""
    keys = events["block_x"].astype(np.int64) * 64 + events["warp"]
    return {(int(k) // 64, int(k) % 64): events[keys == k] for k in np.unique(keys)}


def waiting_expected(warp_block: int) -> int:
    """Events a warp of ``waiting_steps`` writes in ``warp_block``: its tile range, three per
    step, and the wait range in the block that waits."""
    from iket_tui.demo import kernels as demo

    return 2 + 3 * demo.WAITING_STEPS + (2 if warp_block == demo.WAITING_BLOCK else 0)


def check_waiting_block(ring: GpuRing, hold_s: float) -> list[Row]:
    """A block that waits on a flag: while it waits, the drain has every event its warps ran
    (the last one the ``wait`` range's start) and no end; after it is released, every warp ends
    and every event is accounted for."""
    import torch

    from iket_tui.demo import kernels as demo

    kernel = compile_kernel(ring.runtime, demo.waiting_steps())
    flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    out = torch.zeros(demo.WAITING_BLOCKS * 128, dtype=torch.float32, device="cuda")
    before = ring.drain.counters
    with draining(ring) as collected:
        kernel(flag, out)
        time.sleep(hold_s)
        held = collected.events(ring.tables, warp_rows=True)
        demo.release(flag.data_ptr())
        seconds = finish("the waiting kernel after its release")
    events = collected.events(ring.tables, warp_rows=True)
    table = next(t for t in (ring.tables.module(i) for i in range(1, 64)) if t and t.kernels[0].startswith("waiting"))
    wait_id = next(e.event_id for e in table.events if e.name == "wait")
    warps = _warps(held[held["module"] == table.module])
    stuck = {key: rows for key, rows in warps.items() if key[0] == demo.WAITING_BLOCK}
    ended = [key for key, rows in warps.items() if (rows["kind"] & EVENT_WARP_END).any()]
    stuck_ok = len(stuck) == 4 and all(
        int(rows["event"][-1]) == wait_id and not (rows["kind"] & EVENT_WARP_END).any() for rows in stuck.values()
    )
    final = _warps(events[events["module"] == table.module])
    real = events[(events["module"] == table.module) & ((events["kind"] & EVENT_WARP_ROW) == 0)]
    expected = sum(waiting_expected(block) * 4 for block in range(demo.WAITING_BLOCKS))
    counters = ring.drain.counters
    last_events = [int(rows["event"][-1]) for rows in stuck.values()]
    return [
        Row(
            "waiting block: its warps' events while it waits",
            stuck_ok,
            f"{len(stuck)} warps of block {demo.WAITING_BLOCK}, last events {last_events} (wait = {wait_id}), no end",
            "4 warps, last event the wait start, no end",
        ),
        Row(
            "waiting block: the other warps ended meanwhile",
            len(ended) == 4 * (demo.WAITING_BLOCKS - 1),
            f"{len(ended)} warps ended after {hold_s:.1f} s",
            str(4 * (demo.WAITING_BLOCKS - 1)),
        ),
        Row(
            "waiting block: after release, all ended and every event read",
            all((rows["kind"] & EVENT_WARP_END).any() for rows in final.values())
            and len(final) == 4 * demo.WAITING_BLOCKS
            and len(real) == expected
            and counters.events_read - before.events_read == expected
            and counters.events_lost == before.events_lost
            and counters.balanced,
            f"{len(real)} events of {len(final)} warps, ended {seconds:.2f} s after release; lost "
            f"{counters.events_lost - before.events_lost}",
            f"{expected} events, {4 * demo.WAITING_BLOCKS} warps, lost 0",
        ),
    ]


def _agent_env(out: str) -> dict[str, str]:
    """The environment for ``iket-tui run`` where the package is not installed (the device
    machine runs it from ``PYTHONPATH``): a ``sitecustomize.py`` holding the line of the
    installed ``.pth`` file, first on the path, starts the agent in the program. Where the
    package is installed the line runs twice, which imports the agent once."""
    site = os.path.join(out, "agent-site")
    os.makedirs(site, exist_ok=True)
    pth = os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "iket_tui", "agent", "iket_tui_agent.pth"
    )
    with open(pth) as source, open(os.path.join(site, "sitecustomize.py"), "w") as target:
        target.write(source.readline())
    path = os.environ.get("PYTHONPATH")
    return dict(os.environ, PYTHONPATH=site + (os.pathsep + path if path else ""))


def check_stuck_under_agent(out: str, kill: bool, hold_s: float = 8.0) -> list[Row]:
    """``iket-tui run --kernels --record`` around a program whose block waits: the recording
    holds the waiting warps' events while they wait; then either the program releases it (every
    warp ends, every record accounted for) or it is killed while waiting (the recording still
    ends cleanly, its last state the waiting one)."""
    import signal
    import subprocess

    from iket_tui.demo import kernels as demo
    from iket_tui.sources.reading import read_recording

    name = "stuck-killed" if kill else "stuck"
    record = os.path.join(out, f"{name}.msgpack")
    launched = os.path.join(out, f"{name}.launched")
    program = [
        sys.executable,
        os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_stuck_program.py"),
        "--wait",
        str(600 if kill else hold_s),
        "--launched",
        launched,
    ]
    command = [sys.executable, "-m", "iket_tui", "run", "--kernels", "--no-ui", "--record", record, "--", *program]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_agent_env(out))
    t0 = time.monotonic()
    while not os.path.exists(launched):
        if proc.poll() is not None or time.monotonic() - t0 > 240:
            proc.kill()
            output = proc.communicate()[0] or ""
            return [Row(f"{name}: program launched its kernel", False, output[-300:].replace("\n", " | "), "launched")]
        time.sleep(0.1)
    time.sleep(3.0)
    during = _recorded_warps(read_recording(Path(record)))
    if kill:
        with open(launched) as file:
            os.kill(int(file.read().strip()), signal.SIGKILL)
    try:
        output = proc.communicate(timeout=180)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        output = proc.communicate()[0]
    messages, info = read_recording(Path(record))
    after = _recorded_warps((messages, info))
    stuck = [key for key, state in during.warps.items() if key[0] == demo.WAITING_BLOCK]
    stuck_ok = (
        len(stuck) == 4
        and all(during.warps[key][0] == "wait" and not during.warps[key][1] for key in stuck)
        and sum(ended for _, ended in during.warps.values()) == 4 * (demo.WAITING_BLOCKS - 1)
    )
    rows = [
        Row(
            f"{name}: while waiting, the recording holds the block's last events and no end",
            stuck_ok,
            f"{len(stuck)} warps of block {demo.WAITING_BLOCK} last at "
            f"{sorted({during.warps[k][0] for k in stuck})}, {sum(e for _, e in during.warps.values())} of "
            f"{len(during.warps)} warps ended",
            "4 warps last at wait, 252 ended",
        )
    ]
    counters = after.counters
    if kill:
        still = [key for key, state in after.warps.items() if not state[1]]
        rows.append(
            Row(
                f"{name}: killed while waiting, the recording ends cleanly with the waiting state",
                info.ended and info.cut_at is None and sorted(still) == sorted(stuck),
                f"ended {info.ended}, cut {info.cut_at}, warps not ended {sorted(still)}, exit {proc.returncode}",
                "ended, the 4 waiting warps not ended",
            )
        )
    else:
        expected = sum(waiting_expected(block) * 4 for block in range(demo.WAITING_BLOCKS))
        rows.append(
            Row(
                f"{name}: released, every warp ends and every record is accounted for",
                info.ended
                and proc.returncode == 0
                and all(state[1] for state in after.warps.values())
                and after.events == expected
                and counters is not None
                and counters.balanced
                and counters.events_lost == 0
                and counters.events_read == expected,
                f"{after.events} events, {len(after.warps)} warps, counters {counters}, exit {proc.returncode}",
                f"{expected} events, lost 0",
            )
        )
    if not all(row.ok for row in rows):
        print(output[-3000:], flush=True)
    return rows


@dataclass
class RecordedWarps:
    warps: dict[tuple[int, int], tuple[str, bool]]
    """(block, warp) -> (name of its last event, whether it ended)."""
    events: int
    counters: Any


def _recorded_warps(read: tuple[list[Any], Any]) -> RecordedWarps:
    """What a recording says of the waiting kernel's warps."""
    from iket_tui.ring.wire import module_from_message, records_from_message

    messages, _ = read
    tables = EventTables()
    module = None
    for msg in messages:
        if msg.get("type") == "kernel_module":
            table = module_from_message(msg)
            tables.add(table)
            if table.kernels and table.kernels[0].startswith("waiting"):
                module = table
    batches = [records_from_message(msg) for msg in messages if msg.get("type") == "kernel_records"]
    if module is None or not batches:
        return RecordedWarps({}, 0, batches[-1].counters if batches else None)
    events = np.concatenate([batch_decode(b, tables) for b in batches])
    events = events[events["module"] == module.module]
    names = {e.event_id: e.name for e in module.events} | {module.range_end_id: "(end)", 0: "(begin)"}
    warps = {}
    for key, rows in _warps(events).items():
        real = rows[(rows["kind"] & EVENT_WARP_ROW) == 0]
        last = names.get(int(real["event"][-1]), "?") if len(real) else "(none)"
        warps[key] = (last, bool((rows["kind"] & EVENT_WARP_END).any()))
    real_events = int(((events["kind"] & EVENT_WARP_ROW) == 0).sum())
    return RecordedWarps(warps, real_events, batches[-1].counters)


def batch_decode(records: Any, tables: EventTables) -> np.ndarray[Any, Any]:
    from iket_tui.ring.decode import decode

    return decode(records.chunks, tables, records.layout, records.warp_slots)


# ---- main -----------------------------------------------------------------------------------------


def _require_gpu() -> int:
    """The number of SMs, or a clear exit where there is no GPU to run on."""
    problems = []
    try:
        import torch

        if not torch.cuda.is_available():
            problems.append("torch sees no CUDA device")
    except ImportError:
        problems.append("torch is not installed")
    try:
        import cupy

        sms = int(cupy.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"])
    except Exception as exc:
        problems.append(f"CuPy cannot reach a CUDA device ({type(exc).__name__}: {exc})")
        sms = 0
    try:
        import tilelang  # noqa: F401
    except ImportError:
        problems.append("TileLang is not installed")
    if problems:
        print("gpu_ring_check: needs an NVIDIA GPU, CuPy, torch and TileLang: " + "; ".join(problems), file=sys.stderr)
        raise SystemExit(2)
    return sms


def print_row(row: Row) -> None:
    print(f"  {'ok  ' if row.ok else 'FAIL'} {row.check}: {row.measured} (expected {row.expected or '-'})", flush=True)


def _timed(name: str, run: Callable[[], list[Row]], rows: list[Row]) -> None:
    t0 = time.monotonic()
    try:
        found = run()
        for row in found:
            print_row(row)
        rows += found
    except Hung:
        raise
    except Exception as exc:
        rows.append(
            Row(name, False, f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}", "runs")
        )
        import traceback

        traceback.print_exc()
    print(f"[{name}: {time.monotonic() - t0:.1f} s]", flush=True)


def report(rows: list[Row], figures: dict[str, Any], name: str = "gpu_ring_check") -> int:
    """Print the table, write ``$OUT/<name>.json``; the exit status."""
    import torch

    width = max((len(row.check) for row in rows), default=5)
    print(f"\n| {'check'.ljust(width)} | ok | measured | expected |")
    print(f"|{'-' * (width + 2)}|----|---|---|")
    for row in rows:
        print(f"| {row.check.ljust(width)} | {'ok' if row.ok else 'FAIL'} | {row.measured} | {row.expected} |")
    failed = [row.check for row in rows if not row.ok]
    print(f"\n{len(rows) - len(failed)} passed, {len(failed)} failed", flush=True)
    out = os.environ.get("OUT")
    if out:
        result = {"rows": [row.__dict__ for row in rows], "figures": figures, "gpu": torch.cuda.get_device_name(0)}
        with open(os.path.join(out, f"{name}.json"), "w") as file:
            json.dump(result, file, indent=2)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu_ring_check", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="overhead: rounds of interleaved launches")
    parser.add_argument("--launches", type=int, default=20, help="overhead: launches per variant per round")
    parser.add_argument("--live-seconds", type=float, default=2.0, help="liveness kernel duration, roughly")
    parser.add_argument("--hold-seconds", type=float, default=3.0, help="how long the waiting block waits")
    parser.add_argument("--gemm-sizes", default=str(GEMM_SIZE), help="overhead: GEMM sizes, comma-separated")
    parser.add_argument("--overhead-only", action="store_true", help="skip correctness, loss, liveness and the rest")
    parser.add_argument("--no-agent", action="store_true", help="skip the checks through iket-tui run")
    args = parser.parse_args(argv)
    sms = _require_gpu()
    import torch

    print(f"GPU: {torch.cuda.get_device_name(0)}, {sms} SMs; torch {torch.__version__}", flush=True)
    rows: list[Row] = []
    figures: dict[str, float] = {}
    big = GpuRing(agent_geometry())
    small = GpuRing(lapping_geometry(LAPPING_BLOCKS_PER_SM * sms * THREADS // 32))
    figures["clock_offset_known"] = float(big.device.clock_offset_ns is not None)
    try:
        if not args.overhead_only:
            _checks(args, big, small, sms, rows)
        for size in (int(x) for x in args.gemm_sizes.split(",")):

            def overhead(size: int = size) -> list[Row]:
                found, measured = check_overhead(big, args.rounds, args.launches, size)
                figures.update(measured)
                return found

            _timed(f"overhead {size}", overhead, rows)
        if not args.overhead_only and not args.no_agent:
            out = os.environ.get("OUT") or "."
            _timed("stuck under the agent", lambda: check_stuck_under_agent(out, kill=False), rows)
            _timed("stuck and killed under the agent", lambda: check_stuck_under_agent(out, kill=True), rows)
    except Hung as exc:
        rows.append(Row("a kernel hung", False, str(exc), "every kernel finishes"))
        status = report(rows, figures)
        os._exit(3 if status == 0 else status)  # a hung context cannot be torn down
    return report(rows, figures)


def _checks(args: argparse.Namespace, big: GpuRing, small: GpuRing, sms: int, rows: list[Row]) -> None:
    """Correctness, loss, liveness, a waiting block and the host drain rate."""
    _timed(
        "correctness",
        lambda: check_known_count(big, blocks=4 * sms, steps=40, label="big ring", expect_loss=False),
        rows,
    )
    _timed(
        "loss",
        lambda: check_known_count(
            small, blocks=LAPPING_BLOCKS_PER_SM * sms, steps=800, label="lapping ring", expect_loss=True
        ),
        rows,
    )
    inner = max(1000, int(args.live_seconds * 2e9 / 4 / 2000))
    _timed("liveness", lambda: check_liveness(big, blocks=sms, outer=2000, inner=inner), rows)
    _timed("waiting block", lambda: check_waiting_block(big, args.hold_seconds), rows)
    _timed("drain rate", check_drain_rate, rows)


if __name__ == "__main__":
    sys.exit(main())
