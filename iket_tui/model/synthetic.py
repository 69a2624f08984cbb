"""Pass streams shaped exactly like what the agent reports for real TileLang compiles.

The pass list below is a GEMM (1024^3 fp16, 128x128x32 tiles, 3 stages) lowered by TileLang
0.1.15 for ``sm_90a`` on a CPU-only machine: names, nesting, phases and inclusive durations
as observed through ``tilelang.instrumentation``. Tests, screenshots and benchmarks build
their streams from it, so what they exercise is what a user sees, at realistic scale.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from iket_tui.protocol import messages as m
from iket_tui.protocol.messages import Message

CUDA: Final = "pipeline_cuda"
TARGET: Final = "cuda -keys=cuda,gpu -arch=sm_90a"
DEVICE_BUILD: Final = "target.build.tilelang_cuda"
"""The codegen step that writes the CUDA source and runs nvcc on it."""
HOST_BUILD: Final = "target.build.tilelang_c_host"
"""The codegen step that builds the host-side launcher, after the device build."""

GEMM_LOWERING: Final[tuple[tuple[str, int, str | None, int], ...]] = (
    ("pass_fn", 0, None, 249),
    ("pass_fn", 0, None, 141),
    ("pass_fn", 0, None, 314),
    ("tirx.BindTarget", 0, CUDA, 110),
    ("tl.MaterializeKernelLaunch", 0, CUDA, 40),
    ("tl.AnnotateDeviceBoundTmaCopies", 0, CUDA, 20),
    ("tl.AddWrapperForSingleBufStore", 0, CUDA, 467),
    ("tl.LegalizeNegativeIndex", 0, CUDA, 393),
    ("tl.InjectAssumes", 0, CUDA, 45),
    ("tl.Simplify", 0, CUDA, 353),
    ("tl.CanonicalizeLegacyReducer", 0, CUDA, 48),
    ("tl.VerifyReducerEpoch", 0, CUDA, 13),
    ("tl.VerifyBufferInit", 0, CUDA, 84),
    ("tl.AutoWarpSpecialization", 0, CUDA, 8),
    ("tl.MaterializeWSSchedule", 0, CUDA, 23),
    ("tl.ProducerConsumerWarpSpecialized", 0, CUDA, 24459),
    ("tl.LowerBlackwell2SM", 0, CUDA, 15),
    ("tl.IfStmtBinding", 0, CUDA, 40),
    ("tl.UnrollLoop", 0, CUDA, 39),
    ("tl.Simplify", 0, CUDA, 3254),
    ("tl.PipelinePlanning", 0, CUDA, 110),
    ("tl.InjectSoftwarePipeline", 0, CUDA, 114),
    ("tl.Simplify", 0, CUDA, 2749),
    ("tl.LayoutInference", 0, CUDA, 26908),
    ("tl.ReducerPlanAndMaterialize", 0, CUDA, 124),
    ("tl.LowerTileOp", 0, CUDA, 85066),
    ("tl.LetInline", 1, CUDA, 154),
    ("tl.Simplify", 1, CUDA, 344),
    ("tl.VerifyReducerConsumed", 0, CUDA, 99),
    ("tl.LowerL2Persistent", 0, CUDA, 52),
    ("tl.DecoupleTypeCast", 0, CUDA, 1709),
    ("tl.LegalizeVectorizedLoop", 0, CUDA, 12823),
    ("tl.LegalizeSafeMemoryAccess", 0, CUDA, 5276),
    ("tl.LowerAccessPtr", 0, CUDA, 46),
    ("tl.Simplify", 0, CUDA, 6285),
    ("tl.HoistNonRestrictParams", 0, CUDA, 21),
    ("tl.LowerSharedTmem", 0, CUDA, 67),
    ("tl.PlanAndUpdateBufferAllocationLocation", 0, CUDA, 215),
    ("tl.LowerSharedBarrier", 0, CUDA, 64),
    ("tl.FuseMBarrierArriveExpectTx", 0, CUDA, 84),
    ("tl.HoistGlobalBufferAllocations", 0, CUDA, 18),
    ("tl.LowerOpaqueBlock", 0, CUDA, 100),
    ("tl.Simplify", 0, CUDA, 5115),
    ("tirx.NarrowDataType", 0, CUDA, 413),
    ("tl.FlattenBuffer", 0, CUDA, 1063),
    ("tl.ConfigIndexBitwidth", 0, CUDA, 168),
    ("tirx.Simplify", 0, CUDA, 522),
    ("tl.VectorizeLoop", 0, CUDA, 71),
    ("tir.StorageRewrite", 0, CUDA, 309),
    ("tl.LoopUnswitching", 0, CUDA, 55),
    ("tl.UnrollLoop", 0, CUDA, 31),
    ("s_tir.RenormalizeSplitPattern", 0, CUDA, 300),
    ("tirx.Simplify", 0, CUDA, 416),
    ("tirx.RemoveNoOp", 0, CUDA, 228),
    ("s_tir.HoistIfThenElse", 0, CUDA, 937),
    ("s_tir.InsertHoistIfThenElse", 1, CUDA, 212),
    ("tirx.Simplify", 1, CUDA, 489),
    ("tirx.RemoveNoOp", 1, CUDA, 203),
    ("tirx.VerifyMemory", 0, CUDA, 39),
    ("tirx.AnnotateEntryFunc", 0, CUDA, 13),
    ("s_tir.InferFragment", 0, CUDA, 46),
    ("tl.LowerThreadAllreduce", 0, CUDA, 66),
    ("tl.LowerLDGSTG", 0, CUDA, 7),
    ("tl.LowerHopperIntrin", 0, CUDA, 88),
    ("tl.AnnotateDeviceRegions", 0, CUDA, 12),
    ("tl.SplitHostDevice", 0, CUDA, 404),
    ("tirx.ConvertSSA", 1, CUDA, 61),
    ("tl.MarkCudaSyncCalls", 0, CUDA, 37),
    ("tl.AnnotateReadOnlyParams", 0, CUDA, 24),
    ("tl.MergeSharedMemoryAllocations", 0, CUDA, 175),
    ("tl.InjectFenceProxy", 0, CUDA, 156),
    ("tl.ThreadSync", 0, CUDA, 369),
    ("tl.ThreadSync", 0, CUDA, 282),
    ("tl.InjectTcgen05Fence", 0, CUDA, 7),
    ("tl.MergeIfStmt", 0, CUDA, 33),
    ("tl.AnnotateWarpGroupRegAlloc", 0, CUDA, 45),
    ("tl.MakePackedAPI", 0, CUDA, 1373),
    ("tl.Simplify", 0, CUDA, 6368),
    ("tl.LowerDeviceKernelLaunch", 0, CUDA, 199),
    ("tl.PersistThreadblock", 0, CUDA, 59),
    ("tirx.Filter", 0, None, 115),
    ("tirx.Filter", 0, None, 17),
    ("tl.LowerIntrin", 0, None, 306),
    ("tirx.Simplify", 0, None, 443),
    ("pass_fn", 0, None, 581),
)
"""(name, depth, phase, inclusive microseconds) in start order; seq is the index."""

LAYOUT_CONFLICT: Final = (
    "InternalError: Layout infer conflict between D_l and C_l in T.Parallel loop: "
    "loop Fragment((128, 128) -> (128,), replicate: 1, thread: 128, "
    "forward_thread: _i % 64 // 16 * 32 + _i % 8 * 4 + _j % 8 // 2)"
)
LAYOUT_TRACEBACK: Final = """Traceback (most recent call last):
  File "/srv/kernels/demo.py", line 58, in main
    tilelang.compile(add_transposed(1024, 1024, 1024, 128, 128, 32), target=TARGET)
  File "/usr/lib/python3.11/site-packages/tilelang/jit/__init__.py", line 206, in compile
    return cached(func=func, out_idx=out_idx, execution_backend=execution_backend, target=target)
  File "/usr/lib/python3.11/site-packages/tilelang/engine/lower.py", line 262, in lower
    mod = LowerAndLegalize(mod, target)
  File "/usr/lib/python3.11/site-packages/tilelang/engine/phase.py", line 134, in LowerAndLegalize
    mod = tilelang.transform.LayoutInference()(mod)
  File "tvm/ffi/cython/function.pxi", line 923, in tvm.ffi.core.Function.__call__
