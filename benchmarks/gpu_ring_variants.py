# mypy: disable-error-code="no-untyped-call"
"""Where the kernel ring's overhead goes: the H200 GEMM of ``gpu_ring_check.py`` under variants of
the device runtime, all compiled into one process and timed interleaved against the plain GEMM.

Each variant edits the runtime's CUDA text (``iket_tui/ring/device_runtime.cuh``) and compiles
the GEMM with the edited copy, on a ring of its own with the agent's default number of regions.
Most are for measuring only: they break the ring contract (a variant that stores nothing cannot
be drained, one that never wraps overruns a region its warp writes more than, one that stores 8
bytes has no stamps). What the event path does, variant by variant (``docs/ring.md`` says what
each cost):

- ``off32``: the runtime as it is: a timer read and one 16-byte store per event at
  ``slab + off``, ``off`` a 32-bit byte offset moved on by 16 and wrapped by a mask, the id
  merged into the timer's low word, the stamp counted up by one; on the agent's default ring;
  ``off32_16``, the same on a ring of 256 records per region;
- ``floor16``: the floor: the same 16-byte stamped record at a register-held 64-bit pointer that
  only ever moves on by 16 (no wrap: a warp of the k-step GEMM writes 512 records a block, which
  the default region holds); ``floor8``: the same with 8 bytes (time and id), no stamp stored;
- ``nostore``: every store predicated off (the event path's timer read and arithmetic alone);
- ``shared``: the timer read not volatile at all, so that ptxas may merge the reads of events
  with nothing between them (and hoist one out of a loop where no store intervenes);
- ``clobber``: the timer read and the store each with a ``"memory"`` clobber (a compiler
  barrier); ``cs``: the store with the streaming cache hint; ``clock``: ``%clock64`` read where
  the runtime reads ``%globaltimer``;
- what a warp does when it begins: ``stripes8``, warps claiming from eight counters, one per
  eighth of the SMs (the runtime claims from one); ``noclaim``, no claim at all, a warp writing
  into the region of its hardware warp slot (ring version 2's footprint: a few regions an SM,
  reused by every block, where the runtime gives every warp of every block a region of its own);
  ``blockmap``, no claim either, but a region of its own for every warp of every block of a
  launch, found from the block, the warp and the launch's ``%gridid`` (the runtime's footprint
  without its atomic);
- ``ptr64``: the runtime with a 64-bit cursor wrapped by a mask and an OR with its region's base
  (the base rounded down to the region's size: for timing only, it may overlap a neighbour).

Needs what ``gpu_ring_check.py`` needs; on the device machine:

    PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 python3 benchmarks/gpu_ring_variants.py [--only off32,floor16]

With ``$OUT`` set it also writes ``$OUT/gpu_ring_variants.json``. A kernel that does not finish
in 30 s ends the run with what was measured so far. Without a GPU, ``--emit DIR`` writes every
variant's generated CUDA (for a ring at a made-up address) into ``DIR`` for nvcc to check.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import statistics
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from benchmarks import gpu_ring_check as gpu
from iket_tui.agent.kernel_options import DEFAULT_RING_CHUNKS, KernelOptions
from iket_tui.ring.device import RingTarget, runtime_cuh
from iket_tui.ring.layout import RingGeometry
from iket_tui.ring.runtime import DeviceRuntime, installed

_STORE = 'asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(address)'
_STORE_END = '"r"(stamp));'
_NEVER_STORE = (
    'asm volatile("{\\n\\t.reg .pred q;\\n\\tsetp.eq.u64 q, %0, 0;\\n\\t'
    '@q st.global.v4.u32 [%0], {%1, %2, %3, %4};\\n\\t}" ::"l"(address)'
)  # never: no record lies at address 0
_TIMER = '"mov.u64 %0, %%globaltimer;" : "=l"(t));'
_TIMER_ASM = 'asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));'
_MEMBERS = "  unsigned claim;"
_SLAB = "    slab = kRecords + (unsigned long long)region * kRegionBytes;\n"
_EVENT_STORE = (
    "    store_record(slab + off, ((unsigned)now & ~kIdMask) | id, (unsigned)(now >> 32), PAYLOAD ? payload : 0u, "
    "stamp);\n    off = (off + 16u) & kOffsetMask;\n"
)
_CURSOR = [(_MEMBERS, "  unsigned long long cursor;\n" + _MEMBERS), (_SLAB, _SLAB + "    cursor = slab;\n")]
"""A 64-bit pointer member, the region's first record when the warp begins."""

