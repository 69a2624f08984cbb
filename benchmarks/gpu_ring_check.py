# mypy: disable-error-code="valid-type, untyped-decorator, no-untyped-call"
"""The kernel event ring on a real GPU: correctness, loss accounting, liveness, overhead, drain.

Needs an NVIDIA GPU with host-mapped memory (run on the H200), CuPy, torch and TileLang:

    PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 python3 benchmarks/gpu_ring_check.py [--fences acq_rel,sc]

It allocates the ring with ``cudaHostAlloc(..., cudaHostAllocMapped)`` (under UVA the host
pointer is the device pointer), compiles TileLang kernels with the iket-tui runtime through
TileLang's CUDA post-processing callback, launches them on torch tensors, drains the ring and
prints one table; with ``$OUT`` set it also writes ``$OUT/gpu_ring_check.json``.

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
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from iket_tui.ring.buffer import RingView, memory_at
from iket_tui.ring.counters import DrainBatch
from iket_tui.ring.decode import EventTables
from iket_tui.ring.device import RingTarget
from iket_tui.ring.drain import RingDrain
from iket_tui.ring.layout import (
    DEFAULT_LAYOUT,
    DEVICE_MIN_CHUNKS,
    EVENT_DTYPE,
    KIND_END,
    KIND_MARK,
    KIND_MASK,
    KIND_START,
    ChunkLayout,
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


# ---- the ring in host-mapped memory ---------------------------------------------------------------


class HostRing:
    """A ring in ``cudaHostAlloc(..., cudaHostAllocMapped)`` memory, with its drain.

    With ``memory="device"`` the same ring lives in device memory instead (``cudaMalloc``): the
    host cannot drain it while kernels run, so it only measures what the kernels pay when their
    chunks need not cross PCIe (the cost of staging in device memory before a DMA copy).
    ``cuda_runtime`` replaces the runtime's CUDA text (``gpu_ring_variants.py`` measures edited copies)."""

    def __init__(
        self, geometry: RingGeometry, fence: str = "acq_rel", memory: str = "host", cuda_runtime: str | None = None
    ) -> None:
        import cupy

        self._cupy = cupy
        self.memory = memory
        runtime = cupy.cuda.runtime
        if memory == "device":
            self._host = np.zeros(geometry.total_bytes, dtype=np.uint8)
            self.view = RingView.format(self._host, geometry)
            self.address = int(runtime.malloc(geometry.total_bytes))
            runtime.memcpy(self.address, self._host.ctypes.data, geometry.total_bytes, runtime.memcpyHostToDevice)
        else:
            self.address = int(runtime.hostAlloc(geometry.total_bytes, runtime.hostAllocMapped))
            self.view = RingView.format(memory_at(self.address, geometry.total_bytes), geometry)
        self.target = RingTarget(self.address, geometry, self.view.ring_id, fence=fence)
        self.tables = EventTables()
        self.runtime = DeviceRuntime(self.target, on_module=self.tables.add, cuda_runtime=cuda_runtime)
        self.drain = RingDrain(self.view)

    def free(self) -> None:
        if self.memory == "device":
            self._cupy.cuda.runtime.free(self.address)
        else:
            self._cupy.cuda.runtime.freeHost(self.address)


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

    def events(self, tables: EventTables) -> np.ndarray[Any, Any]:
        parts = [batch.decode(tables) for _, batch in self.batches]
        return np.concatenate(parts) if parts else np.empty(0, dtype=EVENT_DTYPE)


@contextmanager
def draining(ring: HostRing, keep: bool = True) -> Iterator[Collected]:
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


def check_known_count(ring: HostRing, blocks: int, steps: int, label: str, expect_loss: bool) -> list[Row]:
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
    if expect_loss:
        rows.append(Row(f"{label}: loss counted", counters.events_lost > 0, str(counters.events_lost), "> 0"))
        return rows
    rows.append(Row(f"{label}: received", len(events) == expected, str(len(events)), str(expected)))
    rows.append(Row(f"{label}: lost", counters.events_lost == 0, str(counters.events_lost), "0"))
    rows.extend(_check_known_events(events, blocks, steps, label))
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


def check_liveness(ring: HostRing, blocks: int, outer: int, inner: int) -> list[Row]:
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


