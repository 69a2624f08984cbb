# mypy: disable-error-code="no-untyped-call"
"""Where the kernel ring's overhead goes: the H200 GEMM of ``gpu_ring_check.py`` under variants of
the device runtime, all compiled into one process and timed interleaved against the plain GEMM.

Each variant edits the runtime's CUDA text (``iket_tui/ring/device_runtime.cuh``) and compiles
the GEMM with the edited copy. Most are for measuring only: they break the ring contract (a
variant that stores nothing cannot be drained, one that never wraps overruns its segment, one
with no timer has no times). What the event path does, variant by variant (``docs/ring.md``
says what each cost):

- ``off32``: the runtime as it is: a timer read and one 16-byte store per event at
  ``slab + off``, ``off`` a 32-bit byte offset moved on by 16 and wrapped by a mask, the id
  merged into the timer's low word, stamp ``pos + 1``; ``off32_16``, the same on a ring of 256
  records per segment;
- ``v4``: the runtime before it (edit ``pos``), the store at ``slab + 16 * (pos & mask)``;
  ``v4_16`` and ``v4_64`` are the same on rings of 256 and 1,024 records per segment (the
  ring's size, as a control for the variants that need one of those). Every variant below is an
  edit of ``v4``, the runtime they were first measured against;
- ``floor16``: the floor the issue measured: one 16-byte stamped record per event at a
  register-held pointer that only ever moves on by 16 (no wrap: a 1,024-record ring, from each
  segment's start); ``floor8``: the same with 8 bytes (time and id), no stamp;
- ``nostore``: every store predicated off (the event path's timer read and arithmetic alone);
  ``notimer``: the store with no timer read (the position as the time);
- ``rawtime``: the timer's two words stored as read, the id in a word of its own (no logic
  between the timer read and the store);
- ``timerdep``: the timer read not volatile, with the position as a dummy input so that it can
  neither leave the loop nor merge with another event's read (ptxas may schedule it freely);
- ``shared``: the timer read not volatile at all, so that ptxas may merge the reads of events
  with nothing between them (and hoist one out of a loop where no store intervenes);
- ``lo32``: the timer's low word alone (``%globaltimer_lo``), the high word a constant;
- ``ptr``: a 64-bit pointer moved on by 16 and wrapped by one logic op on its low bits (needs
  every segment aligned to its size: a 256-record ring, whose 4 KiB segments are);
  ``or``: the slot's offset ORed into the slab (aligned segments again, a 256-record ring);
  ``orimm``: the same OR on any ring: the slab's offset from the segment size's alignment
  (known when the module is compiled) subtracted once per warp and given back as the store's
  immediate offset;
  ``hi32``: the address's low word computed in 32 bits, its high word the ring's (valid while
  the records do not cross a 4 GiB boundary, which the script checks);
- ``lane0``: the store made by the warp's first lane alone (a predicate held from the warp's
  start; an event run by lanes without that one would be lost);
- ``clobber``: the timer read and the store each with a ``"memory"`` clobber (a compiler
  barrier), as first written; ``cs``: the store with the streaming cache hint; ``clock``:
  ``%clock64`` read where the runtime reads ``%globaltimer``.

Needs what ``gpu_ring_check.py`` needs; on the device machine:

    PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 python3 benchmarks/gpu_ring_variants.py [--only off32,v4,floor16]

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
_EVENT_TIMER = "    const unsigned long long now = timer();\n    store_record(slot(pos), ((unsigned)now"
_EVENT_STORE = (
    "    store_record(slot(pos), ((unsigned)now & ~kIdMask) | id, (unsigned)(now >> 32), PAYLOAD ? payload : 0u, "
    "pos + 1u);\n    pos += 1u;\n"
)
_RUNTIME_EVENT = "    store_record(slab + off, "
_RUNTIME_ADVANCE = "    off = (off + 16u) & kOffsetMask;\n"
_MEMBERS = "  unsigned events_base;"
_BEGUN = "    events_base = events - pos;\n"
_SLOT = "    return slab + 16ull * (position & kCapMask);\n"


def _event_store(address: str, advance: str, word: str = "((unsigned)now & ~kIdMask) | id") -> str:
    """An event's store at ``address`` with the usual record, then ``advance``."""
    return f"    store_record({address}, {word}, (unsigned)(now >> 32), PAYLOAD ? payload : 0u, pos + 1u);\n{advance}"


