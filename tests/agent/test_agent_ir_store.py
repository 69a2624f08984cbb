"""The IR store's bounds, in a real target lowering the demo GEMM: the last N compiles by count,
a number of bytes by measured heap, and what a late request is told about a released compile.
A released compile's modules are really freed: the heap stays flat while compiles go on. The
count is kept when a compile ends: the oldest stays answerable while the next compile runs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import weakref
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("tilelang")

from iket_tui.agent.ir_store import IRStore, IRUnavailable, parse_size

TARGET = Path(__file__).parent / "targets" / "ir_held.py"
WAIT_S = 300.0


def _run(compiles: int, **bounds: str) -> dict[str, Any]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("IKET_TUI")}
    env.update({"IKET_TUI_IR": "always", **bounds})  # the target has no client attached
    done = subprocess.run(
        [sys.executable, str(TARGET), str(compiles)], capture_output=True, text=True, timeout=WAIT_S, env=env
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    assert found["measured"], "glibc says how much heap is in use"
    return found


def test_the_last_compiles_are_held_by_count_and_the_others_freed() -> None:
    found = _run(5, IKET_TUI_IR_COMPILES="2")
    answers = found["answers"]
    assert [answers[str(c)] for c in (4, 5)] == ["held", "held"]
    for released in (1, 2, 3):
        assert answers[str(released)] == f"compile {released} is no longer held (the agent keeps the last 2)"
    sizes = [size for each in found["after_each"] for size in each["held"].values()]
    assert all(size > 0 for size in sizes), sizes
    heaps = [each["heap"] for each in found["after_each"]]
    assert heaps[4] - heaps[1] < min(sizes), "three more compiles, three released: the heap does not grow"


def test_the_ir_held_stays_within_the_memory_bound() -> None:
    bound = 1000 * 1024
    found = _run(4, IKET_TUI_IR_MEMORY="1000K")
    for each in found["after_each"]:
        assert sum(each["held"].values()) <= bound
        assert len(each["held"]) == 1, "a GEMM's IR takes more than half the bound"
    answers = found["answers"]
    assert answers["4"] == "held"
    for released in (1, 2, 3):
        assert answers[str(released)].startswith(
            f"compile {released} is no longer held: the IR of recent compiles is kept within 1.0 MiB "
            "(IKET_TUI_IR_MEMORY), and it held 0."
        )


def test_a_compile_larger_than_the_bound_alone_is_not_held() -> None:
    found = _run(1, IKET_TUI_IR_MEMORY="64K")
    assert found["after_each"][0]["held"] == {}
    assert "is no longer held: the IR of recent compiles is kept within 0.1 MiB" in found["answers"]["1"]


def test_no_ir_is_held_when_the_count_is_zero() -> None:
    found = _run(1, IKET_TUI_IR_COMPILES="0")
    assert found["answers"] == {"1": "this agent keeps no IR (IKET_TUI_IR_COMPILES=0)"}


def test_without_a_heap_measure_only_the_count_bounds() -> None:
    store = IRStore(limit=2, memory=1, heap_in_use=lambda: None)
    assert not store.measured
    for compile_id in (1, 2, 3):
        passes = store.passes_of(compile_id)
        assert passes is not None
        passes[1] = ["tl.Simplify", object(), object()]
        store.compile_ended(compile_id)
    assert store.held() == {2: 0, 3: 0}
    with pytest.raises(IRUnavailable, match="compile 1 is no longer held"):
        store.script(1, 1, "before")


class Module:
    """Stands for a TVM module: what the store holds by reference, and prints when asked."""


def test_the_oldest_compile_is_held_while_the_next_runs_and_freed_when_it_ends() -> None:
    store = IRStore(limit=2, memory=0, heap_in_use=lambda: None)
    alive: dict[int, weakref.ref[Module]] = {}
    for compile_id in (1, 2, 3):
        passes = store.passes_of(compile_id)
        assert passes is not None
        module = Module()
        alive[compile_id] = weakref.ref(module)
        passes[0] = ["tl.Simplify", module, module]
        del module
        if compile_id < 3:
            store.compile_ended(compile_id)
    assert store.held() == {1: 0, 2: 0, 3: None}
    assert store.script(1, 0, "before")[0] == "tl.Simplify"
    assert alive[1]() is not None
    store.compile_ended(3)
    assert store.held() == {2: 0, 3: 0}
    assert alive[1]() is None, "released when compile 3 ended, and nothing else holds its modules"
    assert alive[2]() is not None
    with pytest.raises(IRUnavailable, match=re.escape("compile 1 is no longer held (the agent keeps the last 2)")):
        store.script(1, 0, "after")


def test_a_store_that_forgot_holds_no_compile_and_keeps_its_bounds() -> None:
    store = IRStore(limit=2, memory=0, heap_in_use=lambda: None)
    for compile_id in (1, 2, 3):
        passes = store.passes_of(compile_id)
        assert passes is not None
        passes[0] = ["tl.Simplify", Module(), None]
        store.compile_ended(compile_id)
    store.forget()
    assert store.held() == {}
    for compile_id in (1, 3):
        with pytest.raises(IRUnavailable, match=f"no compile {compile_id} was seen with IR"):
            store.script(compile_id, 0, "before")
    assert store.limit == 2
    for compile_id in (4, 5, 6):
        assert store.passes_of(compile_id) is not None
        store.compile_ended(compile_id)
    assert store.held() == {5: 0, 6: 0}


def test_compiles_that_never_end_are_bounded_when_the_next_starts() -> None:
    store = IRStore(limit=2, memory=0, heap_in_use=lambda: None)
    for compile_id in (1, 2, 3, 4):
        assert store.passes_of(compile_id) is not None
    assert store.held() == {2: None, 3: None, 4: None}
    with pytest.raises(IRUnavailable, match="compile 1 is no longer held"):
        store.script(1, 0, "before")


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("4096", 4096),
        ("64K", 65536),
        ("256M", 256 << 20),
        ("1g", 1 << 30),
        ("2GiB", 2 << 30),
        ("lots", None),
        ("", None),
    ],
)
def test_memory_bounds_are_read_with_units(text: str, size: int | None) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(
    ("variable", "value", "said", "bounds"),
    [
        (
            "IKET_TUI_IR_COMPILES",
            "many",
            "IKET_TUI_IR_COMPILES must be a whole number of compiles, got 'many'",
            "8 268435456",
        ),
        (
            "IKET_TUI_IR_MEMORY",
            "lots",
            "IKET_TUI_IR_MEMORY must be a size such as 512M or 2G, got 'lots'",
            "8 268435456",
        ),
        ("IKET_TUI_IR_MEMORY", "2G", None, "8 2147483648"),
    ],
)
def test_a_bad_bound_is_said_in_one_line_and_the_default_used(
    variable: str, value: str, said: str | None, bounds: str
) -> None:
    env = {key: val for key, val in os.environ.items() if not key.startswith("IKET_TUI")}
    env[variable] = value
    code = "from iket_tui.agent.registry import registry; print(registry.ir_store.limit, registry.ir_store.memory)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=WAIT_S, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == bounds
    if said is None:
        assert done.stderr == ""
    else:
        assert done.stderr.startswith(f"iket-tui agent: {said};") and len(done.stderr.splitlines()) == 1


def test_a_running_compile_keeps_its_ir_while_later_compiles_end() -> None:
    store = IRStore(limit=2, memory=0, heap_in_use=lambda: None)
    stuck = store.passes_of(1)
    assert stuck is not None
    stuck[0] = ["demo.WaitForAbort", Module(), None]
    for compile_id in (2, 3, 4, 5):
        passes = store.passes_of(compile_id)
        assert passes is not None
        passes[0] = ["tl.Simplify", Module(), Module()]
        store.compile_ended(compile_id)
    assert store.held() == {1: None, 4: 0, 5: 0}, "the running compile and the last 2"
    assert store.script(1, 0, "before")[0] == "demo.WaitForAbort"
    with pytest.raises(IRUnavailable, match=re.escape("compile 3 is no longer held (the agent keeps the last 2)")):
        store.script(3, 0, "before")
