"""Native stacks of ``HOST:PID`` are read over there: the ssh source asked for them runs
``iket-tui stacks PID --native`` on the target's machine through ssh (a real sshd on loopback),
never py-spy here. Where py-spy is not installed over there, the answer is its one line, naming
the host."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from live_target import socket_of
from ssh_server import Sshd

from iket_tui.sources import py_spy
from iket_tui.sources.base import NATIVE_STACKS, Answer
from iket_tui.sources.ssh import RemoteTarget, SshSource

WAIT_S = 120.0
PROGRAM = """
import sys
def only_in_the_remote_program():
    sys.stdin.readline()
only_in_the_remote_program()
"""


def test_native_stacks_of_a_remote_pid_are_read_on_its_machine(
    sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = tmp_path / "py-spy-here"
    monkeypatch.setattr(py_spy, "py_spy_path", lambda: str(here))  # run here, it would fail: no such file
    target = subprocess.Popen(
        [sys.executable, "-c", PROGRAM], env={**os.environ, "IKET_TUI": "1"}, stdin=subprocess.PIPE, text=True
    )
    try:
        socket_of(target)  # type: ignore[arg-type]
        source = SshSource(RemoteTarget("box", target.pid))
        try:
            source.connect()
            asked = source.request(NATIVE_STACKS, timeout_s=30)
            answer = _answer_to(source, asked)
        finally:
            source.close_and_wait()
    finally:
        target.kill()
        target.wait()
    there = Path(sys.executable).with_name("py-spy")
    if not there.exists() and shutil.which("py-spy") is None:
        assert answer.response is None
        assert answer.error == "box: native stacks need py-spy: pip install 'iket-tui[native]'"
        return
    assert answer.error is None and answer.response is not None, answer.error
    assert answer.response["pid"] == target.pid and answer.response["target"] == f"box:{target.pid}"
    assert "only_in_the_remote_program" in answer.response["text"]
    assert "Python stacks" not in answer.response["text"]


def _answer_to(source: SshSource, request_id: int) -> Answer:
    deadline = time.monotonic() + WAIT_S
    for batch in source.batches():
        for answer in batch.answers:
            if answer.request_id == request_id:
                return answer
        assert time.monotonic() < deadline, "no answer came"
    raise AssertionError("the stream ended without the answer")
