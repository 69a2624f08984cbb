"""``stacks PID --native`` of a target whose agent cannot answer: its main thread holds the GIL
in native code (here the regular expression engine, as a C++ pass would), so the agent's thread
never greets. The native stacks are what is wanted then: py-spy reads the pid the user named,
and the missing Python stacks are one line and exit code 1."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from cli_helpers import assert_no_traceback, run_iket, wait_until

from iket_tui import endpoints
from iket_tui.sources.py_spy import py_spy_path

HOLDS_THE_GIL = """
import re, sys
sys.stdin.readline()
re.match(r"(a+)+$", "a" * 64 + "b")  # backtracks for ages without letting go of the GIL
"""


@pytest.mark.skipif(py_spy_path() is None, reason="needs py-spy: pip install 'iket-tui[native]'")
def test_native_stacks_come_when_the_agent_cannot_answer() -> None:
    target = subprocess.Popen(
        [sys.executable, "-c", HOLDS_THE_GIL], env={**os.environ, "IKET_TUI": "1"}, stdin=subprocess.PIPE, text=True
    )
    try:

        def listening() -> bool:
            start = endpoints.process_start_time(target.pid)
            return start is not None and endpoints.socket_path_for(target.pid, start).exists()

        wait_until(listening)
        assert target.stdin is not None
        target.stdin.write("go\n")
        target.stdin.flush()
        time.sleep(0.5)  # well inside the match
        done = run_iket("stacks", str(target.pid), "--native", "--timeout", "3")
    finally:
        target.kill()
        target.wait()
    assert_no_traceback(done.stderr)
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith(f"pid {target.pid}: native stacks (py-spy)\n")
    assert "match" in done.stdout  # the frame that holds the GIL
    (line,) = done.stderr.splitlines()
    assert line.startswith("iket-tui: no Python stacks: ")
