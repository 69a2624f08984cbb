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


@pytest.mark.parametrize("command", ["run", "attach"])
def test_run_and_attach_without_a_terminal_refuse_before_touching_the_program(command: str, tmp_path: Path) -> None:
    """Refused before anything starts: `run` never launches the program (whose output would go to
    a log nobody is told of), and `attach` never starts an agent in the target."""
    marker = tmp_path / "ran"
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        argv = {
            "run": ["run", "--", sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"],
            "attach": ["attach", str(target.pid)],
        }[command]
        done = subprocess.run(
            [sys.executable, "-m", "iket_tui", *argv],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        target.kill()
        target.wait()
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("iket-tui: the UI needs a terminal on stdin and stdout")
    assert not marker.exists()
    assert "starting one" not in done.stderr
