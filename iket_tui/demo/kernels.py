# mypy: disable-error-code="valid-type, untyped-decorator"
"""Real TileLang kernels for the demo, the tests and the benchmarks, by name.

Every kernel is lowered for Hopper (``sm_90a``) through TileLang's real pass pipeline, so the
agent sees the same passes a user's compile produces. No GPU is needed: ``lower`` stops at the
generated CUDA source, ``compile`` also runs nvcc. The kernel cache is turned off before each
compile, because a cached kernel runs no pass at all.

The registry holds good kernels and three on purpose unusual ones:

- ``layout_conflict`` adds a transposed fragment to another after two ``T.gemm``; TileLang
  rejects it in ``tl.LayoutInference`` with ``tvm.error.InternalError: Layout infer conflict``.
- ``nvcc_error`` calls a device function that no header declares; every pass succeeds and
  nvcc rejects the generated source, so ``compile`` fails in codegen with nvcc's own error text
  (``lower`` runs no nvcc and succeeds).
- ``slow_gemm`` is the GEMM compiled while one pass, ``tl.InjectSoftwarePipeline``, takes
  ``slow_seconds`` longer (see ``slowed_pass``).
- ``stuck_gemm`` is the GEMM compiled with a pass of the demo's own, ``demo.WaitForAbort`` (made
  by :func:`wait_for_abort`), run just before ``tl.PipelinePlanning``: it never returns by
  itself, so the compile is stuck until it is aborted (``CompileAborted``) or the program ends.

Beside the registry, :func:`waiting_steps` is a traced kernel in which one block waits on a flag
in global memory until the program sets it: where there is a GPU, the demo launches it after the
traced GEMM (:func:`run_gemm`), so the kernels screen shows a kernel that does not finish.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import tilelang
import tilelang.language as T
import tilelang.transform
from tilelang import tvm
from tilelang.instrumentation import compile_pass_instrumentation, create_pass_instruments

TARGET: Mapping[str, str] = MappingProxyType({"kind": "cuda", "arch": "sm_90a"})
"""The target every demo kernel is lowered for: Hopper, named explicitly so no GPU is probed."""

SLOWED_PASS = "tl.InjectSoftwarePipeline"
"""The pass that ``slow_gemm`` slows down."""

LAYOUT_CONFLICT_PASS = "tl.LayoutInference"
"""The pass in which ``layout_conflict`` fails."""

WAITING_PASS = "demo.WaitForAbort"
"""The demo's own pass in which ``stuck_gemm`` waits until its compile is aborted."""

WAITS_BEFORE = "tl.PipelinePlanning"
"""The TileLang pass that ``WAITING_PASS`` runs just before."""

DEFAULT_SLOW_SECONDS = 4.0
"""How much longer ``SLOWED_PASS`` takes for ``slow_gemm`` unless told otherwise."""

PrimFunc = Any
"""A TileLang ``T.prim_func`` (TileLang ships no type information)."""


class UnknownKernelError(ValueError):
    """A kernel name that is not in the registry; the message lists the known names."""

    def __init__(self, name: str) -> None:
        super().__init__(f"unknown demo kernel {name!r}; known: {', '.join(KERNELS)}")
        self.name = name


@dataclass(frozen=True)
class DemoKernel:
    """One named kernel: how to build it and what its compile is expected to do."""

    name: str
    summary: str
    build: Callable[[], PrimFunc]
    fails_in: str | None = None
    """The pass (or ``"nvcc"``) where ``compile`` fails, None when it succeeds."""
    slowed_pass: str | None = None
    """The pass that takes ``slow_seconds`` longer while this kernel compiles."""
    waits: bool = False
    """Its compile runs ``WAITING_PASS`` just before ``WAITS_BEFORE`` and stays there until aborted."""
    traced: bool = False
    """It has IKET events: built and compiled inside ``iket.session()``, as a user would, so
    that it compiles with TileLang's IKET runtime, or with iket-tui's when kernels are traced."""


