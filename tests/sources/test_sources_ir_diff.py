"""The IR diff is a unified diff that ``patch`` applies: TVMScript ends without a newline, and a
changed last line must not run into the line that replaces it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from iket_tui.sources.ir import NO_NEWLINE, unified_diff

BEFORE = "# from tvm.script import tir as T\n\n@T.prim_func\ndef main():\n    T.evaluate(0)"
AFTER = "# from tvm.script import tir as T\n\n@T.prim_func\ndef main():\n    T.evaluate(1)"


def test_a_changed_last_line_without_a_newline_stays_on_its_own_line() -> None:
    diff = unified_diff(BEFORE, AFTER, "tl.Simplify").splitlines()
    assert diff[-4:] == ["-    T.evaluate(0)", NO_NEWLINE, "+    T.evaluate(1)", NO_NEWLINE]


def test_an_unchanged_module_has_no_diff() -> None:
    assert unified_diff(BEFORE, BEFORE, "tl.Simplify") == ""


@pytest.mark.skipif(shutil.which("patch") is None, reason="patch is not installed")
def test_patch_turns_the_before_text_into_the_after_text(tmp_path: Path) -> None:
    target = tmp_path / "module.py"
    target.write_text(BEFORE)
    done = subprocess.run(
        ["patch", str(target)], input=unified_diff(BEFORE, AFTER, "tl.Simplify"), text=True, capture_output=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert target.read_text() == AFTER
