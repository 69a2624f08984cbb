"""A pool that terminates its workers as soon as their results are back (``with Pool() as
pool``, spawn and fork) still delivers the failing worker's failure: recorded with
``iket-tui run --no-ui --record``, the worker whose kernel fails in ``tl.LayoutInference`` shows
its failure capture and its compile's end, and says ``bye`` before it dies of SIGTERM."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from iket_tui.model.nodes import FAILED
from iket_tui.model.session import Session
from iket_tui.sources.reading import read_recording

pytestmark = pytest.mark.tilelang

POOL = Path(__file__).parent / "targets" / "failing_pool.py"
RUNS = 3


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_the_failing_worker_of_a_terminated_pool_delivers_its_failure(tmp_path: Path, method: str) -> None:
    for run in range(RUNS):
        out = tmp_path / f"pool-{run}.msgpack"
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "iket_tui",
                "run",
                "--no-ui",
                "--record",
                str(out),
                "--",
                sys.executable,
                str(POOL),
                method,
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "IKET_TUI": ""},
        )
        assert result.returncode == 0, result.stderr
        assert "failed: layout_conflict: InternalError" in result.stdout
        msgs, info = read_recording(out)
        assert info.ended
        session = Session()
        session.apply(msgs)
        session.end_stream("the recording ended")
        failed = [
            (process, compile)
            for process in session.tree.processes
            for compile in process.compiles
            if compile.kernel == "layout_conflict"
        ]
        assert len(failed) == 1, f"run {run}: the failing compile is not in the recording"
        ((process, compile),) = failed
        assert compile.failure is not None, f"run {run}: no compile_failure"
        assert compile.failure["name"] == "tl.LayoutInference"
        assert compile.status is FAILED and compile.traceback is not None, f"run {run}: no compile_end"
        # ended by the pool's SIGTERM, or by the pool's last task when it came first: said either way
        assert process.exit_reason in ("SIGTERM", "exit"), f"run {run}: ended without a bye"