def gemm(
    m: int = 1024, n: int = 1024, k: int = 1024, block_m: int = 128, block_n: int = 128, block_k: int = 32
) -> PrimFunc:
    """C = A @ B in fp16 with fp32 accumulation, tiled for shared memory, 3-stage pipelined."""

    @T.prim_func
    def gemm(
        A: T.Tensor((m, k), T.float16),
        B: T.Tensor((k, n), T.float16),
        C: T.Tensor((m, n), T.float16),
    ) -> None:
        with T.Kernel(T.ceildiv(n, block_n), T.ceildiv(m, block_m), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_m, block_k), T.float16)
            B_shared = T.alloc_shared((block_k, block_n), T.float16)
            C_local = T.alloc_fragment((block_m, block_n), T.float32)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(k, block_k), num_stages=3):
                T.copy(A[by * block_m, ko * block_k], A_shared)
                T.copy(B[ko * block_k, bx * block_n], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_m, bx * block_n])

    return gemm


def gemm_relu(m: int = 1024, n: int = 1024, k: int = 1024, block: int = 128, block_k: int = 32) -> PrimFunc:
    """C = relu(A @ B + bias): a GEMM with a fused bias and ReLU epilogue on the accumulator."""

    @T.prim_func
    def gemm_relu(
        A: T.Tensor((m, k), T.float16),
        B: T.Tensor((k, n), T.float16),
        bias: T.Tensor((n,), T.float16),
        C: T.Tensor((m, n), T.float16),
    ) -> None:
        with T.Kernel(T.ceildiv(n, block), T.ceildiv(m, block), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block, block_k), T.float16)
            B_shared = T.alloc_shared((block_k, block), T.float16)
            C_local = T.alloc_fragment((block, block), T.float32)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(k, block_k), num_stages=3):
                T.copy(A[by * block, ko * block_k], A_shared)
                T.copy(B[ko * block_k, bx * block], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            for i, j in T.Parallel(block, block):
                C_local[i, j] = T.max(C_local[i, j] + bias[bx * block + j], 0)
            T.copy(C_local, C[by * block, bx * block])

    return gemm_relu


def vector_add(m: int = 1024, n: int = 1024, block: int = 128) -> PrimFunc:
    """C = A + B, elementwise in fp16."""

    @T.prim_func
    def vector_add(
        A: T.Tensor((m, n), T.float16),
        B: T.Tensor((m, n), T.float16),
        C: T.Tensor((m, n), T.float16),
    ) -> None:
        with T.Kernel(T.ceildiv(n, block), T.ceildiv(m, block), threads=128) as (bx, by):
            for i, j in T.Parallel(block, block):
                C[by * block + i, bx * block + j] = (
                    A[by * block + i, bx * block + j] + B[by * block + i, bx * block + j]
                )

    return vector_add


def softmax(m: int = 1024, n: int = 1024, block_m: int = 8) -> PrimFunc:
    """Row-wise softmax of an fp16 matrix, with the max and sum reductions in fp32 fragments."""

    @T.prim_func
    def softmax(
        X: T.Tensor((m, n), T.float16),
        Y: T.Tensor((m, n), T.float16),
    ) -> None:
        with T.Kernel(T.ceildiv(m, block_m), threads=128) as bx:
            x_shared = T.alloc_shared((block_m, n), T.float16)
            x_local = T.alloc_fragment((block_m, n), T.float32)
            row_max = T.alloc_fragment((block_m,), T.float32)
            row_sum = T.alloc_fragment((block_m,), T.float32)
            T.copy(X[bx * block_m, 0], x_shared)
            T.copy(x_shared, x_local)
            T.reduce_max(x_local, row_max, dim=1)
            for i, j in T.Parallel(block_m, n):
                x_local[i, j] = T.exp(x_local[i, j] - row_max[i])
            T.reduce_sum(x_local, row_sum, dim=1)
            for i, j in T.Parallel(block_m, n):
                x_local[i, j] = x_local[i, j] / row_sum[i]
            T.copy(x_local, Y[bx * block_m, 0])

    return softmax


def layout_conflict(size: int = 256, block: int = 64) -> PrimFunc:
    """Two GEMMs whose accumulators are added with one transposed: no fragment layout fits both."""

    @T.prim_func
    def layout_conflict(
        A: T.Tensor((size, size), T.float16),
        B: T.Tensor((size, size), T.float16),
        C: T.Tensor((size, size), T.float16),
    ) -> None:
        with T.Kernel(T.ceildiv(size, block), T.ceildiv(size, block), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block, block), T.float16)
            B_shared = T.alloc_shared((block, block), T.float16)
            C_local = T.alloc_fragment((block, block), T.float32)
            D_local = T.alloc_fragment((block, block), T.float32)
            T.copy(A[by * block, 0], A_shared)
            T.copy(B[0, bx * block], B_shared)
            T.gemm(A_shared, B_shared, C_local, clear_accum=True)
            T.gemm(B_shared, A_shared, D_local, clear_accum=True)
            for i, j in T.Parallel(block, block):
                C_local[i, j] = C_local[i, j] + D_local[j, i]
            T.copy(C_local, C[by * block, bx * block])

    return layout_conflict


