"""Compiles in TileLang's thread pools, then waits for the file named by IKET_TEST_GATE.

``pools.py par_compile``: ``tilelang.par_compile`` of four kernels for sm_90a on four workers,
one of them failing in ``tl.LayoutInference``. ``pools.py autotune``: the autotuner over four
GEMM tile shapes on its pool of compile workers, one shape that no warp partition fits; there
is no GPU to time the kernels on, so each compiled candidate is "timed" by the length of its
CUDA source instead (everything before that, lowering and nvcc, is TileLang's own).

Each prints what came of it as one JSON line, then waits at the gate so that a client can ask
the agent for the IR of every compile before the program ends.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import kernels
import tilelang
import tilelang.language as T
from tilelang import tvm
from tilelang.autotuner import AutoTuner

ADD_SIZES = (1024, 2048, 4096)
TILES = (
    {"block_M": 64, "block_N": 64},
    {"block_M": 128, "block_N": 64},
    {"block_M": 16, "block_N": 16},
    {"block_M": 64, "block_N": 128},
)

tilelang.disable_cache()
target = tvm.target.Target(kernels.SM90)


def gemm(block_M: int, block_N: int, m: int = 256, n: int = 256, k: int = 256, block_K: int = 32) -> Any:
    @T.prim_func
    def gemm(
        A: T.Tensor((m, k), "float16"),
        B: T.Tensor((k, n), "float16"),
        C: T.Tensor((m, n), "float"),
    ) -> None:
        with T.Kernel(T.ceildiv(n, block_N), T.ceildiv(m, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            C_l = T.alloc_fragment((block_M, block_N), "float")
            T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(k, block_K), num_stages=2):
                T.copy(A[by * block_M, ko * block_K], A_s)
                T.copy(B[ko * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * block_M, bx * block_N])

    return gemm


class SourceLengthTuner(AutoTuner):  # type: ignore[misc]
    """The autotuner, with a candidate's CUDA source length standing in for its measured latency."""

    def _benchmark_target(self, jit_kernel: Any, **_: Any) -> tuple[float, None]:
        return float(len(jit_kernel.get_kernel_source())), None


mode = sys.argv[1]
if mode == "par_compile":
    funcs = [
        kernels.add(ADD_SIZES[0], 256),
        kernels.add(ADD_SIZES[1], 128),
        kernels.layout_conflict(),
        kernels.add(ADD_SIZES[2], 512),
    ]
    compiled = tilelang.par_compile(funcs, target=target, num_workers=len(funcs), ignore_error=True)
    print(json.dumps({"compiled": [kernel is not None for kernel in compiled]}), flush=True)
elif mode == "autotune":
    tuner = (
        SourceLengthTuner.from_kernel(gemm, list(TILES))
        .set_compile_args(target=target, execution_backend="tvm_ffi")
        .set_profile_args(skip_check=True)
    )
    result = tuner.run(warmup=1, rep=1, timeout=0)
    print(json.dumps({"best": result.config}), flush=True)
else:
    raise SystemExit(f"unknown mode {mode!r}")
kernels.wait_for(Path(os.environ["IKET_TEST_GATE"]))