EDITS: dict[str, list[tuple[str, str]]] = {
    "cs": [(_STORE, _STORE.replace("st.global.v4", "st.global.cs.v4"))],
    "clobber": [(_STORE_END, '"r"(stamp)\n               : "memory");'), (_TIMER, _TIMER[:-2] + ' :: "memory");')],
    "nostore": [(_STORE, _NEVER_STORE)],
    "clock": [(_TIMER, _TIMER.replace("%%globaltimer", "%%clock64"))],
    "stripes8": [
        ("const unsigned stripe = sm & (kStripes - 1u);", "const unsigned stripe = sm & 7u;"),
        ("kClaims + 8ull * stripe) * kStripes + stripe;", "kClaims + 8ull * stripe) * 8u + stripe;"),
    ],
    "ptr64": [
        (_MEMBERS, "  unsigned long long cursor;\n  unsigned long long base;\n" + _MEMBERS),
        (_SLAB, _SLAB + "    base = slab & ~(unsigned long long)kOffsetMask;\n    cursor = base;\n"),
        (
            _EVENT_STORE,
            "    store_record(cursor, ((unsigned)now & ~kIdMask) | id, (unsigned)(now >> 32), PAYLOAD ? payload : 0u, "
            "stamp);\n    cursor = base | ((cursor + 16ull) & (unsigned long long)kOffsetMask);\n",
        ),
    ],
    "blockmap": [
        (
            "claim_region(leader, mask, kClaims + 8ull * stripe) * kStripes + stripe;",
            "(unsigned long long)((blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)) * "
            "((blockDim.x * blockDim.y * blockDim.z + 31u) >> 5) + "
            "((threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) >> 5) + "
            "(unsigned)special_gridid() * 8192u);",
        )
    ],
    "noclaim": [
        (
            "claim_region(leader, mask, kClaims + 8ull * stripe) * kStripes + stripe;",
            "(unsigned long long)(sm * 64u + (special_warpid() & 63u));",
        )
    ],
    "shared": [(_TIMER_ASM, _TIMER_ASM.replace("asm volatile(", "asm("))],
    "floor16": [
        *_CURSOR,
        (
            _EVENT_STORE,
            "    store_record(cursor, ((unsigned)now & ~kIdMask) | id, (unsigned)(now >> 32), PAYLOAD ? payload : 0u, "
            "stamp);\n    cursor += 16ull;\n",
        ),
    ],
    "floor8": [
        *_CURSOR,
        (
            _EVENT_STORE,
            '    asm volatile("st.global.v2.u32 [%0], {%1, %2};" ::"l"(cursor), "r"(((unsigned)now & ~kIdMask) | id),\n'
            '                 "r"((unsigned)(now >> 32)));\n    cursor += 8ull;\n',
        ),
    ],
}

VARIANTS: list[tuple[str, list[str], tuple[str, ...], int]] = [
    # name, edits, GEMM variants, 256-byte chunks per region (the ring's size: 16 records each)
    ("off32", [], ("ksteps", "block"), DEFAULT_RING_CHUNKS),
    ("off32_16", [], ("ksteps",), 16),
    ("floor16", ["floor16"], ("ksteps",), DEFAULT_RING_CHUNKS),
    ("floor8", ["floor8"], ("ksteps",), DEFAULT_RING_CHUNKS),
    ("nostore", ["nostore"], ("ksteps",), DEFAULT_RING_CHUNKS),
    ("shared", ["shared"], ("ksteps",), DEFAULT_RING_CHUNKS),
    ("clobber", ["clobber"], ("ksteps",), DEFAULT_RING_CHUNKS),
    ("cs", ["cs"], ("ksteps",), DEFAULT_RING_CHUNKS),
    ("clock", ["clock"], ("ksteps",), DEFAULT_RING_CHUNKS),
    ("stripes8", ["stripes8"], ("ksteps", "block"), DEFAULT_RING_CHUNKS),
    ("blockmap", ["blockmap"], ("ksteps", "block"), DEFAULT_RING_CHUNKS),
    ("ptr64", ["ptr64"], ("ksteps",), DEFAULT_RING_CHUNKS),
    ("noclaim", ["noclaim"], ("ksteps", "block"), DEFAULT_RING_CHUNKS),
]


