"""A program that compiles as TileLang users do, under IKET_TUI=1: the demo's vector add lowered
four times from one function (the third with one pass-config key changed, the fourth twice as
tall, with the third's configuration), a ``@tilelang.jit``
kernel called with its sizes, and a pass pipeline of its own (a ``Sequential`` in a
``PassContext``, outside TileLang's entry points) with a pass of its own that waits for the file
IKET_TEST_GATE.slow (a minute at most). It waits for the file IKET_TEST_GATE before it starts,
and says ``done`` at the end."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import tilelang
import tilelang.language as T
import tvm

from iket_tui.demo import kernels

TARGET = {"kind": "cuda", "arch": "sm_90a"}
CHANGED = {"tl.disable_tma_lower": True}
STEPS: list[tuple[dict[str, Any], int]] = [({}, 1024), ({}, 1024), (CHANGED, 1024), (CHANGED, 2048)]


def lower_step(config: dict[str, Any], rows: int) -> None:
    target = tvm.target.Target(TARGET)
    with tvm.transform.PassContext(opt_level=3, config=config), target:
        tilelang.lower(kernels.vector_add(m=rows), target=target, enable_device_compile=False)


@tilelang.jit(target=TARGET, out_idx=[-1])
def scaled_add(m: int, n: int, block: int = 128) -> Any:
    @T.prim_func
    def main(A: T.Tensor((m, n), T.float16), B: T.Tensor((m, n), T.float16), C: T.Tensor((m, n), T.float16)) -> None:
        with T.Kernel(T.ceildiv(n, block), m, threads=block) as (bx, by):
            for i in T.Parallel(block):
                C[by, bx * block + i] = A[by, bx * block + i] + B[by, bx * block + i]

    return main


@tvm.transform.module_pass(opt_level=0, name="own.SlowCheck")
def slow_check(mod: Any, ctx: Any) -> Any:
    released = Path(os.environ["IKET_TEST_GATE"] + ".slow")
    deadline = time.monotonic() + 60
    while not released.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return mod


def own_pipeline() -> None:
    mod = tvm.IRModule({"main": kernels.build("vector_add")})
    pipeline = tvm.transform.Sequential(
        [tvm.tirx.transform.Simplify(), slow_check, tvm.tirx.transform.RemoveNoOp()], name="own.Cleanup"
    )
    with tvm.transform.PassContext(opt_level=3):
        pipeline(mod)


gate = Path(os.environ["IKET_TEST_GATE"])
while not gate.exists():
    time.sleep(0.02)
tilelang.disable_cache()
for config, rows in STEPS:
    lower_step(config, rows)
scaled_add(1024, 1024)
own_pipeline()
print("done", flush=True)
