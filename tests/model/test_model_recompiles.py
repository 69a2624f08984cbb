"""Kernels compiled again: the compiles of one kernel in one process form a series, each repeat
keeps what it was given differently from the compile before it, and what the tree row, the
detail pane and the timing screen say of it is read here from the model, with the compile_begin
fields an agent sends (docs/protocol.md). Optional fields of the wrong shape are left out, and
compiles whose agent did not tell their inputs (older recordings) join no series."""

from __future__ import annotations

from typing import Any

from iket_tui.model.compile_names import compile_note, origin_fields
from iket_tui.model.recompiles import compile_count, repeat_note
from iket_tui.model.session import Session
from iket_tui.model.synthetic import Lowering
from iket_tui.protocol import messages as m

CALLER = {"function": "train_step", "file": "train.py", "line": 42}


def lowering(compile_id: int, start_ns: int, kernel: str = "gemm", **origin: Any) -> list[m.Message]:
    """A synthetic compile whose compile_begin carries ``origin``'s fields."""
    messages = Lowering(compile=compile_id, kernel=kernel, start_ns=start_ns).messages()
    return [{**msg, **origin} if msg["type"] == m.COMPILE_BEGIN else msg for msg in messages]


def applied(*compiles: list[m.Message]) -> Session:
    session = Session()
    for messages in compiles:
        session.apply(messages)
    return session


def test_three_compiles_of_one_kernel_say_how_many_and_which_config_key_changed() -> None:
    origin = {"caller": CALLER, "input_hash": "00ff", "config": {"tl.disable_tma_lower": "False"}}
    changed = {**origin, "config": {"tl.disable_tma_lower": "True", "tl.enable_fast_math": "True"}}
    session = applied(lowering(1, 0, **origin), lowering(2, 10**9, **origin), lowering(3, 2 * 10**9, **changed))
    first, second, third = session.tree.compiles

    assert compile_note(first) == "· train_step (train.py:42)  stage=jit-lower, backend=tvm_ffi  compiled 3 times"
    assert repeat_note(second) == "compiled 3 times: same target, pass config, label and input module"
    assert repeat_note(third) == "compiled 3 times: tl.disable_tma_lower, tl.enable_fast_math changed"
    assert [compile_count(comp) for comp in (first, second, third)] == ["(1 of 3)", "(2 of 3)", "(3 of 3)"]
    fields = dict(origin_fields(third))
    assert fields["called from"] == "train_step (train.py:42)"
    assert fields["compiled"] == "3 times in this process; this is compile 3 of them"
    assert fields["changed since #2"] == (
        "pass config tl.disable_tma_lower False → True; pass config tl.enable_fast_math (unset) → True"
    )


def test_a_new_input_module_or_jit_arguments_are_named_as_what_changed() -> None:
    jit = {"name": "matmul", "args": "1024x1024 f16"}
    session = applied(
        lowering(1, 0, jit=jit, input_hash="aa", caller=CALLER),
        lowering(2, 10**9, jit={**jit, "args": "2048x1024 f16"}, input_hash="bb", caller=CALLER),
    )
    again = session.tree.compiles[1]
    assert again.shown_title == "matmul(2048x1024 f16)" and again.title == "gemm"
    assert repeat_note(again) == "compiled 2 times: arguments, input module changed"
    assert dict(origin_fields(again))["changed since #1"] == (
        "jit arguments (1024x1024 f16) → (2048x1024 f16); input module structural hash aa → bb"
    )


def test_other_kernels_and_other_callers_start_series_of_their_own() -> None:
    elsewhere = {**CALLER, "function": "eval_step"}
    session = applied(
        lowering(1, 0, input_hash="aa", caller=CALLER),
        lowering(2, 10**9, kernel="softmax", input_hash="aa", caller=CALLER),
        lowering(3, 2 * 10**9, input_hash="aa", caller=elsewhere),
    )
    assert [repeat_note(comp) for comp in session.tree.compiles] == ["", "", ""]


def test_compiles_whose_agent_did_not_tell_their_inputs_are_not_counted() -> None:
    session = applied(lowering(1, 0), lowering(2, 10**9))
    assert [compile_note(comp) for comp in session.tree.compiles] == ["stage=jit-lower, backend=tvm_ffi"] * 2
    assert origin_fields(session.tree.compiles[1]) == []


def test_optional_fields_of_the_wrong_shape_are_left_out_and_the_compile_stays() -> None:
    session = applied(lowering(1, 0, caller=["train.py", 42], jit="matmul", config={"k": 1}, input_hash=7))
    (comp,) = session.tree.compiles
    assert session.counters.malformed == 0
    assert comp.shown_title == "gemm" and comp.origin is not None and comp.origin.where is None
    assert dict(origin_fields(comp)) == {"pass config": "none"}


def test_a_pipeline_of_the_programs_own_says_so_in_the_detail_pane() -> None:
    session = applied(lowering(1, 0, kind=m.COMPILE_KIND_PIPELINE, caller=CALLER, config={}, input_hash="aa"))
    fields = dict(origin_fields(session.tree.compiles[0]))
    assert fields["kind"] == "a pass pipeline the program ran itself"
    assert fields["input hash"] == "aa"