def geometry(chunks: int) -> RingGeometry:
    """The agent's default number of regions, of ``chunks`` 256-byte units each."""
    return RingGeometry(KernelOptions().regions, 16 * chunks)


def edited(names: list[str]) -> str:
    """The runtime's CUDA text with the named edits; each must apply exactly once."""
    source = runtime_cuh()
    for name in names:
        for old, new in EDITS[name]:
            if source.count(old) != 1:
                raise SystemExit(f"gpu_ring_variants: edit {name!r} no longer applies to the runtime")
            source = source.replace(old, new)
    return source


def _chosen(only: set[str] | None) -> list[tuple[str, list[str], tuple[str, ...], int]]:
    if only is not None and (unknown := only - {name for name, *_ in VARIANTS}):
        raise SystemExit(f"gpu_ring_variants: no variant {', '.join(sorted(unknown))}")
    return [v for v in VARIANTS if only is None or v[0] in only]


class _PerThread:
    """TileLang's CUDA callback for compiles on several threads: each thread's runtime."""

    def __init__(self) -> None:
        self.local = threading.local()

    def postprocess(self, code: str, target: Any = None) -> str:
        runtime: DeviceRuntime = self.local.runtime
        return runtime.postprocess(code, target)


def compile_variants(only: set[str] | None) -> tuple[dict[str, Any], dict[str, gpu.GpuRing]]:
    """Every chosen kernel, each compiled with its variant's runtime for a ring of its own."""
    from tilelang.tools.cuda import iket

    rings: dict[str, gpu.GpuRing] = {"plain": gpu.GpuRing(geometry(DEFAULT_RING_CHUNKS))}
    jobs: list[tuple[str, gpu.GpuRing, Any]] = [("plain", rings["plain"], gpu.gemm_kernel("plain"))]
    for name, edits, shapes, chunks in _chosen(only):
        ring = gpu.GpuRing(geometry(chunks), cuda_runtime=edited(edits))
        rings[name] = ring
        for shape in shapes:
            iket.reset()
            jobs.append((f"{name}/{shape}", ring, gpu.gemm_kernel(shape)))
    return compile_all([(key, ring.runtime, func) for key, ring, func in jobs]), rings


def compile_all(jobs: list[tuple[str, DeviceRuntime, Any]]) -> dict[str, Any]:
    """``tilelang.compile`` of each (key, runtime, function), on as many threads as there are
    jobs (TileLang's own ``par_compile`` does the same), each with its own runtime as the CUDA
    callback."""
    import tilelang

    tilelang.disable_cache()
    dispatch = _PerThread()

    def build(job: tuple[str, DeviceRuntime, Any]) -> Any:
        dispatch.local.runtime = job[1]
        return tilelang.compile(job[2], target=dict(gpu.TARGET))

    workers = min(len(jobs), os.cpu_count() or 1)
    with installed(dispatch), concurrent.futures.ThreadPoolExecutor(workers) as pool:  # type: ignore[arg-type]
        return dict(zip((key for key, *_ in jobs), pool.map(build, jobs), strict=True))