def check_overhead(ring: HostRing, rounds: int, launches: int, size: int) -> tuple[list[Row], dict[str, float]]:
    """Median time of the traced GEMMs against the plain one, launches interleaved."""
    import torch

    kernels = {}
    for variant in GEMM_VARIANTS:
        t0 = time.monotonic()
        kernels[variant] = compile_kernel(ring.runtime, gemm_kernel(variant, size))
        print(f"  compiled GEMM {variant} ({ring.target.fence} fence) in {time.monotonic() - t0:.1f} s", flush=True)
    a = torch.randn(size, size, dtype=torch.float16, device="cuda")
    b = torch.randn(size, size, dtype=torch.float16, device="cuda")
    reference = a.float() @ b.float()
    rows: list[Row] = []
    outputs = {}
    for variant, kernel in kernels.items():
        c = torch.empty(size, size, dtype=torch.float16, device="cuda")
        kernel(a, b, c)
        seconds = finish(f"GEMM {variant} ({ring.target.fence} fence)")
        error = float((c.float() - reference).abs().max() / reference.abs().max())
        rows.append(
            Row(
                f"GEMM {size} {variant}: result",
                error < 1e-2,
                f"max rel err {error:.1e}, first in {seconds * 1e3:.1f} ms",
                "< 1e-2",
            )
        )
        print(f"  GEMM {variant} ran in {seconds * 1e3:.1f} ms", flush=True)
        outputs[variant] = c
    times: dict[str, list[float]] = {variant: [] for variant in GEMM_VARIANTS}
    read_before = ring.drain.counters.events_read
    with draining(ring, keep=False) if ring.memory == "host" else nullcontext():
        t0 = time.monotonic()
        for _ in range(rounds):
            for variant, kernel in kernels.items():
                times[variant] += timed_launches(kernel, (a, b, outputs[variant]), launches, f"timed GEMM {variant}")
        elapsed = time.monotonic() - t0
    medians = {variant: statistics.median(values) for variant, values in times.items()}
    drained = ring.drain.counters.events_read - read_before
    ratio_steps = medians["ksteps"] / medians["plain"]
    ratio_block = medians["block"] / medians["plain"]
    tflops = 2 * size**3 / (medians["plain"] * 1e-3) / 1e12
    fence = ring.target.fence
    if ring.target.geometry.layout.chunk_bytes != DEFAULT_LAYOUT.chunk_bytes:
        fence = f"{fence}, {ring.target.geometry.layout.chunk_bytes}-byte chunks"
    if ring.memory != "host":
        fence = f"{fence}, ring in {ring.memory} memory"
    rows += [
        Row(f"GEMM {size} plain", True, f"{medians['plain'] * 1000:.1f} us ({tflops:.0f} TFLOP/s)", ""),
        Row(
            f"overhead {size}, {fence} fence: ranges every k-step", ratio_steps <= 1.05, f"{ratio_steps:.3f}", "<= 1.05"
        ),
        Row(
            f"overhead {size}, {fence} fence: one range per block", ratio_block <= 1.01, f"{ratio_block:.3f}", "<= 1.01"
        ),
    ]
    if ring.memory == "host":
        rows += [
            Row("drain during GEMMs", True, f"{drained / elapsed / 1e6:.1f} M events/s read", ""),
            Row(
                "counters during GEMMs",
                ring.drain.counters.balanced and ring.drain.counters.torn == 0,
                f"lost {ring.drain.counters.events_lost}, torn {ring.drain.counters.torn}",
                "balanced, torn 0",
            ),
        ]
    key = fence.replace(", ring in ", "_").replace(" memory", "").replace(", ", "_").replace("-byte chunks", "B")
    figures = {f"gemm{size}_{key}_{k}_us": v * 1000 for k, v in medians.items()}
    figures |= {f"ratio{size}_{key}_ksteps": ratio_steps, f"ratio{size}_{key}_block": ratio_block}
    return rows, figures


def timed_launches(kernel: Any, args: tuple[Any, ...], launches: int, what: str) -> list[float]:
    """Milliseconds of each of ``launches`` back-to-back launches, from CUDA events."""
    import torch

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(launches)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(launches)]
    for start, end in zip(starts, ends, strict=True):
        start.record()
        kernel(*args)
        end.record()
    finish(what)
    return [start.elapsed_time(end) for start, end in zip(starts, ends, strict=True)]


