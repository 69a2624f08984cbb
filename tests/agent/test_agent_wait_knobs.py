"""The agent's two waits for a first client, read one way: ``IKET_TUI_WAIT_CLIENT`` (this
process only: removed once read) and ``IKET_TUI_CHILD_WAIT`` (kept for every generation). A
value that is not a number of seconds is one line on stderr, and the program runs on at once."""

from __future__ import annotations

import os
import subprocess
import sys

PROGRAM = """
import os
print(repr(os.environ.get("IKET_TUI_WAIT_CLIENT")), repr(os.environ.get("IKET_TUI_CHILD_WAIT")), flush=True)
"""


def test_waits_that_are_not_seconds_are_one_line_each_and_the_program_runs_on() -> None:
    env = {**os.environ, "IKET_TUI": "1", "IKET_TUI_WAIT_CLIENT": "soon", "IKET_TUI_CHILD_WAIT": "-2"}
    done = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["None", "'-2'"], "WAIT_CLIENT is this process's alone; CHILD_WAIT stays"
    assert done.stderr.splitlines() == [
        "iket-tui agent: IKET_TUI_WAIT_CLIENT must be a number of seconds, got 'soon'; not waiting for a client",
        "iket-tui agent: IKET_TUI_CHILD_WAIT must be a number of seconds, got '-2'; not waiting for a client",
    ]
