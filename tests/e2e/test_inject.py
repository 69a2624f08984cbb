"""Attaching to a program started without the agent: iket-tui starts one inside it (gdb here,
``sys.remote_exec`` on Python 3.14), after which its stacks answer at once and every new compile
is observed. A process that is not Python, or cannot be traced, is one line and exit 2."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("tilelang")

from iket_tui.protocol import messages as m
from iket_tui.sources.reading import read_recording

WAIT_S = 120.0
TARGET = Path(__file__).parent / "targets" / "plain_then_lower.py"


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ik"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(path))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _iket(*args: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "IKET_TUI"}
    return subprocess.run(
        [sys.executable, "-m", "iket_tui", *args], capture_output=True, text=True, timeout=WAIT_S, env=env
    )


def test_a_program_started_without_the_agent_is_attached_and_its_compiles_observed(
    runtime: Path, tmp_path: Path
) -> None:
    if shutil.which("gdb") is None and sys.version_info < (3, 14):
        pytest.skip("needs gdb (or Python 3.14's sys.remote_exec) to start the agent in another process")
    gate = tmp_path / "gate"
    env = {key: value for key, value in os.environ.items() if not key.startswith("IKET_TUI")}
    program = subprocess.Popen(
        [sys.executable, str(TARGET)], env={**env, "IKET_TEST_GATE": str(gate)}, stdout=subprocess.PIPE, text=True
    )
    try:
        assert program.stdout is not None and program.stdout.readline() == "ready\n"
        assert _iket("stacks", str(program.pid)).stderr.splitlines() == [
            f"iket-tui: process {program.pid} runs no iket-tui agent (start it with `iket-tui run -- CMD` or "
            f"IKET_TUI=1); `iket-tui attach {program.pid}` or --start-agent starts one in it"
        ]
        stacks = _iket("stacks", "--start-agent", str(program.pid))
        if stacks.returncode != 0 and "ptrace" in stacks.stderr:
            pytest.skip(f"tracing is not permitted here: {stacks.stderr.strip()}")
        assert stacks.returncode == 0, stacks.stderr
        assert stacks.stderr.splitlines() == [
            f"iket-tui: process {program.pid} runs no iket-tui agent: starting one in it ..."
        ]
        assert "in wait_for" in stacks.stdout and "time.sleep(0.02)" in stacks.stdout

        recording = tmp_path / "after.msgpack"
        recorder = subprocess.Popen(
            [sys.executable, "-m", "iket_tui", "record", str(program.pid), "-o", str(recording)],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + WAIT_S
        while not recording.exists() or recording.stat().st_size == 0:
            assert time.monotonic() < deadline, "the recorder never started"
            time.sleep(0.05)
        gate.touch()  # the program now lowers a kernel, with the agent that was started in it
        assert program.stdout.readline() == "lowered\n"
        gate.with_name(gate.name + ".done").touch()
        program.wait(timeout=WAIT_S)
        recorder.wait(timeout=WAIT_S)
        messages, info = read_recording(recording)
        assert info.ended
        kinds = [msg["type"] for msg in messages]
        assert m.COMPILE_BEGIN in kinds and m.COMPILE_END in kinds
        names = [msg["name"] for msg in messages if msg["type"] == m.PASS_END]
        assert "tl.LowerTileOp" in names and len(names) > 60
    finally:
        program.kill()
        program.wait()


def test_a_process_that_is_not_python_is_one_line(runtime: Path) -> None:
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        done = _iket("stacks", "--start-agent", str(sleeper.pid))
        assert done.returncode == 2
        assert done.stderr.splitlines()[-1] == (
            f"iket-tui: process {sleeper.pid} (sleep) is not a Python program; "
            "start it with `iket-tui run -- CMD` or IKET_TUI=1 instead"
        )
    finally:
        sleeper.kill()
        sleeper.wait()
