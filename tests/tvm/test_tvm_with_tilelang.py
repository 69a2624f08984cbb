"""Where TileLang is imported, its bundled TVM is TileLang's to watch: the plain-TVM watcher stays
out of it, so every TileLang compile is told once, through TileLang's own instrumentation."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from tvm_target import TARGETS, WAIT_S

pytestmark = pytest.mark.tilelang


def test_tilelangs_tvm_is_not_watched_twice() -> None:
    env = {**os.environ, "IKET_TUI": "1"}
    done = subprocess.run(
        [sys.executable, str(TARGETS / "tilelang_once.py")], env=env, capture_output=True, text=True, timeout=WAIT_S
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    # Contexts are tapped only outside TileLang's compile sessions (the program's own pipelines,
    # iket_tui.agent.program_pipelines): TileLang's compile below is told once, by TileLang's own.
    assert found["pass_contexts_watched"] is True
    assert found["tvm_hook_left"] == [], "the import hook went when TileLang's tvm was imported"
    (label,) = found["compiles"]
    assert "kernel=vector_add" in label and found["compilers"] == ["None"]
    assert found["passes"] == found["distinct"] > 50, "each pass told once"
