"""How the agent puts itself into a plain TVM program: it imports no TVM until the program does,
then watches every pass context made from then on without changing what the program's own
instruments see; contexts made before it started are watched where that changes nothing for
them; once stopped, it adds nothing to TVM's contexts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tvm_target import TARGETS, WAIT_S, Watched, passes_of, watch

from iket_tui.model.nodes import DONE

pytestmark = pytest.mark.tvm


def _without_agent(script: str) -> dict[str, Any]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("IKET_")}
    done = subprocess.run(
        [sys.executable, str(TARGETS / script)], env=env, capture_output=True, text=True, timeout=WAIT_S, check=True
    )
    found: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return found


@pytest.fixture(scope="module")
def own_context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Watched]:
    target = watch("own_context.py", compiles=2, gate=tmp_path_factory.mktemp("gate") / "done")
    try:
        yield target
    finally:
        target.kill()


def test_the_agent_imports_no_tvm_and_watches_it_once_the_program_imports_it() -> None:
    env = {**os.environ, "IKET_TUI": "1"}
    done = subprocess.run(
        [sys.executable, str(TARGETS / "imports.py")], env=env, capture_output=True, text=True, timeout=WAIT_S
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["before"] == {"tvm": False, "tvm_ffi": False, "tilelang": False}
    assert "tvm" in found["hooks_before"]  # the agent's import watchers, by the package each waits for
    assert found["watched"] == {"PassContext": True, "compile": True, "relax.build": True, "tirx.build": True}
    assert "tvm" not in found["hooks_after"], "the import hook goes once TVM is there"


def test_the_programs_own_instruments_see_what_they_see_without_the_agent(own_context: Watched) -> None:
    alone = _without_agent("own_context.py")
    watched = json.loads(own_context.release().splitlines()[-1])
    assert watched == alone
    assert alone["contexts"] == 1 and alone["timed"], "entered once; PassTimingInstrument still times the passes"

    relax_build, tir_build = own_context.session.tree.compiles
    assert relax_build.label == "relax.build, kernel=MLP, target=llvm"
    assert tir_build.label == "tvm.compile, kernel=vector_add, target=llvm"
    shown = [[node.name, node.depth] for comp in (relax_build, tir_build) for node in passes_of(comp)]
    assert shown == [[name, depth] for name, depth, _functions in alone["seen"]]
    assert {comp.status for comp in (relax_build, tir_build)} == {DONE}


def test_contexts_made_before_the_agent_started_are_watched_where_that_changes_nothing(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("IKET_")}
    target = watch("before_agent.py", compiles=2, gate=tmp_path / "done", env=env)
    try:
        plain, instrumented = target.session.tree.compiles
        said = json.loads(target.release().splitlines()[-1])
    finally:
        target.kill()
    assert plain.status is DONE and instrumented.status is DONE
    assert len(passes_of(plain)) == 59, "its passes, in a copy of the context that has no instrument"
    assert passes_of(instrumented) == [], "a context with instruments of its own is left as it was"
    assert said == {"passes": 59, "contexts": 1, "after_stop": 0}, "a context made after the stop has no tap"
