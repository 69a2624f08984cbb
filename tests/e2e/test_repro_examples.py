"""Reproducers from the recordings that come with iket-tui (``examples/``): ``iket-tui repro`` writes
one for each of the demo's failed compiles on the H200, and in a fresh process, without the
program, ``repro.py`` fails as that compile did: ``tl.LayoutInference`` on the module it was
given, and nvcc on the source it rejected."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tilelang")

from iket_tui.demo.kernels import MISSING_DEVICE_FUNCTION

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RECORDINGS = ("h200-demo.msgpack", "h200-demo-waiting.msgpack")
FAILED = {
    5: ("tl.LayoutInference", "Layout infer conflict between D_local and C_local in T.Parallel loop"),
    6: ("target.build.tilelang_cuda", f'error: identifier "{MISSING_DEVICE_FUNCTION}" is undefined'),
}
"""The failed compiles of the recordings: the step that failed, and what its error says."""
WAIT_S = 300.0


@pytest.mark.parametrize("compile_id", sorted(FAILED))
@pytest.mark.parametrize("name", RECORDINGS)
def test_a_bundled_recording_gives_a_reproducer_that_fails_as_the_compile_did(
    name: str, compile_id: int, tmp_path: Path
) -> None:
    step, error = FAILED[compile_id]
    out = tmp_path / "repro"
    written = subprocess.run(
        [sys.executable, "-m", "iket_tui", "repro", str(EXAMPLES / name), "--compile", str(compile_id), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert written.returncode == 0, written.stderr
    assert written.stderr.startswith(f"iket-tui: wrote a reproducer of compile {compile_id} ({step}) to {out}: ")

    env = {key: value for key, value in os.environ.items() if not key.startswith("IKET_TUI")}
    ran = subprocess.run(
        [sys.executable, str(out / "repro.py")], capture_output=True, text=True, timeout=WAIT_S, cwd=tmp_path, env=env
    )
    assert ran.returncode == 1, ran.stderr[-3000:]
    assert error in ran.stderr, ran.stderr[-3000:]
