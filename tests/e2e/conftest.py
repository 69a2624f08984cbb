"""The target stuck in a pass, shared by the tests that ask a live agent for things."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from live_target import SLEEPING, WAIT_S, Stuck, main_code, socket_of, stacks_of, start_stuck_program


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
