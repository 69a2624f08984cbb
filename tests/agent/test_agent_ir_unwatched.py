"""The IR is kept only while a client is attached (or with IKET_TUI_IR=always), in a real target
lowering real kernels under the agent and a real client over its socket. With nobody attached a
compile keeps no IR, yet a failing pass's module reaches its compile_failure and a stuck pass can
still be captured; asking for the IR of a compile that ran unwatched is answered in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("tilelang")

from iket_tui.demo.kernels import LAYOUT_CONFLICT_PASS

TARGETS = Path(__file__).parent / "targets"
WAIT_S = 300.0
UNWATCHED = "ran while no client was attached: its IR was not kept (IKET_TUI_IR=always keeps it)"


def _run(target: str, *args: str, **env_vars: str) -> dict[str, Any]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("IKET_TUI")}
    env.update(env_vars)
    done = subprocess.run(
        [sys.executable, str(TARGETS / target), *args], capture_output=True, text=True, timeout=WAIT_S, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return found


@pytest.fixture(scope="module")
def unwatched() -> dict[str, Any]:
    return _run("unwatched.py")


def test_a_compile_nobody_watches_keeps_no_ir(unwatched: dict[str, Any]) -> None:
    assert unwatched["held_after_a_compile"] == {}
    assert unwatched["held_after_a_failure"] == {}
    assert unwatched["held_after_the_client_left"] == [4], "the compile watched stays; the one after it keeps none"


def test_a_failure_nobody_watched_still_has_its_pass_module(unwatched: dict[str, Any]) -> None:
    assert unwatched["failed"] == "InternalError"
    failure = unwatched["failure"]
    assert (failure["compile"], failure["stage"], failure["name"]) == (2, "pass", LAYOUT_CONFLICT_PASS)
    assert failure["ir_script"] and failure["ir_json"], "the module the failing pass was given"
    assert failure["ir_missing"] is None


def test_a_pass_stuck_while_nobody_watched_can_be_captured(unwatched: dict[str, Any]) -> None:
    stuck = unwatched["stuck"]
    assert stuck["ok"] and (stuck["compile"], stuck["name"]) == (3, "hang_test.SpinForever")
    assert stuck["ir_script"] and stuck["ir_missing"] is None
    assert stuck["parent_name"] == "hang_test.Pipelining"
    assert stuck["pipeline"] == stuck["seq"] + 1, "every pass before it is named"
    before = unwatched["stuck_before"]
    assert before["ok"] and before["before"].startswith("# from tvm.script import ir as I")
    assert unwatched["abort"] and unwatched["aborted"]


def test_asking_for_the_ir_of_an_unwatched_compile_says_so_in_one_line(unwatched: dict[str, Any]) -> None:
    errors = unwatched["unwatched"]
    assert errors["1"] == f"compile 1 {UNWATCHED}"
    assert errors["2"] == f"compile 2 {UNWATCHED}"
    assert errors["3"].startswith("pass 1 (") and errors["3"].endswith(f") of compile 3 {UNWATCHED}")


def test_with_a_client_attached_the_ir_is_kept(unwatched: dict[str, Any]) -> None:
    assert unwatched["held_watched"] == [4]
    assert unwatched["watched"] == {"ok": True, "error": None, "before": True}


@pytest.mark.parametrize(("keep", "held"), [("", False), ("always", True)])
def test_ir_always_keeps_it_without_a_client(keep: str, held: bool) -> None:
    found = _run("ir_held.py", "2", IKET_TUI_IR=keep)
    if held:
        assert found["answers"] == {"1": "held", "2": "held"}
        assert [list(each["held"]) for each in found["after_each"]] == [["1"], ["1", "2"]]
    else:
        assert found["answers"] == {"1": f"compile 1 {UNWATCHED}", "2": f"compile 2 {UNWATCHED}"}
        assert [each["held"] for each in found["after_each"]] == [{}, {}]
