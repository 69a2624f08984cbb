"""iket-tui run on another machine through ssh, when ssh never ends: ``ls HOST`` and
``attach HOST:`` end with one line within their bound rather than hang, and the ssh that
reaps a bridge in the background never holds up this program's exit.

The ssh here is a real program named by ``IKET_TUI_SSH`` that takes the connection and never
answers (as a host that swallows packets does), the bound a short one injected for the test.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from iket_tui.endpoints import process_alive, process_start_time
from iket_tui.sources.base import SourceError
from iket_tui.sources.ssh import SSH_VARIABLE, RemoteTarget, SshSource, remote_pids, run_remote


@pytest.fixture
def silent_ssh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An ssh that says nothing and never ends on its own; its pid is written to ``ssh.pid``."""
    script = tmp_path / "ssh"
    script.write_text(f"#!/bin/sh\necho $$ > {tmp_path / 'ssh.pid'}\nexec sleep 600\n")
    script.chmod(0o755)
    monkeypatch.setenv(SSH_VARIABLE, str(script))
    return tmp_path / "ssh.pid"


def _assert_gone(pid_file: Path) -> None:
    if not pid_file.exists():
        return  # killed before it said its pid
    pid = int(pid_file.read_text())
    start = process_start_time(pid)
    assert start is None or not process_alive(pid, start), "the ssh left running"


def test_listing_the_agents_of_a_host_that_never_answers_is_one_line(silent_ssh: Path) -> None:
    with pytest.raises(SourceError) as raised:
        remote_pids("gpu-box", timeout_s=0.5)
    assert str(raised.value) == "gpu-box: no answer through ssh within 0.5 s (is the host reachable?)"
    _assert_gone(silent_ssh)


def test_a_remote_command_that_takes_long_gets_its_own_time_on_top(silent_ssh: Path) -> None:
    with pytest.raises(SourceError, match=r"within 0\.75 s"):
        run_remote("gpu-box", ["stacks", "1"], timeout_s=0.5, work_s=0.25)
    _assert_gone(silent_ssh)


def test_the_ssh_reaped_in_the_background_never_holds_up_the_exit(silent_ssh: Path) -> None:
    source = SshSource(RemoteTarget("gpu-box", 123))
    ours = source._connect_once()  # the ssh of one connection, then let go of
    ssh = source._ssh
    assert ssh is not None
    try:
        ours.close()
        source._reap()
        reapers = [thread for thread in threading.enumerate() if thread.name == "iket-tui ssh reaper"]
        assert reapers and all(thread.daemon for thread in reapers)
    finally:
        ssh.kill()
        ssh.wait()
