"""Sockets left by children made by ``fork`` that then ``exec``: the agent started in the child
at the fork serves a socket the exec drops, and its file stays behind. Listing the agents (as
``ls``, ``attach --all`` and ``run``'s child discovery do) removes it once that child is gone,
a zombie nobody waited for included, and never the socket of a child that lives on, nor a file
that is not a socket.

The program is a real one running the agent (``IKET_TUI=1``); its children exec real programs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from iket_tui import endpoints
from iket_tui.sources.descendants import agents_below

WAIT_S = 60.0
PROGRAM = """
import os, sys
def child(*argv):
    pid = os.fork()
    if pid == 0:
        os.execv(argv[0], list(argv[1:]))
    return pid
gone = child("/bin/sh", "sh", "-c", "exit 0")
lives = child("/bin/sh", "sh", "-c", "read line")
print(gone, lives, flush=True)
sys.stdin.readline()  # the first child is a zombie until then: nobody waits for it
os.waitpid(gone, 0)
"""


@pytest.fixture
def program() -> Iterator[subprocess.Popen[str]]:
    env = {**os.environ, "IKET_TUI": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", PROGRAM], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _socket_of(pid: int) -> Path:
    """The socket the agent started at the fork made for ``pid``, once it is there."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        start = endpoints.process_start_time(pid)
        if start is not None and endpoints.socket_path_for(pid, start).exists():
            return endpoints.socket_path_for(pid, start)
        time.sleep(0.02)
    raise AssertionError(f"no agent socket for pid {pid}")


def _wait_for_zombie(pid: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
        assert time.monotonic() < deadline, f"pid {pid} never exited"
        time.sleep(0.02)


def test_a_forked_child_that_execed_and_exited_leaves_no_socket_once_agents_are_listed(
    program: subprocess.Popen[str],
) -> None:
    assert program.stdout is not None
    gone, lives = (int(word) for word in program.stdout.readline().split())
    parent, gone_socket, living_socket = _socket_of(program.pid), _socket_of(gone), _socket_of(lives)
    _wait_for_zombie(gone)
    not_a_socket = endpoints.runtime_dir() / "999999999-1.sock"
    not_a_socket.write_text("a file named like the socket of a process gone")

    assert [found.pid for found in agents_below(program.pid)] == [lives], "run's discovery: the living child only"
    assert not gone_socket.exists(), "the socket of the child gone is removed"
    ours = (program.pid, gone, lives)  # agents of tests running alongside (pytest -n) may be listed too
    assert [found.pid for found in endpoints.list_endpoints(listening_only=True) if found.pid in ours] == [program.pid]
    assert parent.exists() and living_socket.exists(), "the sockets of processes that live stay"
    assert not_a_socket.read_text().startswith("a file"), "what is not a socket stays"
    not_a_socket.unlink()
