"""The socket files ``ls`` lists and the ones it leaves out, and socket paths too long to use.

``ls`` lists agents that listen: not a socket file of a live pid that nobody listens on, nor one
named after a live pid with another start time, nor the sockets of a runtime directory that
another user owns or that is open to others (said once on stderr). A socket path longer than
a Unix socket may have is a one-line error that names the fix, for the agent and for clients.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from iket_tui.endpoints import process_start_time

TIMEOUT_S = 120.0
FAKE_AGENT = Path(__file__).resolve().parents[1] / "sources" / "fake_agent.py"
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory to another user")


def _fake_agent() -> ModuleType:
    spec = importlib.util.spec_from_file_location("e2e_sockets_fake_agent", FAKE_AGENT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FakeAgent = _fake_agent().FakeAgent


@pytest.fixture
def runtime_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A short private ``XDG_RUNTIME_DIR``; agent sockets go into its ``iket-tui`` directory."""
    path = Path(tempfile.mkdtemp(prefix="ik"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(path))
    monkeypatch.delenv("IKET_TUI", raising=False)
    monkeypatch.delenv("IKET_TUI_SOCKET_DIR", raising=False)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(["sleep", "600"])
    yield process
    process.kill()
    process.wait()


def _iket(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "iket_tui", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
    )
    assert "Traceback" not in done.stderr
    return done


def _listed(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The pids ``ls`` printed."""
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    if lines and lines[0].startswith("no live iket-tui agents"):
        return []
    return [line.split()[0] for line in lines[1:]]


def _dead_socket(path: Path) -> None:
    """A socket file that nobody listens on, as an agent killed mid-way or a planted one leaves."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.close()


def test_ls_leaves_out_sockets_of_live_pids_that_no_agent_serves(
    runtime_dir: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    with FakeAgent("endless") as live:
        directory = live.path.parent
        start = process_start_time(sleeper.pid)
        assert start is not None
        nobody_listens = directory / f"{sleeper.pid}-{start}.sock"
        _dead_socket(nobody_listens)
        other_start = directory / f"{os.getpid()}-{start + 1}.sock"
        _dead_socket(other_start)
        done = _iket("ls")
    assert _listed(done) == [str(live.pid)]
    assert done.stderr == ""
    assert not other_start.exists(), "a socket named after another start time of a pid is stale: removed"


@needs_root
def test_ls_leaves_out_a_runtime_directory_of_another_user_and_says_why_once(runtime_dir: Path) -> None:
    directory = runtime_dir / "iket-tui"
    directory.mkdir(mode=0o700)
    with FakeAgent("endless", socket_path=directory / f"{os.getpid()}-{process_start_time(os.getpid())}.sock"):
        os.chown(directory, 65534, 65534)
        done = _iket("ls")
    assert _listed(done) == []
    assert done.stderr.splitlines() == [
        f"iket-tui: {directory} belongs to uid 65534, not to this user (uid 0): its sockets are not listed"
        " (remove it, or set IKET_TUI_SOCKET_DIR to a directory of yours)"
    ]


def test_ls_leaves_out_a_runtime_directory_open_to_others_and_says_why_once(runtime_dir: Path) -> None:
    with FakeAgent("endless") as live:
        directory = live.path.parent
        directory.chmod(0o777)
        done = _iket("ls")
    assert _listed(done) == []
    assert done.stderr.splitlines() == [
        f"iket-tui: {directory} is open to other users (mode 777): its sockets are not listed"
        f" (chmod 700 {directory}, or remove it)"
    ]


AGENT_IN_CODE = """
import sys, iket_tui.agent
agent = iket_tui.agent.start()
print(agent.socket_path, flush=True)
sys.stdin.read()
"""


def test_a_runtime_directory_too_long_for_a_socket_is_one_line_naming_the_fix(tmp_path: Path) -> None:
    long = tmp_path / ("d" * 100)
    long.mkdir()
    env = {**os.environ, "XDG_RUNTIME_DIR": str(long)}
    env.pop("IKET_TUI", None)
    env.pop("IKET_TUI_SOCKET_DIR", None)
    target = subprocess.run(
        [sys.executable, "-c", "import iket_tui.agent.autostart"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env=env,
    )
    (line,) = target.stderr.splitlines()
    assert line.startswith(f"iket-tui agent: not started: the socket path {long}/iket-tui/")
    assert line.endswith(
        "bytes, longer than a Unix socket path may be (107): set IKET_TUI_SOCKET_DIR (or XDG_RUNTIME_DIR)"
        " to a shorter directory"
    )
    done = _iket("record", str(os.getpid()), "-o", str(tmp_path / "never.msgpack"), env={"XDG_RUNTIME_DIR": str(long)})
    assert done.returncode == 2
    (error,) = done.stderr.splitlines()
    assert error.startswith(f"iket-tui: process {os.getpid()}: its socket path {long}/iket-tui/")
    assert error.endswith("set IKET_TUI_SOCKET_DIR (or XDG_RUNTIME_DIR) to a shorter directory")


def test_a_socket_path_too_long_to_connect_to_is_one_line_naming_the_fix(tmp_path: Path, runtime_dir: Path) -> None:
    with FakeAgent("endless") as agent:
        long = tmp_path / ("d" * 100)
        long.mkdir()
        link = long / "agent.sock"
        link.symlink_to(agent.path)
        done = _iket("record", str(link), "-o", str(tmp_path / "never.msgpack"))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"iket-tui: {link}: {len(os.fsencode(link))} bytes, longer than a Unix socket path may be (107):"
        " connect through a shorter path (a symbolic link to its directory, say)"
    ]


def test_agents_serve_in_the_socket_directory_the_user_names(tmp_path: Path) -> None:
    chosen = Path(tempfile.mkdtemp(prefix="ik")) / "sockets"
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path / ("d" * 100)), "IKET_TUI_SOCKET_DIR": str(chosen)}
    env.pop("IKET_TUI", None)
    target = subprocess.Popen(
        [sys.executable, "-c", AGENT_IN_CODE],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert target.stdout is not None
        path = Path(target.stdout.readline().strip())
        assert path.parent == chosen
        assert (chosen.stat().st_mode & 0o777) == 0o700
        listed = _iket("ls", env={"IKET_TUI_SOCKET_DIR": str(chosen)})
        assert _listed(listed) == [str(target.pid)]
        assert f" {path} " in listed.stdout
        assert listed.stdout.splitlines()[1].endswith(
            " -c import sys, iket_tui.agent agent = iket_tui.agent.start()"
            " print(agent.socket_path, flush=True) sys.stdin.read()"
        )
    finally:
        target.kill()
        target.wait()
        shutil.rmtree(chosen.parent, ignore_errors=True)


def test_a_socket_directory_the_user_names_is_never_made_private_by_force(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # as /tmp is
    env = {**os.environ, "IKET_TUI_SOCKET_DIR": str(shared)}
    env.pop("IKET_TUI", None)
    target = subprocess.run(
        [sys.executable, "-c", "import iket_tui.agent.autostart"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env=env,
    )
    assert target.stderr.splitlines() == [
        f"iket-tui agent: not started: {shared} is open to other users (mode 1777):"
        " set IKET_TUI_SOCKET_DIR to a directory that only this user may enter"
    ]
    assert shared.stat().st_mode & 0o7777 == 0o1777
    assert list(shared.iterdir()) == []