MISSING_DEVICE_FUNCTION = "iket_demo_missing_device_function"
"""The device function ``nvcc_error`` calls and no header declares."""


def nvcc_error(m: int = 1024, n: int = 1024, block: int = 128) -> PrimFunc:
    """An elementwise kernel that calls an undeclared device function: only nvcc can tell."""

    @T.prim_func
    def nvcc_error(
        A: T.Tensor((m, n), T.float16),
        C: T.Tensor((m, n), T.float16),
    ) -> None:
        with T.Kernel(T.ceildiv(n, block), T.ceildiv(m, block), threads=128) as (bx, by):
            for i, j in T.Parallel(block, block):
                C[by * block + i, bx * block + j] = T.call_extern(
                    T.float16, MISSING_DEVICE_FUNCTION, A[by * block + i, bx * block + j]
                )

    return nvcc_error


def traced_gemm(m: int = 1024, n: int = 1024, k: int = 1024, block: int = 128, block_k: int = 32) -> PrimFunc:
    """The GEMM with IKET events, using every frontend call: a range around each block's work
    (payload: the block's column, int32), a mark per k-step (payload: the step, uint32), a
    range around the loads and one around the MMA of every k-step, and a mark with the first
    input value of the tile (float32)."""
    from tilelang.tools.cuda import iket

    @T.prim_func
    def traced_gemm(
        A: T.Tensor((m, k), T.float16),
        B: T.Tensor((k, n), T.float16),
        C: T.Tensor((m, n), T.float16),
    ) -> None:
        with T.Kernel(T.ceildiv(n, block), T.ceildiv(m, block), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block, block_k), T.float16)
            B_shared = T.alloc_shared((block_k, block), T.float16)
            C_local = T.alloc_fragment((block, block), T.float32)
            T.evaluate(iket.range_start("tile", payload=iket.payload(bx, "int32")))
            T.evaluate(iket.mark("first_a", payload=iket.payload(T.Cast(T.float32, A[by * block, 0]), "float32")))
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(k, block_k), num_stages=3):
                T.evaluate(iket.mark("k_step", payload=iket.payload(ko, "uint32")))
                T.evaluate(iket.range_push("load"))
                T.copy(A[by * block, ko * block_k], A_shared)
                T.copy(B[ko * block_k, bx * block], B_shared)
                T.evaluate(iket.range_pop("load"))
                with iket.range("mma"):
                    T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block, bx * block])
            T.evaluate(iket.range_end())

    return traced_gemm


WAITING_BLOCKS = 64
WAITING_STEPS = 32
WAITING_BLOCK = 3
"""The block of :func:`waiting_steps` that waits."""
WAITING_AT_STEP = 17
"""The step in which it waits."""
DEFAULT_WAIT_SECONDS = 3.0
"""How long the demo leaves that block waiting before it sets the flag."""


