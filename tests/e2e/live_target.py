"""A target stuck in a pass, for the tests that ask a live agent for things (the fixture is in conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from iket_tui import endpoints
from iket_tui.protocol import messages as m
from iket_tui.sources.socket import SocketSource
from iket_tui.sources.stacks import fetch_stacks

WAIT_S = 120.0
SLEEPING = "time.sleep(seconds)"  # the line the slowed pass sits on (iket_tui/demo/kernels.py)
STUCK_PASS = "tl.InjectSoftwarePipeline"


@dataclass
class Stuck:
    program: subprocess.Popen[bytes]
    path: Path
    env: dict[str, str]
    first: m.Message  # the stacks that showed the program inside the slowed pass


def stacks_of(path: Path) -> m.Message:
    source = SocketSource(path)
    try:
        source.connect()
        return fetch_stacks(source)
    finally:
        source.close_and_wait("done")


def main_code(response: m.Message) -> list[str]:
    main = next(thread for thread in response["threads"] if thread["main"])
    return [frame["code"] for frame in main["frames"]]


def socket_of(program: subprocess.Popen[bytes]) -> Path:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        start = endpoints.process_start_time(program.pid)
        if start is not None:
            path = endpoints.socket_path_for(program.pid, start)
            if path.exists():
                return path
        assert program.poll() is None, "the demo program ended before serving"
        time.sleep(0.05)
    raise AssertionError("no agent socket")


def start_stuck_program() -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    """The demo program under the agent, lowering the GEMM whose slowed pass takes ten minutes,
    and its environment. The caller sets ``XDG_RUNTIME_DIR`` (a short path: socket paths are
    limited to 107 bytes) before, and kills the program after."""
    env = {**os.environ, "IKET_TUI": "1"}
    args = ["--kernels", "slow_gemm", "--slow-seconds", "600", "--lower-only"]
    program = subprocess.Popen(
        [sys.executable, "-m", "iket_tui.demo.program", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return program, env
