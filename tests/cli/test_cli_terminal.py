"""The UI commands need a terminal: without one they say which command to use instead, in one
line, rather than writing escape codes into a pipe forever."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"


@pytest.mark.parametrize(
    ("stdin", "stdout"), [(subprocess.DEVNULL, subprocess.PIPE), (None, subprocess.PIPE)], ids=["no-tty", "piped"]
)
def test_replay_into_a_pipe_refuses_in_one_line(stdin: int | None, stdout: int) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "iket_tui", "replay", str(EXAMPLE)],
        stdin=stdin,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stdout == ""  # no escape codes
    (line,) = done.stderr.splitlines()
    assert line.startswith("iket-tui: the UI needs a terminal on stdin and stdout; without one, `iket-tui record")
    assert "`iket-tui dump FILE` prints it" in line