def _cursor(start: str) -> list[tuple[str, str]]:
    """A 64-bit pointer member, set to ``start`` once the warp's own records are written."""
    return [(_MEMBERS, _MEMBERS + "\n  unsigned long long cursor;"), (_BEGUN, _BEGUN + f"    cursor = {start};\n")]


EDITS: dict[str, list[tuple[str, str]]] = {
    "pos": [(_RUNTIME_EVENT, "    store_record(slot(pos), "), (_RUNTIME_ADVANCE, "")],
    "cs": [(_STORE, _STORE.replace("st.global.v4", "st.global.cs.v4"))],
    "clobber": [(_STORE_END, '"r"(stamp)\n               : "memory");'), (_TIMER, _TIMER[:-2] + ' :: "memory");')],
    "nostore": [(_STORE, _NEVER_STORE)],
    "clock": [(_TIMER, _TIMER.replace("%%globaltimer", "%%clock64"))],
    "floor16": [
        *_cursor("slab + 48ull"),
        (_EVENT_STORE, _event_store("cursor", "    cursor += 16ull;\n    pos += 1u;\n")),
    ],
    "floor8": [
        *_cursor("slab + 48ull"),
        (
            _EVENT_STORE,
            '    asm volatile("st.global.v2.u32 [%0], {%1, %2};" ::"l"(cursor), "r"(((unsigned)now & ~kIdMask) | id),\n'
            '                 "r"((unsigned)(now >> 32)));\n    cursor += 8ull;\n',
        ),
    ],
    "notimer": [(_EVENT_TIMER, "    const unsigned long long now = pos;\n    store_record(slot(pos), ((unsigned)now")],
    "rawtime": [
        (
            _EVENT_STORE,
            _event_store("slot(pos)", "    pos += 1u;\n", "(unsigned)now").replace(
                "(unsigned)(now >> 32), PAYLOAD ? payload : 0u", "(unsigned)(now >> 32), id"
            ),
        ),
    ],
    "timerdep": [
        (
            _EVENT_TIMER,
            "    unsigned long long now;\n"
            '    asm("mov.u64 %0, %%globaltimer;" : "=l"(now) : "r"(pos));\n    store_record(slot(pos), ((unsigned)now',
        ),
    ],
    "shared": [(_TIMER_ASM, _TIMER_ASM.replace("asm volatile(", "asm("))],
    "lo32": [
        (
            _EVENT_TIMER,
            "    unsigned now_lo;\n"
            '    asm volatile("mov.u32 %0, %%globaltimer_lo;" : "=r"(now_lo));\n'
            "    const unsigned long long now = now_lo | (1ull << 32);\n    store_record(slot(pos), ((unsigned)now",
        ),
    ],
    "ptr": [
        *_cursor("slot(pos)"),
        (
            _EVENT_STORE,
            _event_store(
                "cursor",
                "    cursor = (cursor & ~(kSegmentBytes - 1ull)) | ((cursor + 16ull) & (kSegmentBytes - 1ull));\n"
                "    pos += 1u;\n",
            ),
        ),
    ],
    "lane0": [
        (_MEMBERS, _MEMBERS + "\n  unsigned leader;"),
        (_BEGUN, _BEGUN + "    leader = special_laneid() == (unsigned)(__ffs(__activemask()) - 1);\n"),
        (
            _EVENT_STORE,
            '    asm volatile("{\\n\\t.reg .pred p;\\n\\tsetp.ne.u32 p, %5, 0;\\n\\t'
            '@p st.global.v4.u32 [%0], {%1, %2, %3, %4};\\n\\t}"\n'
            '                 ::"l"(slot(pos)), "r"(((unsigned)now & ~kIdMask) | id), "r"((unsigned)(now >> 32)),\n'
            '                 "r"(PAYLOAD ? payload : 0u), "r"(pos + 1u), "r"(leader));\n    pos += 1u;\n',
        ),
    ],
    "or": [(_SLOT, "    return slab | 16ull * (position & kCapMask);\n")],
    "orimm": [
        (
            "namespace iket_tui {\n",
            "namespace iket_tui {\nconstexpr unsigned long long kSkew =\n"
            "    (IKET_TUI_RING_ADDRESS + IKET_TUI_RECORDS_OFFSET) % (16ull * IKET_TUI_RECORDS_PER_SEGMENT);\n",
        ),
        (_MEMBERS, _MEMBERS + "\n  unsigned long long aligned;"),
        (_BEGUN, _BEGUN + "    aligned = slab - kSkew;\n"),
        (
            _EVENT_STORE,
            '    asm volatile("st.global.v4.u32 [%0+%5], {%1, %2, %3, %4};"\n'
            '                 ::"l"(aligned | 16ull * (pos & kCapMask)), "r"(((unsigned)now & ~kIdMask) | id),\n'
            '                 "r"((unsigned)(now >> 32)), "r"(PAYLOAD ? payload : 0u), "r"(pos + 1u), "n"(kSkew));\n'
            "    pos += 1u;\n",
        ),
    ],
    "hi32": [
        (
            _SLOT,
            "    return (kRing & 0xffffffff00000000ull) | (unsigned)((unsigned)slab + 16u * (position & kCapMask));\n",
        )
    ],
}