def check_drain_rate() -> list[Row]:
    from benchmarks.ring_drain import measure

    result = measure()
    return [
        Row(
            "host drain rate (one core)",
            result["drain_events_per_s"] >= 200e6,
            f"{result['drain_events_per_s'] / 1e6:.0f} M/s",
            ">= 200 M/s",
        ),
        Row("host drain + decode rate", True, f"{result['drain_decode_events_per_s'] / 1e6:.0f} M/s", ""),
    ]


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


def report(rows: list[Row], figures: dict[str, float]) -> int:
    """Print the table, write ``$OUT/gpu_ring_check.json``; the exit status."""
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
        with open(os.path.join(out, "gpu_ring_check.json"), "w") as file:
            json.dump(result, file, indent=2)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu_ring_check", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="overhead: rounds of interleaved launches")
    parser.add_argument("--launches", type=int, default=20, help="overhead: launches per variant per round")
    parser.add_argument("--live-seconds", type=float, default=2.0, help="liveness kernel duration, roughly")
    parser.add_argument(
        "--fences", default="acq_rel,sc", help="overhead: fences to compare, comma-separated (sc, acq_rel, none)"
    )
    parser.add_argument("--gemm-sizes", default=str(GEMM_SIZE), help="overhead: GEMM sizes, comma-separated")
    parser.add_argument(
        "--chunk-bytes", default="256", help="overhead: chunk sizes to compare, comma-separated (128, 256, 512)"
    )
    parser.add_argument(
        "--memory", default="host", help="overhead: where the ring lives, comma-separated (host, device)"
    )
    parser.add_argument("--overhead-only", action="store_true", help="skip correctness, loss, liveness and drain")
    args = parser.parse_args(argv)
    sms = _require_gpu()
    import torch

    print(f"GPU: {torch.cuda.get_device_name(0)}, {sms} SMs; torch {torch.__version__}", flush=True)
    rows: list[Row] = []
    figures: dict[str, float] = {}
    rings = [HostRing(RingGeometry.for_sms(sms, 64)), HostRing(RingGeometry.for_sms(sms, DEVICE_MIN_CHUNKS))]
    big, small = rings
    try:
        if not args.overhead_only:
            _checks(args, big, small, sms, rows)
        setups = [
            (memory, fence, int(chunk_bytes))
            for memory in args.memory.split(",")
            for fence in args.fences.split(",")
            for chunk_bytes in args.chunk_bytes.split(",")
        ]
        for memory, fence, chunk_bytes in setups:
            layout = ChunkLayout(chunk_bytes // 128)
            if memory == "host" and fence == big.target.fence and layout == DEFAULT_LAYOUT:
                ring = big
            else:
                ring = HostRing(RingGeometry.for_sms(sms, 64, layout), fence=fence, memory=memory)
                rings.append(ring)
            for size in (int(x) for x in args.gemm_sizes.split(",")):

                def overhead(ring: HostRing = ring, size: int = size) -> list[Row]:
                    found, measured = check_overhead(ring, args.rounds, args.launches, size)
                    figures.update(measured)
                    return found

                what = f"overhead {size}, {fence} fence, {chunk_bytes}-byte chunks, ring in {memory} memory"
                _timed(what, overhead, rows)
    except Hung as exc:
        rows.append(Row("a kernel hung", False, str(exc), "every kernel finishes"))
        status = report(rows, figures)
        os._exit(3 if status == 0 else status)  # a hung context cannot be torn down
    for ring in rings:
        ring.free()
    return report(rows, figures)


def _checks(args: argparse.Namespace, big: HostRing, small: HostRing, sms: int, rows: list[Row]) -> None:
    """Correctness, loss, liveness and the host drain rate."""
    _timed(
        "correctness",
        lambda: check_known_count(big, blocks=4 * sms, steps=40, label="big ring", expect_loss=False),
        rows,
    )
    _timed(
        "loss",
        lambda: check_known_count(small, blocks=16 * sms, steps=800, label="tiny ring", expect_loss=True),
        rows,
    )
    inner = max(1000, int(args.live_seconds * 2e9 / 4 / 2000))
    _timed("liveness", lambda: check_liveness(big, blocks=sms, outer=2000, inner=inner), rows)
    _timed("drain rate", check_drain_rate, rows)


if __name__ == "__main__":
    sys.exit(main())