tvm.error.InternalError: Layout infer conflict between D_l and C_l in T.Parallel loop:
    loop Fragment((128, 128) -> (128,), replicate: 1, thread: 128,
        forward_thread: _i % 64 // 16 * 32 + _i % 8 * 4 + _j % 8 // 2)
    fragment Fragment((128, 128) -> (128,), replicate: 1, thread: 128, forward_thread: _i % 64 // 16 * 32 + _j % 8 // 2)
"""
NVCC_REJECTED: Final = (
    'RuntimeError: nvcc failed: kernel.cu(41): error: identifier "__tl_missing_intrinsic" is undefined'
)


def _children(table: Sequence[tuple[str, int, str | None, int]]) -> dict[int | None, list[int]]:
    """Parent index of every pass from its depth: the latest open pass one level up."""
    children: dict[int | None, list[int]] = {None: []}
    open_at: list[int] = []
    for index, (_, depth, _, _) in enumerate(table):
        del open_at[depth:]
        parent = open_at[-1] if open_at else None
        children.setdefault(parent, []).append(index)
        children[index] = []
        open_at.append(index)
    return children


_GEMM_CHILDREN: Final = _children(GEMM_LOWERING)


@dataclass(frozen=True)
class Lowering:
    """One compile as the agent reports it.

    ``scale`` stretches every duration; ``slow`` overrides the inclusive duration of passes
    by name; ``fail_in`` names the pass that raises ``error`` (the compile then ends failed in
    that pass, as TileLang reports it: the open passes incomplete, with no error of their
    own); ``codegen_ns`` adds codegen as ``tilelang.compile`` runs it: the device build
    (nvcc) taking ``codegen_ns``, which fails with ``codegen_error`` if given, then the host
    build taking ``host_codegen_ns``.
    """

    compile: int
    kernel: str
    start_ns: int
    context: int = 1
    scale: float = 1.0
    slow: Mapping[str, int] | None = None
    fail_in: str | None = None
    error: str = LAYOUT_CONFLICT
    traceback: str = LAYOUT_TRACEBACK
    codegen_ns: int | None = None
    codegen_error: str | None = None
    host_codegen_ns: int = 1_100_000

    @property
    def label(self) -> str:
        return f"stage=jit-lower, kernel={self.kernel}, backend=tvm_ffi"

    def messages(self, until_ns: int | None = None) -> list[Message]:
        """The compile's messages in time order, cut after ``until_ns`` if given (what a
        live client has seen by then)."""
        out = list(_lowering(self))
        if until_ns is not None:
            out = [msg for msg in out if msg["t_ns"] <= until_ns]
        return out

    def end_ns(self) -> int:
        return int(self.messages()[-1]["t_ns"])


class _Failed(Exception):
    pass


def _lowering(spec: Lowering) -> Iterator[Message]:
    cid, ctx = spec.compile, spec.context
    t = spec.start_ns
    yield m.compile_begin(compile=cid, label=spec.label, kernel=spec.kernel, target=TARGET, t_ns=t)
    t += 40_000
    yield m.pass_context(m.PASS_CONTEXT_ENTER, compile=cid, context=ctx, t_ns=t)
    out: list[Message] = []
    open_passes: list[tuple[int, int | None]] = []
    failed_at = None
    t += 10_000
    try:
        for index in _GEMM_CHILDREN[None]:
            t = _emit(spec, index, None, t, out, open_passes) + 6_000
    except _Failed as failure:
        failed_at = int(str(failure))
    yield from out
    if failed_at is not None:
        for index, parent in open_passes:
            name, depth, phase, _ = GEMM_LOWERING[index]
            yield m.pass_incomplete(
                compile=cid,
                context=ctx,
                name=name,
                seq=index,
                depth=depth,
                parent=parent,
                phase=phase,
                t_ns=failed_at,
                error=None,
            )
        t = failed_at + 15_000
        yield m.pass_context(m.PASS_CONTEXT_EXIT, compile=cid, context=ctx, t_ns=t)
        t += 120_000
        yield _compile_end(spec, t, ok=False, stage="pass", error=spec.error)
        return
    yield m.pass_context(m.PASS_CONTEXT_EXIT, compile=cid, context=ctx, t_ns=t)
    if spec.codegen_ns is not None:
        t += 30_000
        yield m.codegen_begin(compile=cid, t_ns=t, name=DEVICE_BUILD)
        t += spec.codegen_ns
        ok = spec.codegen_error is None
        yield m.codegen_end(
            compile=cid, t_ns=t, duration_ns=spec.codegen_ns, ok=ok, error=spec.codegen_error, name=DEVICE_BUILD
        )
        if not ok:
            t += 80_000
            yield _compile_end(spec, t, ok=False, stage="codegen", error=spec.codegen_error)
            return
        t += 3_000_000
        yield m.codegen_begin(compile=cid, t_ns=t, name=HOST_BUILD)
        t += spec.host_codegen_ns
        yield m.codegen_end(compile=cid, t_ns=t, duration_ns=spec.host_codegen_ns, ok=True, name=HOST_BUILD)
    t += 50_000
    yield _compile_end(spec, t, ok=True, stage=None, error=None)


def _compile_end(spec: Lowering, t: int, *, ok: bool, stage: str | None, error: str | None) -> Message:
    return m.compile_end(
        compile=spec.compile,
        label=spec.label,
        t_ns=t,
        duration_ns=t - spec.start_ns,
        ok=ok,
        error=error,
        error_type=error.split(":", 1)[0] if error else None,
        traceback=(spec.traceback if stage == "pass" else f"Traceback (most recent call last):\n{error}\n")
        if error
        else None,
        stage=stage,
    )


def _emit(
    spec: Lowering,
    index: int,
    parent: int | None,
    t: int,
    out: list[Message],
    open_passes: list[tuple[int, int | None]],
) -> int:
    """Emit pass ``index`` and its children from ``t``; returns when it ended."""
    name, depth, phase, micros = GEMM_LOWERING[index]
    duration = spec.slow.get(name) if spec.slow and name in spec.slow else int(micros * 1000 * spec.scale)
    assert duration is not None
    cid, ctx = spec.compile, spec.context
    out.append(
        m.pass_start(compile=cid, context=ctx, name=name, seq=index, depth=depth, parent=parent, phase=phase, t_ns=t)
    )
    open_passes.append((index, parent))
    if name == spec.fail_in:
        raise _Failed(str(t + duration))
    inner = t + 4_000
    for child in _GEMM_CHILDREN[index]:
        inner = _emit(spec, child, index, inner, out, open_passes) + 3_000
    end = max(t + duration, inner + 4_000)
    out.append(
        m.pass_end(
            compile=cid,
            context=ctx,
            name=name,
            seq=index,
            depth=depth,
            parent=parent,
            phase=phase,
            t_ns=end,
            duration_ns=end - t,
        )
    )
    open_passes.pop()
    return end


def agent_hello(*, pid: int = 4242, argv: Sequence[str] = ("python", "kernels/demo.py"), t_ns: int = 0) -> Message:
    return m.hello(
        role="agent",
        pid=pid,
        start_time=987_654,
        software_version="0.1.0",
        capabilities=[m.CAP_PASSES],
        argv=list(argv),
        t_ns=t_ns,
    )


DEMO_KERNELS: Final = ("gemm_128x128", "gemm_64x256", "gemm_splitk", "add_transposed", "softmax_rows", "flash_fwd")


def lowerings(count: int = 6, *, start_ns: int = 1_000_000_000, fail: Sequence[int] = (3,)) -> list[Lowering]:
    """``count`` compiles one after another, the ones at positions ``fail`` failing in
    ``tl.LayoutInference``, as the bundled demo does."""
    specs: list[Lowering] = []
    t = start_ns
    for index in range(count):
        spec = Lowering(
            compile=index + 1,
            kernel=DEMO_KERNELS[index % len(DEMO_KERNELS)],
            start_ns=t,
            scale=0.8 + 0.1 * (index % 5),
            fail_in="tl.LayoutInference" if index in fail else None,
            codegen_ns=None if index in fail else 420_000_000 + 10_000_000 * index,
        )
        specs.append(spec)
        t = spec.end_ns() + 30_000_000
    return specs


def bulk(pass_events: int, *, start_ns: int = 1_000_000_000) -> Iterator[Message]:
    """At least ``pass_events`` pass events from back-to-back compiles (for benchmarks)."""
    emitted = 0
    t = start_ns
    compile_id = 0
    while emitted < pass_events:
        compile_id += 1
        spec = Lowering(compile=compile_id, kernel=DEMO_KERNELS[compile_id % len(DEMO_KERNELS)], start_ns=t)
        for msg in spec.messages():
            if msg["type"] in m.PASS_EVENTS:
                emitted += 1
            yield msg
        t = int(msg["t_ns"]) + 1_000_000


def live_stream(
    *,
    compiles: int = 6,
    fail: Sequence[int] = (3,),
    running: str = "tl.LayoutInference",
    running_for_ns: int = 1_200_000_000,
    dropped: int = 0,
    pid: int = 4242,
) -> list[Message]:
    """What a client has received from a target in the middle of its last compile: a hello,
    ``compiles - 1`` finished compiles, then the last one with ``running`` started
    ``running_for_ns`` ago (a heartbeat carries the time up to now)."""
    specs = lowerings(compiles, fail=fail)
    last = replace(specs[-1], slow={running: 10**15}, fail_in=None)
    out = [agent_hello(pid=pid, t_ns=specs[0].start_ns - 5_000_000)]
    for spec in specs[:-1]:
        out += spec.messages()
    started = next(msg["t_ns"] for msg in last.messages() if msg.get("name") == running)
    out += last.messages(until_ns=started)
    now = started + running_for_ns
    events = sum(1 for msg in out if msg["type"] not in (m.HELLO, m.HEARTBEAT))
    out.append(m.heartbeat(t_ns=now, produced=events + dropped, dropped=dropped, open_passes=1))
    return out
