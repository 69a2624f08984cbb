"""Small real TileLang kernels and ways to make their compiles slow or fail, for the agent's target programs."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tilelang
import tilelang.language as T
import tvm_ffi
from tilelang import tvm

SM90 = {"kind": "cuda", "arch": "sm_90a"}
SLOW_PASS = "iket_test.SlowLayoutInference"
REFUSING_PASS = "iket_test.RefusingLowerIntrin"


def gemm(m: int = 256, n: int = 256, k: int = 256, bm: int = 128, bn: int = 128, bk: int = 32) -> Any:
    @T.prim_func
    def gemm(
        A: T.Tensor((m, k), "float16"),
        B: T.Tensor((k, n), "float16"),
        C: T.Tensor((m, n), "float"),
    ) -> None:
        with T.Kernel(T.ceildiv(n, bn), T.ceildiv(m, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float")
            T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(k, bk), num_stages=3):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])

    return gemm


def add(n: int = 1024, block: int = 256) -> Any:
    @T.prim_func
    def add(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")) -> None:
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] + B[bx * block + i]

    return add


def layout_conflict(size: int = 128) -> Any:
    """Adds a transposed fragment after two GEMMs: fails in ``tl.LayoutInference``."""

    @T.prim_func
    def layout_conflict(
        A: T.Tensor((size, size), "float16"),
        B: T.Tensor((size, size), "float16"),
        C: T.Tensor((size, size), "float"),
    ) -> None:
        with T.Kernel(1, 1, threads=128) as (_bx, _by):
            A_s = T.alloc_shared((size, size), "float16")
            B_s = T.alloc_shared((size, size), "float16")
            C_l = T.alloc_fragment((size, size), "float")
            D_l = T.alloc_fragment((size, size), "float")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_l, clear_accum=True)
            T.gemm(A_s, B_s, D_l, clear_accum=True)
            for i, j in T.Parallel(size, size):
                C_l[i, j] = C_l[i, j] + D_l[j, i]
            T.copy(C_l, C)

    return layout_conflict


def lower(func: Any) -> Any:
    """Lower for sm_90a without a GPU and without nvcc."""
    target = tvm.target.Target(SM90)
    with target:
        return tilelang.lower(func, target=target, enable_device_compile=False)


def wait_for(gate: Path, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not gate.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{gate} never appeared")
        time.sleep(0.01)


def layout_inference_held_at(gate: Path) -> Callable[..., Any]:
    """``tl.LayoutInference`` wrapped in a pass that, after running it, waits until ``gate`` exists."""
    real = tilelang.transform.LayoutInference

    def held(*args: Any, **kwargs: Any) -> Any:
        inner = real(*args, **kwargs)

        def run(mod: Any, _ctx: Any) -> Any:
            mod = inner(mod)
            wait_for(gate)
            return mod

        return tvm.transform.module_pass(run, opt_level=0, name=SLOW_PASS)

    return held


def refusing(name: str) -> Callable[..., Any]:
    """A pass factory whose pass raises ``ValueError``: a failure outside TileLang's pass pipeline."""

    def make(*_args: Any, **_kwargs: Any) -> Any:
        def run(mod: Any, _ctx: Any) -> Any:
            raise ValueError("iket test: this pass refuses the module")

        return tvm.transform.module_pass(run, opt_level=0, name=name)

    return make


def break_generated_cuda() -> None:
    """From now on the generated CUDA source ends in a line nvcc rejects."""

    def spoil(code: str, _target: Any) -> str:
        return code + "\nthis is not cuda;\n"

    tvm_ffi.register_global_func("tilelang_callback_cuda_postproc", f=spoil, override=True)
