"""A process ended by SIGTERM: its agent's clients get what it had to say and a ``bye`` first,
the process still ends killed by SIGTERM, and a program's own way with SIGTERM is kept.

The target (``targets/terminated.py``) prints ``ready`` and waits, as its mode says, for the
SIGTERM the test sends it.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest
from agent_wire import WireClient, of_type, socket_of, spawn_target

from iket_tui.protocol import messages as m


def _ready(proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line == "ready\n", f"{line!r}: {proc.stderr.read() if proc.stderr else ''}"


def _attached(proc: subprocess.Popen[str]) -> WireClient:
    client = WireClient(socket_of(proc))
    client.catch_up()
    return client


def _end(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    try:
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, stdout, stderr


@pytest.mark.parametrize("mode", ["sleeping", "waiting", "native"])
def test_a_terminated_process_says_bye_and_still_dies_of_sigterm(mode: str) -> None:
    proc = spawn_target("terminated.py", env={"IKET_TEST_MODE": mode, "IKET_TUI_WAIT_CLIENT": "120"})
    client = _attached(proc)
    _ready(proc)
    proc.send_signal(signal.SIGTERM)
    received = client.read_to_end()
    code, _stdout, stderr = _end(proc)
    assert code == -signal.SIGTERM, stderr
    assert received[-1]["type"] == m.BYE and received[-1]["reason"] == "SIGTERM", received[-3:]


def test_a_programs_own_handler_installed_first_still_runs_after_the_flush() -> None:
    proc = spawn_target("terminated.py", env={"IKET_TEST_MODE": "own-before"}, agent=False)
    client = _attached(proc)
    _ready(proc)
    proc.send_signal(signal.SIGTERM)
    received = client.read_to_end()
    code, stdout, stderr = _end(proc)
    assert (code, stdout) == (7, "own handler ran\n"), stderr
    assert received[-1]["type"] == m.BYE and received[-1]["reason"] == "exit"


def test_a_handler_the_program_installs_later_rules() -> None:
    proc = spawn_target("terminated.py", env={"IKET_TEST_MODE": "own-after", "IKET_TUI_WAIT_CLIENT": "120"})
    client = _attached(proc)
    _ready(proc)
    proc.send_signal(signal.SIGTERM)
    received = client.read_to_end()
    code, stdout, stderr = _end(proc)
    assert (code, stdout) == (7, "own handler ran\n"), stderr
    assert received[-1]["type"] == m.BYE and received[-1]["reason"] == "exit"


def test_an_ignored_sigterm_stays_ignored(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    proc = spawn_target("terminated.py", env={"IKET_TEST_MODE": "ignored", "IKET_TEST_GATE": str(gate)}, agent=False)
    client = _attached(proc)
    _ready(proc)
    proc.send_signal(signal.SIGTERM)
    time.sleep(1.0)
    assert proc.poll() is None, "the process ignores SIGTERM, as it did without the agent"
    gate.touch()
    received = client.read_to_end()
    assert _end(proc)[0] == 0
    assert received[-1]["type"] == m.BYE and received[-1]["reason"] == "exit"


def test_with_no_client_attached_a_terminated_process_ends_at_once() -> None:
    proc = spawn_target("terminated.py", env={"IKET_TEST_MODE": "sleeping"})
    socket_of(proc)
    _ready(proc)
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=60)
    took = time.monotonic() - started
    assert code == -signal.SIGTERM
    assert took < 1.0, f"{took:.3f} s between SIGTERM and the end, with nobody to flush to"


@pytest.mark.tilelang
def test_a_sigterm_while_a_failure_is_captured_waits_for_the_compile_end() -> None:
    proc = spawn_target("terminated.py", env={"IKET_TEST_MODE": "compile-end", "IKET_TUI_WAIT_CLIENT": "120"})
    client = _attached(proc)
    _ready(proc)
    received = client.read_to_end()
    code, stdout, stderr = _end(proc)
    assert code == -signal.SIGTERM, stderr
    assert "came back" not in stdout
    (failure,) = of_type(received, m.COMPILE_FAILURE)
    assert failure["name"] == "tl.LayoutInference"
    (end,) = of_type(received, m.COMPILE_END)
    assert end["ok"] is False and "Layout infer conflict" in end["error"]
    assert received[-1]["type"] == m.BYE and received[-1]["reason"] == "SIGTERM"
