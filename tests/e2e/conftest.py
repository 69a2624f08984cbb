"""The target stuck in a pass, shared by the tests that ask a live agent for things, and the
OpenSSH server of the HOST:PID tests."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from live_target import SLEEPING, WAIT_S, Stuck, main_code, socket_of, stacks_of, start_stuck_program
from ssh_server import NoSshd, Sshd, start_sshd


@pytest.fixture(scope="session")
def stuck() -> Iterator[Stuck]:
    runtime = Path(tempfile.mkdtemp(prefix="ik"))  # short: socket paths are limited to 107 bytes
    patch = pytest.MonkeyPatch()
    patch.setenv("XDG_RUNTIME_DIR", str(runtime))  # where this process looks for agents too
    program, env = start_stuck_program()
    try:
        path = socket_of(program)
        deadline = time.monotonic() + WAIT_S
        while True:
            response = stacks_of(path)
            if SLEEPING in main_code(response):
                break
            assert time.monotonic() < deadline, "the program never reached the slowed pass"
            time.sleep(0.2)
        yield Stuck(program, path, {**env, "IKET_TUI": ""}, response)
    finally:
        program.kill()
        program.wait()
        patch.undo()
        shutil.rmtree(runtime, ignore_errors=True)


@pytest.fixture(scope="module")
def sshd() -> Iterator[Sshd]:
    """An OpenSSH server on loopback for the HOST:PID tests (see :mod:`ssh_server`), with this
    process (and what it starts) pointed at it and at a private runtime directory."""
    iket_bin = Path(sys.executable).parent
    if not (iket_bin / "iket-tui").exists():
        pytest.skip(f"no iket-tui beside {sys.executable} to put on the remote PATH")
    home = Path(tempfile.mkdtemp(prefix="iks"))
    runtime = Path(tempfile.mkdtemp(prefix="ik"))  # short: socket paths are limited to 107 bytes
    try:
        server = start_sshd(home, iket_bin=iket_bin, runtime_dir=runtime)
    except NoSshd as exc:
        pytest.skip(str(exc))
    patch = pytest.MonkeyPatch()
    patch.setenv("XDG_RUNTIME_DIR", str(runtime))
    patch.setenv("IKET_TUI_SSH", f"ssh -F {server.client_config}")
    patch.delenv("IKET_TUI", raising=False)
    patch.delenv("IKET_TUI_REMOTE", raising=False)
    try:
        yield server
    finally:
        server.stop()
        patch.undo()
        for path in (home, runtime):
            subprocess.run(["rm", "-rf", str(path)], check=False)
