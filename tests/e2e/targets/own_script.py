"""A program whose pass of its own is defined in this, its main script, which has no main guard:
``python own_script.py`` runs all of it. The pass says what it sees of its pass context, then
loops in Python; the program lowers the demo's GEMM with that pass under a pass context of its
own (opt level 2, a configuration, a required and a disabled pass), says what became of it,
lowers vector_add, and waits for the file ``IKET_TEST_GATE``. A reproducer of the pass must take
the pass from here without running the program, though the program's module is ``mod``, as the
pass's first parameter is."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import tilelang
from hang_passes import before_pipelining
from tilelang import tvm

from iket_tui.agent import CompileAborted
from iket_tui.demo import kernels

SPIN = "own_script.Spin"
FIRST_TURN = 0
CONFIG = {"tl.disable_tma_lower": True, "tirx.disable_vectorize": True}
CONTEXT = {"opt_level": 2, "required_pass": [SPIN], "disabled_pass": ["own_script.NeverRuns"]}

print("the program runs", flush=True)  # a reproducer that ran this script would say so too


def seen(ctx: Any) -> str:
    """What a pass sees of its pass context, in one line."""
    config = sorted(str(key) for key, _ in ctx.config.items())
    passes = f"required={list(ctx.required_pass)} disabled={list(ctx.disabled_pass)}"
    return f"opt_level={ctx.opt_level} config={config} {passes}"


@tvm.transform.module_pass(opt_level=0, name=SPIN)
def spin_in_script(mod: Any, ctx: Any) -> Any:
    print(f"context: {seen(ctx)}", flush=True)
    turns = FIRST_TURN
    while turns >= 0:  # the script's own loop that never ends
        turns += 1
    return mod


def gemm_module() -> Any:
    """The demo's GEMM, which the program builds to lower (a reproducer that ran this would say so)."""
    print("the program builds its module", flush=True)
    return kernels.kernel("gemm").build()


tilelang.disable_cache()
target = tvm.target.Target(dict(kernels.TARGET))
mod = gemm_module()  # the same name as the pass's parameter: the pass does not use this one
with before_pipelining(spin_in_script):
    try:
        with tvm.transform.PassContext(config=CONFIG, **CONTEXT), target:
            tilelang.lower(mod, target=target, enable_device_compile=False)
        print("gemm lowered", flush=True)
    except CompileAborted as exc:
        print(f"caught CompileAborted: {exc}", flush=True)
kernels.lower("vector_add")
print("vector_add lowered", flush=True)
gate = Path(os.environ["IKET_TEST_GATE"])
while not gate.exists():
    time.sleep(0.02)