VARIANTS: list[tuple[str, list[str], tuple[str, ...], int]] = [
    # name, edits, GEMM variants, 256-byte chunks per segment (the ring's size)
    ("off32", [], ("ksteps", "block"), 32),
    ("off32_16", [], ("ksteps",), 16),
    ("v4", ["pos"], ("ksteps", "block"), 32),
    ("v4_16", ["pos"], ("ksteps",), 16),
    ("v4_64", ["pos"], ("ksteps",), 64),
    ("floor16", ["pos", "floor16"], ("ksteps",), 64),
    ("floor8", ["pos", "floor8"], ("ksteps",), 64),
    ("nostore", ["pos", "nostore"], ("ksteps",), 32),
    ("notimer", ["pos", "notimer"], ("ksteps",), 32),
    ("rawtime", ["pos", "rawtime"], ("ksteps",), 32),
    ("timerdep", ["pos", "timerdep"], ("ksteps",), 32),
    ("shared", ["pos", "shared"], ("ksteps",), 32),
    ("lo32", ["pos", "lo32"], ("ksteps",), 32),
    ("lane0", ["pos", "lane0"], ("ksteps",), 32),
    ("ptr", ["pos", "ptr"], ("ksteps",), 16),
    ("or", ["pos", "or"], ("ksteps",), 16),
    ("orimm", ["pos", "orimm"], ("ksteps", "block"), 32),
    ("hi32", ["pos", "hi32"], ("ksteps",), 32),
    ("clobber", ["pos", "clobber"], ("ksteps",), 32),
    ("cs", ["pos", "cs"], ("ksteps",), 32),
    ("clock", ["pos", "clock"], ("ksteps",), 32),
]


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


def compile_variants(sms: int, only: set[str] | None) -> tuple[dict[str, Any], dict[str, gpu.GpuRing]]:
    """Every chosen kernel, each compiled with its variant's runtime for a ring of its own."""
    from tilelang.tools.cuda import iket

    rings: dict[str, gpu.GpuRing] = {"plain": gpu.GpuRing(RingGeometry.for_sms(sms, 32))}
    jobs: list[tuple[str, gpu.GpuRing, Any]] = [("plain", rings["plain"], gpu.gemm_kernel("plain"))]
    for name, edits, shapes, chunks in _chosen(only):
        ring = gpu.GpuRing(RingGeometry.for_sms(sms, chunks), cuda_runtime=edited(edits))
        if name == "hi32" and _crosses_4g(ring.target):
            print("  hi32: the ring crosses a 4 GiB boundary here, left out", flush=True)
            continue
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


def _crosses_4g(target: RingTarget) -> bool:
    first = target.address + target.geometry.records_offset
    return first >> 32 != (target.address + target.geometry.total_bytes - 1) >> 32


def emit(directory: Path, only: set[str] | None) -> int:
    """Write each chosen variant's generated CUDA of the k-step GEMM (no GPU: a made-up ring)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, edits, _, chunks in _chosen(only):
        target = RingTarget(0x7F0000000000, RingGeometry.for_sms(132, chunks), ring_id=77)
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
    sms = gpu._require_gpu()
    t0 = time.monotonic()
    kernels, rings = compile_variants(sms, only)
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
