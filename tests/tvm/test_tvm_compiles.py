"""Plain Apache TVM compiles of a real program under the agent, as the tree shows them: a Relax
model and a TIR kernel compiled for this CPU, each labelled by what it compiles and the target,
every pass nested as TVM ran it; a compile that fails in one of TVM's passes and one that fails
in a pass of the program's own, each failure on its pass with the module it was given; and the
IR around a pass, asked of the live target."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from tvm_target import Watched, passes_of, path_of, watch

from iket_tui.model.nodes import DONE, FAILED, INCOMPLETE
from iket_tui.protocol import messages as m
from iket_tui.sources.ir import fetch_ir
from iket_tui.sources.socket import SocketSource

pytestmark = pytest.mark.tvm

COMPILES = ("mlp", "vector_add", "bad_pipeline", "rejected_mlp")


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Watched]:
    gate = tmp_path_factory.mktemp("gate") / "done"
    target = watch("compiles.py", ",".join(COMPILES), compiles=len(COMPILES), gate=gate)
    try:
        yield target
    finally:
        target.kill()


def test_a_relax_model_is_one_compile_named_by_its_module_and_target(watched: Watched) -> None:
    comp = watched.compile_named("MLP")
    assert (comp.title, comp.target, comp.label) == ("MLP", "llvm", "tvm.compile, kernel=MLP, target=llvm")
    assert comp.status is DONE and comp.error is None
    passes = passes_of(comp)
    assert all(node.status is DONE for node in passes)
    by_name = {node.name: node for node in passes}
    assert path_of(by_name["LegalizeOps"]) == ["_pipeline", "sequential", "LegalizeOps"]
    assert by_name["LegalizeOps"].phase == "relax.build"
    assert path_of(by_name["s_tir.InsertHoistIfThenElse"]) == [
        "_pipeline",
        "sequential",
        "s_tir.HoistIfThenElse",
        "s_tir.InsertHoistIfThenElse",
    ]
    assert by_name["tirx.FlattenBuffer"].phase == "tirx.build"  # the model's kernels, lowered by relax.build
    names = [node.name for node in passes]
    assert names.index("VMShapeLower") < names.index("tirx.BindTarget") < names.index("tirx.LowerIntrin")
    assert [(step.name, step.status) for step in comp.codegen_steps] == [("target.build.llvm", DONE)]


def test_a_tir_kernel_is_one_compile_with_tirs_pipeline(watched: Watched) -> None:
    comp = watched.compile_named("vector_add")
    assert (comp.target, comp.label) == ("llvm", "tvm.compile, kernel=vector_add, target=llvm")
    assert comp.status is DONE
    passes = passes_of(comp)
    top = [node.name for node in passes if node.depth == 0]
    assert top == ["tirx.BindTarget", "_pipeline", "tirx.Filter", "tirx.Filter", "sequential"]
    hoist = next(node for node in passes if node.name == "s_tir.HoistIfThenElse")
    assert [child.name for child in hoist.children] == [
        "s_tir.InsertHoistIfThenElse",
        "s_tir.StmtSimplify",
        "tirx.RemoveNoOp",
    ]
    assert {node.phase for node in passes} == {"tirx.build"}
    assert len(comp.context_order) == 1, "run in a copy of TVM's default pass context"


def test_a_compile_that_fails_in_a_tvm_pass_shows_the_pass_and_the_module_it_was_given(watched: Watched) -> None:
    comp = watched.compile_named("bad_pipeline")
    assert comp.status is FAILED and comp.stage == "pass"
    assert comp.error is not None
    assert comp.error.startswith("ValueError: Check failed: (pipeline_body_seq) is false")
    failing = comp.failing
    assert failing is not None and failing.name == "s_tir.InjectSoftwarePipeline"
    assert failing.status is FAILED
    assert path_of(failing) == ["_pipeline", "sequential", "s_tir.InjectSoftwarePipeline"]
    assert [node.status for node in (failing.parent, failing.parent.parent)] == [INCOMPLETE, INCOMPLETE]  # type: ignore[union-attr]
    assert "tirx.FlattenBuffer" not in [node.name for node in passes_of(comp)], "no pass after the failure"

    failure = comp.failure
    assert failure is not None
    assert (failure["name"], failure["seq"], failure["compiler"]) == (failing.name, failing.seq, "tvm")
    assert "software_pipeline_stage" in failure["ir_script"]
    assert json.loads(failure["ir_json"])["root_index"] >= 0
    assert json.loads(failure["target"])["kind"] == "llvm"


def test_a_compile_that_fails_in_a_pass_of_the_programs_own_shows_its_error(watched: Watched) -> None:
    comp = watched.compile_named("MLP", index=1)
    assert comp.status is FAILED
    failing = comp.failing
    assert failing is not None and path_of(failing) == ["demo.pipeline", "demo.RejectRelu"]
    assert comp.error == "ValueError: this deployment has no ReLU kernel: rewrite the model without R.nn.relu"
    assert comp.traceback is not None and 'raise ValueError("this deployment has no ReLU kernel' in comp.traceback
    assert comp.failure is not None and "R.nn.relu" in comp.failure["ir_script"]


def test_the_ir_around_a_pass_is_given_on_request(watched: Watched) -> None:
    comp = watched.compile_named("MLP")
    legalize = next(node for node in passes_of(comp) if node.name == "LegalizeOps")
    source = SocketSource(watched.path)
    try:
        source.connect()
        answer = fetch_ir(source, comp.id, legalize.seq, "both")
    finally:
        source.close_and_wait("asked")
    assert answer["name"] == "LegalizeOps"
    assert "R.matmul(" in answer["before"] and "R.nn.relu(" in answer["before"]
    assert "R.matmul(" not in answer["after"] and "R.call_tir(cls.matmul" in answer["after"]
    assert "def matmul(" in answer["after"], "the TIR kernel LegalizeOps made"


def test_every_compile_is_told_whole(watched: Watched) -> None:
    begins = [msg for msg in watched.messages if msg["type"] == m.COMPILE_BEGIN]
    assert [(msg["kernel"], msg["compiler"]) for msg in begins] == [
        ("MLP", "tvm"),
        ("vector_add", "tvm"),
        ("bad_pipeline", "tvm"),
        ("MLP", "tvm"),
    ]
    assert watched.session.counters.malformed == 0
    said = [line.split(" ", 2)[:2] for line in watched.release().splitlines() if line.startswith(("ok ", "failed "))]
    assert said == [["ok", "mlp"], ["ok", "vector_add"], ["failed", "bad_pipeline"], ["failed", "rejected_mlp"]]
