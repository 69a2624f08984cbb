# mypy: disable-error-code="no-untyped-call"
"""Where the kernel ring's overhead goes: the H200 GEMM of ``gpu_ring_check.py`` under variants of
the device runtime, all compiled into one process and timed interleaved against the plain GEMM.

Each variant edits the runtime's CUDA text (``iket_tui/ring/device_runtime.cuh``) and compiles
the GEMM with the edited copy (for measuring only: a variant that stores nothing cannot be
drained):

- ``v4``: the runtime as it is (a timer read and one 16-byte store per event, neither a
  compiler barrier);
- ``clobber``: the timer read and the store each with a ``"memory"`` clobber (a compiler
  barrier: the kernel's own loads and stores may not move across an event), as first written;
- ``cs``: the store with the streaming cache hint (``st.global.cs``, evict first);
- ``nostore``: every store predicated off (the event path's timer read and arithmetic alone);
- ``clock``: ``%clock64`` read where the runtime reads ``%globaltimer`` (what the timer read
  costs; its timestamps mean nothing).

Needs what ``gpu_ring_check.py`` needs; on the device machine:

    PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 python3 benchmarks/gpu_ring_variants.py [--only v4,cs]

With ``$OUT`` set it also writes ``$OUT/gpu_ring_variants.json``. A kernel that does not finish
in 30 s ends the run with what was measured so far.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from contextlib import ExitStack
from typing import Any

from benchmarks import gpu_ring_check as gpu
from iket_tui.ring.device import runtime_cuh
from iket_tui.ring.layout import RingGeometry

_STORE = 'asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(address)'
_STORE_END = '"r"(stamp));'
_NEVER_STORE = (
    'asm volatile("{\\n\\t.reg .pred q;\\n\\tsetp.eq.u64 q, %0, 0;\\n\\t'
    '@q st.global.v4.u32 [%0], {%1, %2, %3, %4};\\n\\t}" ::"l"(address)'
)  # never: no record lies at address 0
_TIMER = '"mov.u64 %0, %%globaltimer;" : "=l"(t));'

EDITS: dict[str, list[tuple[str, str]]] = {
    "cs": [(_STORE, _STORE.replace("st.global.v4", "st.global.cs.v4"))],
    "clobber": [(_STORE_END, '"r"(stamp)\n               : "memory");'), (_TIMER, _TIMER[:-2] + ' :: "memory");')],
    "nostore": [(_STORE, _NEVER_STORE)],
    "clock": [(_TIMER, _TIMER.replace("%%globaltimer", "%%clock64"))],
}

VARIANTS: list[tuple[str, list[str], tuple[str, ...]]] = [
    # name, edits, GEMM variants
    ("v4", [], ("ksteps", "block")),
    ("cs", ["cs"], ("ksteps", "block")),
    ("clobber", ["clobber"], ("ksteps", "block")),
    ("nostore", ["nostore"], ("ksteps",)),
    ("clock", ["clock"], ("ksteps",)),
]


def edited(names: list[str]) -> str:
    """The runtime's CUDA text with the named edits; each must apply."""
    source = runtime_cuh()
    for name in names:
        for old, new in EDITS[name]:
            if old not in source:
                raise SystemExit(f"gpu_ring_variants: edit {name!r} no longer applies to the runtime")
            source = source.replace(old, new)
    return source


def compile_variants(sms: int, only: set[str] | None) -> tuple[dict[str, Any], dict[str, gpu.GpuRing]]:
    kernels: dict[str, Any] = {}
    rings: dict[str, gpu.GpuRing] = {}
    plain = gpu.GpuRing(RingGeometry.for_sms(sms, 32))
    rings["plain"] = plain
    kernels["plain"] = gpu.compile_kernel(plain.runtime, gpu.gemm_kernel("plain"))
    for name, edits, shapes in VARIANTS:
        if only is not None and name not in only:
            continue
        ring = gpu.GpuRing(RingGeometry.for_sms(sms, 32), cuda_runtime=edited(edits))
        rings[name] = ring
        for shape in shapes:
            kernels[f"{name}/{shape}"] = gpu.compile_kernel(ring.runtime, gpu.gemm_kernel(shape))
        print(f"  compiled {name}", flush=True)
    return kernels, rings


def measure(
    kernels: dict[str, Any], rings: dict[str, gpu.GpuRing], rounds: int, launches: int
) -> tuple[dict[str, float], bool]:
    """Median time of each kernel over ``rounds`` rounds (rotating order) of ``launches`` launches,
    every ring drained meanwhile, as ratios against the plain GEMM; and whether one hung."""
    import torch

    size = gpu.GEMM_SIZE
    a = torch.randn(size, size, dtype=torch.float16, device="cuda")
    b = torch.randn(size, size, dtype=torch.float16, device="cuda")
    c = torch.empty(size, size, dtype=torch.float16, device="cuda")
    reference = a.float() @ b.float()
    times: dict[str, list[float]] = {key: [] for key in kernels}
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
                    times[key] += gpu.timed_launches(kernel, (a, b, c), launches, key)
    except gpu.Hung as exc:
        print(f"  {exc}: the figures below are from the rounds before", flush=True)
        hung = True
    if not times["plain"]:
        return {}, hung
    plain = statistics.median(times["plain"])
    ratios = {"plain_us": plain * 1000}
    ratios |= {key: statistics.median(t) / plain for key, t in times.items() if key != "plain" and t}
    return ratios, hung


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu_ring_variants", description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="variants to measure, comma-separated (default: all)")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--launches", type=int, default=10)
    args = parser.parse_args(argv)
    sms = gpu._require_gpu()
    only = set(args.only.split(",")) if args.only else None
    t0 = time.monotonic()
    kernels, rings = compile_variants(sms, only)
    print(f"  compiled {len(kernels)} kernels in {time.monotonic() - t0:.0f} s", flush=True)
    ratios, hung = measure(kernels, rings, args.rounds, args.launches)
    if ratios:
        print(f"\nplain GEMM {gpu.GEMM_SIZE}: {ratios['plain_us']:.1f} us")
        print("| variant | GEMM | time / plain |\n|---|---|---|")
    for key, ratio in ratios.items():
        if key != "plain_us":
            name, shape = key.split("/")
            print(f"| {name} | {shape} | {ratio:.3f} |")
    for name, ring in rings.items():
        counters = ring.drain.counters
        if counters.chunks_written:
            print(f"  {name}: read {counters.events_read}, lost {counters.events_lost}, torn {counters.torn}")
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "gpu_ring_variants.json"), "w") as f:
            json.dump(ratios, f, indent=1)
    if hung:
        sys.stdout.flush()
        os._exit(3)  # a context with a hung kernel cannot be torn down
    return 0


if __name__ == "__main__":
    sys.exit(main())
