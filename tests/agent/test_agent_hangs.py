"""A compile stuck in a pass of the user's own, on a thread of its own, under the agent: the
capture holds the module the pass was given (loadable, and the same module TVM hands that
pass), the pass's place and source; an abort makes the compile fail with CompileAborted, as a
failing compile does, and the same thread goes on to its next compile. A pass blocked in native
code takes the abort only once it returns to Python, and the answer says so."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("tilelang")

TARGET = Path(__file__).parent / "targets" / "hangs.py"
PASSES = Path(__file__).resolve().parents[1] / "e2e" / "targets" / "hang_passes.py"
WAIT_S = 300.0
ABORTED = "iket_tui.agent.abort.CompileAborted"


def _run(mode: str) -> dict[str, Any]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("IKET_TUI")}
    done = subprocess.run([sys.executable, str(TARGET), mode], capture_output=True, text=True, timeout=WAIT_S, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return found


@pytest.fixture(scope="module")
def spin() -> dict[str, Any]:
    return _run("spin")


@pytest.fixture(scope="module")
def pause() -> dict[str, Any]:
    return _run("pause")


def _of(events: list[dict[str, Any]], kind: str, compile_id: int = 1) -> list[dict[str, Any]]:
    return [msg for msg in events if msg["type"] == kind and msg["compile"] == compile_id]


def test_the_capture_holds_the_module_the_stuck_pass_was_given_and_its_place(spin: dict[str, Any]) -> None:
    stuck = spin["stuck"]
    assert stuck["ok"] and stuck["error"] is None
    assert (stuck["compile"], stuck["name"], stuck["depth"], stuck["parent_name"]) == (
        1,
        "hang_test.SpinForever",
        1,
        "hang_test.Pipelining",
    )
    assert stuck["pipeline"][-2:] == ["hang_test.Pipelining", "hang_test.SpinForever"]
    assert len(stuck["pipeline"]) == stuck["seq"] + 1
    assert stuck["ir_script_is_the_module_before"], "the module TVM gave the pass, printed"
    assert stuck["ir_json_loads_to_ir_script"], "the loadable form is the same module"
    assert stuck["ir_missing"] is None
    assert json.loads(stuck["target"])["arch"] == "sm_90a"
    assert stuck["config_json"].startswith("{")
    assert (stuck["opt_level"], stuck["required_pass"], stuck["disabled_pass"]) == (3, [], []), "the demo's context"
    assert (stuck["kernel"], stuck["label"]) == ("gemm", "stage=lower, kernel=gemm, target=sm_90a")
    assert stuck["pass_source"] == {
        "file": str(PASSES),
        "line": stuck["frames"][-1]["line"],
        "function": "spin_forever",
        "module": "hang_passes",
        "qualname": "spin_forever",
        "made_by": None,  # defined at its module's top level, which holds the pass itself
    }
    assert stuck["frames"][-1]["code"] == "while turns >= 0:  # a Python loop that never ends"
    assert stuck["compile_thread"]


def test_questions_about_nothing_running_are_one_line(spin: dict[str, Any]) -> None:
    assert spin["nothing"]["ok"] is False
    assert spin["nothing"]["error"].startswith("no compile is running in pid ")
    assert spin["bad"]["error"] == "a stuck request names a compile and a pass by their numbers, or neither"
    assert spin["other"]["error"] == "pass 0 of compile 1 is not running"


def test_an_abort_fails_the_compile_and_the_thread_compiles_on(spin: dict[str, Any]) -> None:
    answer = spin["abort"]
    message = answer["message"]
    assert re.fullmatch(r"aborted by iket-tui after \d+(\.\d+)? (ms|s) in hang_test\.SpinForever", message), message
    assert (answer["ok"], answer["state"], answer["compile_error"]) == (True, "aborted", f"CompileAborted: {message}")
    assert spin["caught"] == {"gemm": f"CompileAborted: {message}", "vector_add": "lowered"}
    assert not spin["alive"] and spin["running"] == []

    events = spin["events"]
    incomplete = {msg["name"]: msg["error"] for msg in _of(events, "pass_incomplete")}
    assert incomplete == {
        "hang_test.Pipelining": f"CompileAborted: {message}",
        "hang_test.SpinForever": f"CompileAborted: {message}",
    }
    (failure,) = _of(events, "compile_failure")
    assert (failure["stage"], failure["name"], failure["seq"], failure["error_type"]) == (
        "pass",
        "hang_test.SpinForever",
        spin["stuck"]["seq"],
        ABORTED,
    )
    assert failure["aborted_after_ns"] == answer["running_ns"] > 0
    assert failure["pass_source"]["file"] == str(PASSES)
    assert failure["ir_json"] and failure["ir_script"]
    (end,) = _of(events, "compile_end")
    assert (end["ok"], end["error"], end["error_type"], end["stage"]) == (
        False,
        f"CompileAborted: {message}",
        ABORTED,
        "pass",
    )
    (after,) = _of(events, "compile_end", 2)
    assert after["ok"] is True
    assert spin["observer_errors"] == 0


def test_a_pass_in_native_code_is_said_to_be_there_and_takes_the_abort_when_it_returns(
    pause: dict[str, Any],
) -> None:
    answer = pause["abort"]
    assert (answer["ok"], answer["state"], answer["compile_error"]) == (True, "native", None)
    assert (answer["thread"], answer["main_thread"], answer["via"]) == ("compiling", False, "exception")
    assert (answer["children"], answer["ended"]) == ([], []), "it waits on no process"
    assert answer["where"] == (
        f"{PASSES}:{pause['stuck']['frames'][-1]['line']} in pause_forever: "
        "_libc.pause()  # blocks in native code until a signal is handled"
    )
    # SIGUSR1 ended pause(): the pending abort took effect at the thread's next Python bytecode
    assert pause["caught"] == {"gemm": f"CompileAborted: {answer['message']}", "vector_add": "lowered"}
    (end,) = _of(pause["events"], "compile_end")
    assert end["error"] == f"CompileAborted: {answer['message']}"
    assert pause["observer_errors"] == 0
