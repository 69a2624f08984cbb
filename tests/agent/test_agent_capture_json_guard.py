"""Where saving IR as TVM's JSON would crash the process (Apache TVM 0.27 with apache-tvm-ffi
0.1.15), no capture calls it: a failed or stuck pass keeps its TVMScript and says why the JSON
is missing, and a configuration of plain values is still kept."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("tilelang")

import tilelang  # noqa: F401  (TileLang's bundled TVM is importable after it)
from tvm import ir, tirx

from iket_tui.agent import capture
from iket_tui.agent.ir_store import IRStore

CRASHES = "TVM's JSON of it is left out: Apache TVM 0.27.0 crashes saving IR as JSON with apache-tvm-ffi 0.1.15"


def _module() -> Any:
    x = tirx.Var("x", "int32")
    func = tirx.PrimFunc([x], tirx.Evaluate(x + 1))
    return ir.IRModule({"main": func})


def test_a_failed_pass_keeps_its_script_and_never_saves_json_where_it_would_crash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = IRStore()
    module = _module()
    monkeypatch.setattr(store, "module_before", lambda compile_id, seq: module)
    monkeypatch.setattr(capture, "save_json_crashes", lambda: CRASHES)

    def crash(*args: object) -> str:
        raise AssertionError("save_json called where it would end the process")

    monkeypatch.setattr(ir, "save_json", crash)
    found = capture.failed_pass(store, 1, 0)
    assert found["ir_json"] is None
    assert found["ir_missing"] == CRASHES
    assert "def main" in found["ir_script"]


def test_a_configuration_of_plain_values_is_kept_even_there(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(capture, "save_json_crashes", lambda: CRASHES)
    plain = {"tir.disable_vectorize": True, "tl.opt": 3}
    assert capture.config_json(plain) is not None
    assert capture.config_json({"tir.something": _module()}) is None