def emit(directory: Path, only: set[str] | None) -> int:
    """Write each chosen variant's generated CUDA of the k-step GEMM (no GPU: a made-up ring)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, edits, _, chunks in _chosen(only):
        target = RingTarget(0x7F0000000000, geometry(chunks), ring_id=77)
        runtime = DeviceRuntime(target, cuda_runtime=edited(edits))
        (directory / f"{name}.cu").write_text(gpu.lower_kernel(runtime, gpu.gemm_kernel("ksteps")))
    return 0


def measure(
    kernels: dict[str, Any], rings: dict[str, gpu.GpuRing], rounds: int, launches: int
) -> tuple[dict[str, dict[str, float]], dict[str, float], bool]:
    """Each kernel against the plain GEMM over ``rounds`` rounds (rotating order) of ``launches``
    launches, every ring drained meanwhile: the median over rounds of the ratio of the round's
    medians, the lowest and highest of those ratios, and the ratio of the fastest launches; the
    plain GEMM's median and fastest launch in µs; and whether a kernel hung. (Each batch waits
    behind a spin on the GPU while the host queues it: ``gpu_ring_check.timed_launches``.)"""
    import torch

    size = gpu.GEMM_SIZE
    a = torch.randn(size, size, dtype=torch.float16, device="cuda")
    b = torch.randn(size, size, dtype=torch.float16, device="cuda")
    c = torch.empty(size, size, dtype=torch.float16, device="cuda")
    reference = a.float() @ b.float()
    per_round: dict[str, list[float]] = {key: [] for key in kernels}
    fastest: dict[str, float] = {}
    order = list(kernels.items())
    hung = False
    try:
        for key, kernel in order:
            kernel(a, b, c)
            gpu.finish(key)
            error = float((c.float() - reference).abs().max() / reference.abs().max())
            if error > 1e-2:
                raise SystemExit(f"gpu_ring_variants: {key} computed a wrong product (max rel err {error:.1e})")
        with ExitStack() as stack:
            for ring in rings.values():
                stack.enter_context(gpu.draining(ring, keep=False))
            for round_ in range(rounds):
                shift = round_ % len(order)
                for key, kernel in order[shift:] + order[:shift]:
                    times = gpu.timed_launches(kernel, (a, b, c), launches, key)
                    per_round[key].append(statistics.median(times))
                    fastest[key] = min(fastest.get(key, float("inf")), *times)
    except gpu.Hung as exc:
        print(f"  {exc}: the figures below are from the rounds before", flush=True)
        hung = True
    plain = per_round["plain"]
    figures: dict[str, dict[str, float]] = {}
    for key, medians in per_round.items():
        ratios = [m / p for m, p in zip(medians, plain, strict=False)]
        if key != "plain" and ratios:
            figures[key] = {
                "ratio": statistics.median(ratios),
                "low": min(ratios),
                "high": max(ratios),
                "fastest": fastest[key] / fastest["plain"],
            }
    baseline = {"median_us": statistics.median(plain) * 1000, "fastest_us": fastest["plain"] * 1000} if plain else {}
    return figures, baseline, hung


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu_ring_variants", description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="variants to measure, comma-separated (default: all)")
    parser.add_argument("--rounds", type=int, default=24)
    parser.add_argument("--launches", type=int, default=20)
    parser.add_argument("--emit", type=Path, metavar="DIR", help="write each variant's CUDA into DIR (no GPU)")
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    if args.emit is not None:
        return emit(args.emit, only)
    gpu._require_gpu()
    t0 = time.monotonic()
    kernels, rings = compile_variants(only)
    print(f"  compiled {len(kernels)} kernels in {time.monotonic() - t0:.0f} s", flush=True)
    figures, baseline, hung = measure(kernels, rings, args.rounds, args.launches)
    if figures:
        print(
            f"\nplain GEMM {gpu.GEMM_SIZE}: median {baseline['median_us']:.1f} us, "
            f"fastest {baseline['fastest_us']:.1f} us; {args.rounds} rounds of {args.launches}"
        )
        print("| variant | GEMM | time / plain | lowest, highest round | fastest / fastest |\n|---|---|---|---|---|")
    for key, figure in figures.items():
        name, shape = key.split("/")
        print(
            f"| {name} | {shape} | {figure['ratio']:.3f} | {figure['low']:.3f}, {figure['high']:.3f} "
            f"| {figure['fastest']:.3f} |"
        )
    for name, ring in rings.items():
        counters = ring.drain.counters
        if counters.chunks_written:
            print(f"  {name}: read {counters.events_read}, lost {counters.events_lost}, torn {counters.torn}")
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "gpu_ring_variants.json"), "w") as f:
            json.dump({"plain": baseline, "rounds": args.rounds, "launches": args.launches, **figures}, f, indent=1)
    if hung:
        sys.stdout.flush()
        os._exit(3)  # a context with a hung kernel cannot be torn down
    return 0


if __name__ == "__main__":
    sys.exit(main())
