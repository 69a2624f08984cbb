# mypy: disable-error-code="valid-type, untyped-decorator"
"""A TileLang program whose nvcc never gets anywhere: ``tilelang.compile`` of an elementwise
kernel for ``sm_90a`` runs the ``nvcc`` of ``CUDA_HOME`` (the test's fake one), which starts a
``ptxas`` that spins on the CPU until the file named by ``IKET_TEST_GATE`` exists (or 60 s),
then fails. The compile fails in codegen; the program catches it, prints ``compile failed``
and ends normally."""

from __future__ import annotations

import tilelang
import tilelang.language as T
from tilelang import tvm


@T.prim_func
def add(A: T.Tensor((1024,), "float32"), B: T.Tensor((1024,), "float32"), C: T.Tensor((1024,), "float32")) -> None:
    with T.Kernel(4, threads=256) as bx:
        for i in T.Parallel(256):
            C[bx * 256 + i] = A[bx * 256 + i] + B[bx * 256 + i]


tilelang.disable_cache()
try:
    tilelang.compile(add, target=tvm.target.Target({"kind": "cuda", "arch": "sm_90a"}))
except Exception as exc:
    print(f"compile failed: {type(exc).__name__}", flush=True)
