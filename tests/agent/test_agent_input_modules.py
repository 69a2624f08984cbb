"""The diff of a kernel's input modules between two compiles, with real TileLang modules: told
only when the modules differ and the IR is kept (a client attached), held for one kernel at a
time, and let go of when nothing is kept."""

from __future__ import annotations

import pytest

pytest.importorskip("tilelang")

from iket_tui.agent.compile_origin import InputModules, inputs
from iket_tui.demo import kernels

pytestmark = pytest.mark.tilelang

KEY = ("lower_step", "train.py", "vector_add")


def module(rows: int) -> tuple[str, object]:
    import tvm

    mod = tvm.IRModule({"vector_add": kernels.vector_add(m=rows)})
    return str(inputs(mod, None)["input_hash"]), mod


def test_another_module_of_the_same_kernel_is_told_as_a_diff_of_its_tvmscript() -> None:
    held = InputModules()
    small, large = module(1024), module(2048)
    assert small[0] != large[0]
    assert held.diff(KEY, *small, keep=True) is None  # the kernel's first compile
    assert held.diff(KEY, *small, keep=True) is None  # the same module again
    diff = held.diff(KEY, *large, keep=True)
    assert diff is not None and diff.startswith("--- before\n+++ now\n@@ ")
    assert any(line.startswith("+") and "(2048, 1024)" in line for line in diff.splitlines())
    assert held.diff(("eval_step", "train.py", "vector_add"), *small, keep=True) is None  # another caller


def test_nothing_is_told_or_held_while_the_ir_is_not_kept() -> None:
    held = InputModules()
    small, large = module(1024), module(2048)
    assert held.diff(KEY, *small, keep=True) is None
    assert held.diff(KEY, *large, keep=False) is None  # no client: no diff, and the small one is let go
    assert held.diff(KEY, *small, keep=True) is None  # so the next compile has nothing to compare with
