"""A target stuck in a pass, shared by the tests that ask a live agent for things."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

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


@pytest.fixture(scope="session")
def stuck() -> Iterator[Stuck]:
    runtime = Path(tempfile.mkdtemp(prefix="ik"))  # short: socket paths are limited to 107 bytes
    patch = pytest.MonkeyPatch()
    patch.setenv("XDG_RUNTIME_DIR", str(runtime))  # where this process looks for agents too
    env = {**os.environ, "IKET_TUI": "1"}
    args = ["--kernels", "slow_gemm", "--slow-seconds", "600", "--lower-only"]
    program = subprocess.Popen(
        [sys.executable, "-m", "iket_tui.demo.program", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        path = _socket_of(program)
        deadline = time.monotonic() + WAIT_S
        while True:
            response = _stacks(path)
            if SLEEPING in _main_code(response):
                break
            assert time.monotonic() < deadline, "the program never reached the slowed pass"
            time.sleep(0.2)
        yield Stuck(program, path, {**env, "IKET_TUI": ""}, response)
    finally:
        program.kill()
        program.wait()
        patch.undo()
        shutil.rmtree(runtime, ignore_errors=True)


def _stacks(path: Path) -> m.Message:
    source = SocketSource(path)
    try:
        source.connect()
        return fetch_stacks(source)
    finally:
        source.close_and_wait("done")


def _main_code(response: m.Message) -> list[str]:
    main = next(thread for thread in response["threads"] if thread["main"])
    return [frame["code"] for frame in main["frames"]]


def _socket_of(program: subprocess.Popen[bytes]) -> Path:
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
