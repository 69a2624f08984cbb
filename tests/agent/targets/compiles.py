"""A target that compiles under IKET_TUI=1: a held pass, a good GEMM, a layout failure, a pass failing
outside the pass pipeline, an nvcc failure.

The held pass waits for the file named by IKET_TEST_GATE; each failure is caught, so the
program ends normally.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import kernels
import tilelang

tilelang.disable_cache()
gate = Path(os.environ["IKET_TEST_GATE"])

real_layout_inference = tilelang.transform.LayoutInference
tilelang.transform.LayoutInference = kernels.layout_inference_held_at(gate)
try:
    kernels.lower(kernels.add())
finally:
    tilelang.transform.LayoutInference = real_layout_inference

kernels.lower(kernels.gemm())

try:
    kernels.lower(kernels.layout_conflict())
except Exception as exc:
    print(f"layout_conflict failed: {type(exc).__name__}", flush=True)

real_lower_intrin = tilelang.transform.LowerIntrin
tilelang.transform.LowerIntrin = kernels.refusing(kernels.REFUSING_PASS)
try:
    kernels.lower(kernels.add())
except Exception as exc:
    print(f"add failed before codegen: {type(exc).__name__}", flush=True)
finally:
    tilelang.transform.LowerIntrin = real_lower_intrin

kernels.break_generated_cuda()
try:
    tilelang.compile(kernels.add(), target=tilelang.tvm.target.Target(kernels.SM90))
except Exception as exc:
    print(f"add failed in nvcc: {type(exc).__name__}", flush=True)

print("compiles done", flush=True)
sys.exit(0)
