"""A socket that disappears (a tmp cleaner, a logout removing the runtime directory) or is
replaced: the agent notices within a few seconds and binds again at the same path, and the
clients connected meanwhile are served on."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from agent_wire import WireClient, socket_of, spawn_target

from iket_tui.protocol import messages as m

BACK_WITHIN_S = 5.0
PLAIN_OUTPUT = "plain started\ntilelang imported: False\nwait knob inherited: False\n"


@pytest.fixture
def socket_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A socket directory of this test alone, for the target and for this process alike."""
    parent = Path(tempfile.mkdtemp(prefix="ikr"))
    path = parent / "sockets"
    monkeypatch.setenv("IKET_TUI_SOCKET_DIR", str(path))
    yield path
    shutil.rmtree(parent, ignore_errors=True)


def _back_within(path: Path, seconds: float) -> float:
    """Seconds until ``path`` is a socket that an agent answers on again."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        try:
            if stat.S_ISSOCK(path.lstat().st_mode):
                return time.monotonic() - started
        except FileNotFoundError:
            pass
        time.sleep(0.02)
    raise AssertionError(f"{path} was not bound again within {seconds} s")


def _remove_socket(path: Path) -> None:
    path.unlink()


def _remove_directory(path: Path) -> None:
    shutil.rmtree(path.parent)


def _replace_socket(path: Path) -> None:
    replacement = path.with_name("planted")
    replacement.write_text("not a socket")
    os.replace(replacement, path)


@pytest.mark.parametrize("damage", [_remove_socket, _remove_directory, _replace_socket])
def test_the_agent_binds_its_socket_again_and_serves_old_and_new_clients(
    damage: Callable[[Path], None], socket_dir: Path, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    proc = spawn_target("plain.py", env={"IKET_TEST_GATE": str(gate)})
    try:
        path = socket_of(proc)
        before = WireClient(path)
        before.catch_up()

        damage(path)
        _back_within(path, BACK_WITHIN_S)

        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(socket_dir.stat().st_mode) == 0o700
        after = WireClient(path)
        assert after.agent_hello["pid"] == proc.pid
        _, sync = after.catch_up()
        assert sync["type"] == m.SYNC
        gate.touch()
        for client in (before, after):
            assert client.read_to_end()[-1]["type"] == m.BYE
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (proc.returncode, stdout, stderr) == (3, PLAIN_OUTPUT, "")
    assert not path.exists(), "the agent removes the socket it bound again at exit"