def waiting_steps(
    blocks: int = WAITING_BLOCKS, steps: int = WAITING_STEPS, held: int = WAITING_BLOCK, at: int = WAITING_AT_STEP
) -> PrimFunc:
    """``steps`` steps of work per block, each a ``k_step`` mark (payload: the step, uint32) and a
    ``work`` range, all inside a ``tile`` range (payload: the block, int32); in step ``at``,
    block ``held`` opens a ``wait`` range and spins until ``Flag[0]`` is not 0 (an atomic read,
    so the flag is seen when the host sets it while the kernel runs)."""
    from tilelang.tools.cuda import iket

    @T.prim_func
    def waiting_steps(Flag: T.Tensor((1,), T.int32), Out: T.Tensor((blocks * 128,), T.float32)) -> None:
        with T.Kernel(blocks, threads=128) as bx:
            acc = T.alloc_local((1,), T.float32)
            acc[0] = T.float32(0)
            with iket.range("tile", payload=iket.payload(bx, "int32")):
                for k in T.serial(steps):
                    T.evaluate(iket.mark("k_step", payload=iket.payload(k, "uint32")))
                    with iket.range("work"):
                        for _ in T.serial(64):
                            acc[0] = acc[0] * T.float32(0.999) + T.float32(1)
                        if bx == held and k == at:
                            with iket.range("wait"):
                                while T.call_extern("int32", "atomicAdd", T.address_of(Flag[0]), 0) == 0:
                                    T.evaluate(0)
            for j in T.Parallel(128):
                Out[bx * 128 + j] = acc[0]

    return waiting_steps


def compile_waiting() -> Any:
    """:func:`waiting_steps` compiled for the GPU (inside ``iket.session``, as a traced kernel)."""
    from tilelang.tools.cuda import iket

    tilelang.disable_cache()
    with iket.session():
        return tilelang.compile(waiting_steps(), target=dict(TARGET))


