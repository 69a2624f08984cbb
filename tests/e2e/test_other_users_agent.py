"""Another user's agent, named by pid or by socket: one line saying whose it is, exit code 2.

Runs as root, which may start processes as another user (uid 65534) and run iket-tui as one.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run processes as another user")

OTHER = 65534
TIMEOUT_S = 120.0
FAKE_AGENT = Path(__file__).resolve().parents[1] / "sources" / "fake_agent.py"


def _fake_agent() -> ModuleType:
    spec = importlib.util.spec_from_file_location("e2e_fake_agent", FAKE_AGENT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FakeAgent = _fake_agent().FakeAgent


@pytest.fixture
def runtime_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ik"))  # short: socket paths are limited to 107 bytes
    path.chmod(0o755)  # each user's runtime directory lies inside, private to its user
    mine = path / "root"
    mine.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(mine))
    monkeypatch.delenv("IKET_TUI", raising=False)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _dir_of(owner: int, parent: Path) -> Path:
    path = parent / str(owner)
    path.mkdir(mode=0o700)
    os.chown(path, owner, owner)
    return path


def _python_of_another_user() -> tuple[str, dict[str, str]]:
    """An interpreter of this Python version that another user may run (this one may lie in
    root's home), and the environment that finds iket-tui and its dependencies with it."""
    system = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    if not system.exists():
        pytest.skip(f"no {system} that another user could run")
    packages = next(path for path in sys.path if path.endswith("site-packages"))
    return str(system), {"PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]), packages])}


def _iket(*args: str, user: int | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    python, python_env = (sys.executable, {}) if user is None else _python_of_another_user()
    done = subprocess.run(
        [python, "-m", "iket_tui", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env={**os.environ, **python_env, **(env or {})},
        stdin=subprocess.DEVNULL,
        user=user,
        group=user,
        cwd="/",
    )
    assert "Traceback" not in done.stderr
    return done


def _one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr)
    (line,) = done.stderr.splitlines()
    assert line.startswith("iket-tui: ")
    return line.removeprefix("iket-tui: ")


def test_recording_the_pid_of_another_users_agent_says_whose_it_is(runtime_dir: Path) -> None:
    theirs = _dir_of(OTHER, runtime_dir)
    out = runtime_dir / "never.msgpack"
    with FakeAgent("endless", uid=OTHER, env={"XDG_RUNTIME_DIR": str(theirs)}) as agent:
        done = _iket("record", str(agent.pid), "-o", str(out))
    assert _one_line_error(done) == (
        f"the iket-tui agent of process {agent.pid} belongs to uid {OTHER};"
        " iket-tui must run as that user to reach it (this is uid 0)"
    )
    assert not out.exists()


def test_attaching_to_another_users_process_without_an_agent_starts_none(runtime_dir: Path) -> None:
    sleeper = subprocess.Popen(["sleep", "600"], user=OTHER, group=OTHER)
    try:
        done = _iket("attach", str(sleeper.pid))
    finally:
        sleeper.kill()
        sleeper.wait()
    assert _one_line_error(done) == (
        f"process {sleeper.pid} belongs to uid {OTHER} and runs no iket-tui agent this user can see;"
        " iket-tui must run as that user to watch it (this is uid 0)"
    )


def test_recording_the_socket_of_another_users_agent_says_whose_it_is(runtime_dir: Path) -> None:
    """As a user who may not even look into root's runtime directory, by socket and by pid."""
    with FakeAgent("endless") as agent:
        user_env = {"XDG_RUNTIME_DIR": str(_dir_of(OTHER, runtime_dir)), "HOME": "/"}
        out = runtime_dir / str(OTHER) / "never.msgpack"
        by_socket = _iket("record", str(agent.path), "-o", str(out), user=OTHER, env=user_env)
        by_pid = _iket("record", str(agent.pid), "-o", str(out), user=OTHER, env=user_env)
    assert _one_line_error(by_socket) == (
        f"{agent.path}: permission denied: the agent belongs to uid 0;"
        f" iket-tui must run as that user to reach it (this is uid {OTHER})"
    )
    assert _one_line_error(by_pid) == (
        f"the iket-tui agent of process {agent.pid} belongs to uid 0;"
        f" iket-tui must run as that user to reach it (this is uid {OTHER})"
    )
    assert not out.exists()


def test_connecting_as_root_to_another_users_socket_says_whose_it_is(runtime_dir: Path) -> None:
    shared = runtime_dir / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    with FakeAgent("endless", socket_path=shared / "theirs.sock", uid=OTHER) as agent:
        done = _iket("record", str(agent.path), "-o", str(runtime_dir / "never.msgpack"))
    assert _one_line_error(done) == (
        f"{agent.path}: peer runs as uid {OTHER}, so the agent belongs to uid {OTHER};"
        " iket-tui must run as that user to reach it (this is uid 0)"
    )


def test_the_real_agent_of_another_user_is_seen_by_pid(runtime_dir: Path) -> None:
    """The agent binds under a hidden name and renames it: the kernel lists the first name."""
    python, python_env = _python_of_another_user()
    theirs = _dir_of(OTHER, runtime_dir)
    code = "import sys, iket_tui.agent; iket_tui.agent.start(); print('ready', flush=True); sys.stdin.read()"
    env = {**os.environ, **python_env, "XDG_RUNTIME_DIR": str(theirs), "HOME": "/"}
    env.pop("IKET_TUI", None)
    target = subprocess.Popen(
        [python, "-c", code],
        env=env,
        user=OTHER,
        group=OTHER,
        cwd="/",
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert target.stdout is not None
        assert target.stdout.readline() == "ready\n"
        done = _iket("record", str(target.pid), "-o", str(runtime_dir / "never.msgpack"))
    finally:
        target.kill()
        target.wait()
    assert _one_line_error(done) == (
        f"the iket-tui agent of process {target.pid} belongs to uid {OTHER};"
        " iket-tui must run as that user to reach it (this is uid 0)"
    )
