# mypy: disable-error-code="no-untyped-call"
"""Where the kernel ring's overhead goes: the H200 GEMM of ``gpu_ring_check.py`` under variants of
the device runtime, all compiled into one process and timed interleaved against the plain GEMM.

Each variant edits the runtime's CUDA text (``iket_tui/ring/device_runtime.cuh``) and compiles
the GEMM with the edited copy (for measuring only: a variant that stores nothing cannot be
drained):

- ``b4``: the runtime as it is (a fence per ``PUBLISH_EVERY`` = 4 chunks);
- ``b1``, ``b8``: a fence per chunk, per 8 chunks (announcing 1 or 8 slots ahead);
- ``b4_512``: 512-byte chunks;
- ``b4_nostore``: no fence and every store predicated off (the event path and the flush's
  arithmetic alone);
- ``b4_clock``: ``%clock64`` read where the runtime reads ``%globaltimer`` (what the timer read
  costs; its timestamps mean nothing);
- ``b4_noage``: no flush for age, only when the chunk is full (what the age check costs);
- ``b4_nostore_clock_noage``: all three;
- ``b4_noendfence``: no fence before the tags a warp publishes as it ends (what waiting for the
  warp's last chunk to cross PCIe costs; a reader could see those tags before their bodies).

Needs what ``gpu_ring_check.py`` needs; on the device machine:

    PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 python3 benchmarks/gpu_ring_variants.py [--only b4,b1]

With ``$OUT`` set it also writes ``$OUT/gpu_ring_variants.json``. A kernel that does not finish
in 30 s ends the run with what was measured so far (variants without a fence have hung
TileLang's warp-specialized GEMM on the H200).
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
from iket_tui.ring.layout import ChunkLayout, RingGeometry

_STORE_WORD = 'asm volatile("st.global.u32 [%0], %1;" :: "l"(address), "r"(value) : "memory");'
_NO_STORE_WORD = (
    'asm volatile("{\\n\\t.reg .pred q;\\n\\tsetp.eq.u64 q, %0, 0;\\n\\t@q st.global.u32 [%0], %1;\\n\\t}"'
    ' :: "l"(address), "r"(value) : "memory");'
)
_PUBLISH = "pending == kPublishEvery) publish()"
_ANNOUNCE = "slot(seq + kPublishEvery), 0u)"

EDITS: dict[str, list[tuple[str, str]]] = {
    "nostore": [
        (_STORE_WORD, _NO_STORE_WORD),  # never: no chunk lies at address 0
        (
            "setp.ne.u32 p, %0, 0;\\n\\t@p st.relaxed.sys.global.u32",
            "setp.eq.u32 p, %0, 99;\\n\\t@p st.relaxed.sys.global.u32",
        ),
        (
            "setp.eq.u32 p, %0, 0;\\n\\t@p st.relaxed.sys.global.v2.u32",
            "setp.eq.u32 p, %0, 99;\\n\\t@p st.relaxed.sys.global.v2.u32",
        ),
    ],
    "b1": [(_PUBLISH, "pending == 1u) publish()"), (_ANNOUNCE, "slot(seq + 1u), 0u)")],
    "b8": [(_PUBLISH, "pending == 8u) publish()"), (_ANNOUNCE, "slot(seq + 8u), 0u)")],
    "clock": [('"mov.u64 %0, %%globaltimer;"', '"mov.u64 %0, %%clock64;"')],
    "noendfence": [
        (
            "seq, events);\n      publish();",
            "seq, events);\n      const unsigned first = seq - pending;\n"
            "      store_if(lane < pending, slot(first + lane), first + lane + 1u);",
        )
    ],
    "noage": [("if (full | (now > deadline))", "if (full)")],
}

VARIANTS: list[tuple[str, str, int, list[str], tuple[str, ...]]] = [
    # name, fence, chunk bytes, edits, GEMM variants
    ("b4", "acq_rel", 256, [], ("ksteps", "block")),
    ("b1", "acq_rel", 256, ["b1"], ("ksteps", "block")),
    ("b8", "acq_rel", 256, ["b8"], ("ksteps", "block")),
    ("b4_512", "acq_rel", 512, [], ("ksteps",)),
    ("b4_nostore", "none", 256, ["nostore"], ("ksteps",)),
    ("b4_clock", "acq_rel", 256, ["clock"], ("ksteps",)),
    ("b4_noage", "acq_rel", 256, ["noage"], ("ksteps",)),
    ("b4_nostore_clock_noage", "none", 256, ["nostore", "clock", "noage"], ("ksteps",)),
    ("b4_noendfence", "acq_rel", 256, ["noendfence"], ("ksteps", "block")),
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


def compile_variants(sms: int, only: set[str] | None) -> tuple[dict[str, Any], dict[str, gpu.HostRing]]:
    kernels: dict[str, Any] = {}
    rings: dict[str, gpu.HostRing] = {}
    plain = gpu.HostRing(RingGeometry.for_sms(sms, 64))
    rings["plain"] = plain
    kernels["plain"] = gpu.compile_kernel(plain.runtime, gpu.gemm_kernel("plain"))
    for name, fence, chunk_bytes, edits, shapes in VARIANTS:
        if only is not None and name not in only:
            continue
        geometry = RingGeometry.for_sms(sms, 64, ChunkLayout(chunk_bytes // 128))
        ring = gpu.HostRing(geometry, fence=fence, cuda_runtime=edited(edits))
        rings[name] = ring
        for shape in shapes:
            kernels[f"{name}/{shape}"] = gpu.compile_kernel(ring.runtime, gpu.gemm_kernel(shape))
        print(f"  compiled {name}", flush=True)
    return kernels, rings


def measure(
    kernels: dict[str, Any], rings: dict[str, gpu.HostRing], rounds: int, launches: int
) -> tuple[dict[str, float], bool]:
    """Median time of each kernel over ``rounds`` rounds (rotating order) of ``launches`` launches,
    every host ring drained meanwhile, as ratios against the plain GEMM; and whether one hung."""
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
    for ring in rings.values():
        ring.free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