def run_waiting(compiled: Any, wait_s: float, launched: Callable[[], None] | None = None) -> float:
    """Launch compiled :func:`waiting_steps` once, call ``launched``, set its flag ``wait_s``
    seconds later (:func:`release`), and wait for the kernel; returns the seconds from launch to
    its end. Needs CuPy (checked before the launch: without a release the kernel never ends)."""
    import cupy  # noqa: F401
    import torch

    flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    out = torch.zeros(WAITING_BLOCKS * 128, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    started = time.monotonic()
    compiled(flag, out)
    if launched is not None:
        launched()
    time.sleep(wait_s)
    release(flag.data_ptr())
    torch.cuda.synchronize()
    return time.monotonic() - started


def release(flag_address: int) -> None:
    """Set the int32 at device address ``flag_address`` to 1 while a kernel spins on it: a DMA
    copy from pinned memory on a non-blocking stream of its own (a copy from pageable memory, or
    on a stream that waits for the legacy default stream, would wait for the spinning kernel)."""
    import cupy

    runtime: Any = cupy.cuda.runtime
    one = cupy.cuda.alloc_pinned_memory(4)
    ctypes.c_int32.from_address(one.ptr).value = 1
    stream = cupy.cuda.Stream(non_blocking=True)
    runtime.memcpyAsync(flag_address, one.ptr, 4, runtime.memcpyHostToDevice, stream.ptr)
    stream.synchronize()


def _named(name: str, build: Callable[[], PrimFunc]) -> Callable[[], PrimFunc]:
    """A builder whose kernel carries ``name`` as its symbol, so compile labels show it."""

    def build_named() -> PrimFunc:
        return build().with_attr("global_symbol", name)

    return build_named


KERNELS: Mapping[str, DemoKernel] = MappingProxyType(
    {
        kernel.name: kernel
        for kernel in (
            DemoKernel("vector_add", "fp16 elementwise add, 1024x1024", vector_add),
            DemoKernel("gemm", "fp16 GEMM 1024^3, 128x128x32 tiles, 3 stages", gemm),
            DemoKernel("softmax", "fp16 row softmax, 1024x1024, fp32 reductions", softmax),
            DemoKernel("gemm_relu", "fp16 GEMM 1024^3 with fused bias and ReLU", gemm_relu),
            DemoKernel("traced_gemm", "the GEMM with IKET ranges and marks", traced_gemm, traced=True),
            DemoKernel(
                "slow_gemm",
                f"the GEMM with {SLOWED_PASS} slowed down",
                _named("slow_gemm", gemm),
                slowed_pass=SLOWED_PASS,
            ),
            DemoKernel(
                "stuck_gemm",
                f"the GEMM stuck in {WAITING_PASS}, a pass of the demo's own, until aborted",
                _named("stuck_gemm", gemm),
                waits=True,
            ),
            DemoKernel(
                "layout_conflict",
                "two GEMM results added with one transposed",
                layout_conflict,
                fails_in=LAYOUT_CONFLICT_PASS,
            ),
            DemoKernel(
                "nvcc_error",
                f"calls the undeclared device function {MISSING_DEVICE_FUNCTION}",
                nvcc_error,
                fails_in="nvcc",
            ),
        )
    }
)
"""Every demo kernel by name, in the order a demo shows them."""


def kernel(name: str) -> DemoKernel:
    """The registry entry for ``name``; raises ``UnknownKernelError`` for any other name."""
    try:
        return KERNELS[name]
    except KeyError:
        raise UnknownKernelError(name) from None


def build(name: str) -> PrimFunc:
    """A fresh ``T.prim_func`` of the named kernel."""
    return kernel(name).build()


def lower(
    name: str,
    *,
    slow_seconds: float = DEFAULT_SLOW_SECONDS,
    reached: threading.Event | None = None,
    note: str | None = None,
) -> str:
    """Run TileLang's full pass pipeline and CUDA codegen on the named kernel, without nvcc.

    Returns the generated CUDA source. The compile is labelled
    ``stage=lower, kernel=<name>, target=sm_90a`` for pass instrumentation tools, as
    ``tilelang.compile`` labels its own. A failing pass raises TileLang's own exception.
    ``stuck_gemm`` sets ``reached`` once its compile puts ``WAITING_PASS`` in its pipeline, and
    never returns: it raises once that pass is aborted. ``note`` (``key=value``) ends the label,
    where the tree shows it: why nvcc is not run, say.
    """
    entry = kernel(name)
    tilelang.disable_cache()
    target = tvm.target.Target(dict(TARGET))
    label = f"stage=lower, kernel={name}, target={TARGET['arch']}" + (f", {note}" if note else "")
    with (
        _iket_session_if(entry),
        _slowed_if(entry, slow_seconds),
        _waiting_if(entry, reached),
        compile_pass_instrumentation(name=name),
        tvm.transform.PassContext(opt_level=3, instruments=create_pass_instruments(context=label)),
        target,
    ):
        func = entry.build()
        artifact = tilelang.lower(func, target=target, enable_device_compile=False)
    return str(artifact.kernel_source)


def printed_around(name: str, pass_name: str) -> dict[str, str]:
    """The TVMScript of the named kernel's module before and after ``pass_name`` (keys ``before``
    and ``after``), as TVM prints it while lowering the kernel as :func:`lower` does."""
    texts: dict[str, str] = {}

    @tvm.instrument.pass_instrument
    class Capture:
        def run_before_pass(self, mod: Any, info: Any) -> None:
            if str(info.name) == pass_name:
                texts["before"] = mod.script()

        def run_after_pass(self, mod: Any, info: Any) -> None:
            if str(info.name) == pass_name:
                texts["after"] = mod.script()

    tilelang.disable_cache()
    target = tvm.target.Target(dict(TARGET))
    with tvm.transform.PassContext(opt_level=3, instruments=[Capture()]), target:
        tilelang.lower(build(name), target=target, enable_device_compile=False)
    return texts


def compile(name: str, *, slow_seconds: float = DEFAULT_SLOW_SECONDS) -> str:
    """Compile the named kernel as a user would, with ``tilelang.compile``: passes, codegen, nvcc.

    Returns the CUDA source nvcc accepted. A failing pass raises TileLang's own exception; nvcc
    rejecting the source raises ``RuntimeError`` holding the source and nvcc's error text.
    Loading the result onto a GPU is left out, so this works on a machine without one.
    """
    return str(compiled_kernel(name, slow_seconds=slow_seconds).get_kernel_source())


def compiled_kernel(name: str, *, slow_seconds: float = DEFAULT_SLOW_SECONDS) -> Any:
    """:func:`compile`, returning TileLang's kernel object (callable on a GPU)."""
    entry = kernel(name)
    tilelang.disable_cache()
    with _iket_session_if(entry), _slowed_if(entry, slow_seconds), _waiting_if(entry, None):
        return tilelang.compile(entry.build(), target=dict(TARGET))


def gpu_name() -> str | None:
    """The CUDA device kernels would run on, or None where there is none (or no torch)."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return str(torch.cuda.get_device_name())


def run_gemm(compiled: Any, launches: int, size: int = 1024, wait_s: float = DEFAULT_WAIT_SECONDS) -> float:
    """Launch a compiled ``size``^3 fp16 GEMM (``gemm`` or ``traced_gemm``) ``launches`` times on
    the GPU; the largest error of its result relative to torch's, as a fraction of the largest value.
    With ``wait_s`` (the demo's traced kernels), then also compile and launch :func:`waiting_steps`,
    whose block :data:`WAITING_BLOCK` waits ``wait_s`` seconds before the program releases it."""
    import torch

    if wait_s > 0 and importlib.util.find_spec("cupy") is None:
        wait_s = 0.0  # the flag is set through CuPy: without it the waiting kernel would never end
    if wait_s > 0:
        waiting = compile_waiting()

    a = torch.randn(size, size, dtype=torch.float16, device="cuda")
    b = torch.randn(size, size, dtype=torch.float16, device="cuda")
    c = torch.empty(size, size, dtype=torch.float16, device="cuda")
    for _ in range(launches):
        compiled(a, b, c)
    torch.cuda.synchronize()
    reference = a.float() @ b.float()
    error = float((c.float() - reference).abs().max() / reference.abs().max())
    if wait_s > 0:
        run_waiting(waiting, wait_s)
    return error


def _iket_session_if(entry: DemoKernel) -> AbstractContextManager[Any]:
    if not entry.traced:
        return nullcontext()
    from tilelang.tools.cuda import iket

    return iket.session()  # type: ignore[no-any-return]


def _slowed_if(entry: DemoKernel, seconds: float) -> AbstractContextManager[None]:
    """``slowed_pass`` for a kernel that has one, else nothing."""
    return nullcontext() if entry.slowed_pass is None else slowed_pass(entry.slowed_pass, seconds)


@contextmanager
def slowed_pass(pass_name: str, seconds: float) -> Iterator[None]:
    """Make the TileLang pass ``pass_name`` (e.g. ``"tl.InjectSoftwarePipeline"``) take ``seconds`` longer.

    Inside the block, ``tilelang.transform``'s factory for that pass makes a pass with the same
    name that sleeps, then does the real pass's work, so every instrumentation tool sees one
    pass of that name, ``seconds`` slower, at its usual place. Every run of that pass is slowed,
    in every compile of the process meanwhile, so keep other threads from compiling. The factory
    is restored on exit, also when the compile fails.
    """
    attribute = pass_name.removeprefix("tl.")
    original: Callable[..., Any] | None = getattr(tilelang.transform, attribute, None)
    if original is None or pass_name != f"tl.{attribute}":
        raise ValueError(f"{pass_name!r} is not a pass of tilelang.transform")

    def make_slowed(*args: Any, **kwargs: Any) -> Any:
        real = original(*args, **kwargs)

        def run(mod: Any, context: Any) -> Any:
            time.sleep(seconds)
            with _uninstrumented(context):
                return real(mod)

        return tvm.transform.module_pass(run, opt_level=0, name=str(real.info.name))

    setattr(tilelang.transform, attribute, make_slowed)
    try:
        yield
    finally:
        setattr(tilelang.transform, attribute, original)


class WaitEnded(RuntimeError):
    """The program ended while a compile waited in ``WAITING_PASS``: that compile fails with it."""


_program_ends = threading.Event()
"""Set by :func:`end_waiting`, so that every ``WAITING_PASS`` lets its compile go."""


def wait_for_abort(poll_s: float = 0.2) -> Any:
    """The demo's stuck pass (``WAITING_PASS``): a module pass that never returns by itself.

    It waits ``poll_s`` at a time, so an abort ends it within that long: ``CompileAborted`` is
    raised in its thread at its next bytecode (or by the agent's signal on the main thread). When
    the program is about to end (:func:`end_waiting`) it raises :class:`WaitEnded`, so that no
    thread is left inside a compile as the interpreter shuts down. It is made by a factory, as
    TileLang makes its own passes, so that ``iket-tui repro --stuck`` can make it again from the
    arguments the agent sees.
    """

    @tvm.transform.module_pass(opt_level=0, name=WAITING_PASS)
    def wait_until_aborted(mod: Any, context: Any) -> Any:
        while not _program_ends.wait(poll_s):  # the demo's stuck pass: it waits here until aborted
            pass
        raise WaitEnded(f"the program ended while its compile waited in {WAITING_PASS}")

    return wait_until_aborted


def end_waiting() -> None:
    """Let every compile waiting in ``WAITING_PASS`` fail with :class:`WaitEnded` (the program ends)."""
    _program_ends.set()


_waiting_here = threading.local()
"""This thread's compile runs ``WAITING_PASS`` (``made``: a callable that makes it; ``reached``:
an event set once it is put in the pipeline)."""

_waiting_hook: list[Callable[..., Any]] = []
"""TileLang's own factory of ``WAITS_BEFORE``, once :func:`_install_waiting_hook` replaced it."""


def _install_waiting_hook() -> None:
    """Make ``tilelang.transform``'s factory of ``WAITS_BEFORE`` put ``WAITING_PASS`` first in the
    threads that ask for it (:func:`waiting_in_this_thread`), and only in those, for the rest of
    the process: other threads compile meanwhile, with their own swaps of other factories."""
    if _waiting_hook:
        return
    attribute = WAITS_BEFORE.removeprefix("tl.")
    original: Callable[..., Any] = getattr(tilelang.transform, attribute)
    _waiting_hook.append(original)

    def waiting_first(*args: Any, **kwargs: Any) -> Any:
        real = original(*args, **kwargs)
        made: Callable[[], Any] | None = getattr(_waiting_here, "made", None)
        if made is None:
            return real
        _waiting_here.reached.set()
        waiting = made()
        return lambda mod: real(waiting(mod))  # TileLang only calls it: the two passes run side by side

    setattr(tilelang.transform, attribute, waiting_first)


@contextmanager
def waiting_in_this_thread(reached: threading.Event | None = None) -> Iterator[None]:
    """Inside the block, this thread's compiles run ``WAITING_PASS`` just before ``WAITS_BEFORE``,
    and wait there until aborted; ``reached`` is set once a compile puts it in its pipeline."""
    _install_waiting_hook()
    _waiting_here.made = wait_for_abort
    _waiting_here.reached = reached or threading.Event()
    try:
        yield
    finally:
        _waiting_here.made = None


def _waiting_if(entry: DemoKernel, reached: threading.Event | None) -> AbstractContextManager[None]:
    """``waiting_in_this_thread`` for a kernel that waits, else nothing."""
    return waiting_in_this_thread(reached) if entry.waits else nullcontext()


def _uninstrumented(context: Any) -> Any:
    """A pass context like ``context`` but with no instruments, so the real pass reports nothing twice."""
    return tvm.transform.PassContext(
        opt_level=context.opt_level,
        required_pass=list(context.required_pass),
        disabled_pass=list(context.disabled_pass),
        config=dict(context.config),
    )


def nvcc_available() -> bool:
    """Whether TileLang finds nvcc, so that ``compile`` can run; ``lower`` never needs it."""
    from tilelang.contrib.nvcc import get_nvcc_compiler

    try:
        return os.path.isfile(get_nvcc_compiler())
    except Exception:
        return False
