"""A target stuck in a pass, for the tests that ask a live agent for things (the fixture is in conftest.py)."""

from __future__ import annotations

import subprocess
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
