"""``--format json`` of ls and stacks: one JSON document on stdout, with the keys
docs/commands.md names, read by a script as it is printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import FakeAgent, run_iket, wait_until

from iket_tui import endpoints

WAITING = """
import sys, time

def waiting_for_the_test():
    sys.stdin.readline()

def outer():
    waiting_for_the_test()

outer()
"""


@pytest.fixture
def program(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """A Python program of this user with the agent, waiting in ``waiting_for_the_test``."""
    script = tmp_path / "waiting.py"
    script.write_text(WAITING)
    target = subprocess.Popen(
        [sys.executable, str(script)], env={**os.environ, "IKET_TUI": "1"}, stdin=subprocess.PIPE, text=True
    )
    try:

        def listening() -> bool:
            start = endpoints.process_start_time(target.pid)
            return start is not None and endpoints.socket_path_for(target.pid, start).exists()

        wait_until(listening)
        yield target
    finally:
        target.kill()
        target.wait()


def test_ls_json_lists_each_live_agent_with_its_pid_socket_and_argv() -> None:
    with FakeAgent("endless") as agent:
        done = run_iket("ls", "--format", "json")
    assert done.returncode == 0, done.stderr
    (listed,) = json.loads(done.stdout)
    assert set(listed) == {"pid", "uptime_s", "start_time", "socket", "argv"}
    assert listed["pid"] == agent.pid and listed["socket"] == str(agent.path)
    assert listed["argv"][-3:] == ["endless", "--exit-code", "0"]
    assert isinstance(listed["uptime_s"], float) and listed["uptime_s"] >= 0


def test_ls_json_without_agents_is_an_empty_list() -> None:
    done = run_iket("ls", "--format", "json")
    assert done.returncode == 0 and json.loads(done.stdout) == []


def test_stacks_json_gives_each_threads_frames_innermost_first(program: subprocess.Popen[str]) -> None:
    done = run_iket("stacks", str(program.pid), "--format", "json")
    assert done.returncode == 0, done.stderr
    stacks = json.loads(done.stdout)
    assert set(stacks) == {"target", "threads", "python_error", "compiler_processes"}
    assert stacks["python_error"] is None and stacks["compiler_processes"] == []
    (main,) = [thread for thread in stacks["threads"] if thread["main"]]
    assert not any(thread["agent"] for thread in stacks["threads"])  # as the text, without --all
    assert set(main) == {"id", "name", "main", "daemon", "agent", "frames", "outer_frames_left_out"}
    functions = [frame["function"] for frame in main["frames"]]
    assert functions[:3] == ["waiting_for_the_test", "outer", "<module>"]
    innermost = main["frames"][0]
    assert innermost["file"].endswith("waiting.py") and innermost["code"] == "sys.stdin.readline()"

    with_agent = json.loads(run_iket("stacks", str(program.pid), "--format", "json", "--all").stdout)
    assert any(thread["agent"] for thread in with_agent["threads"])


LOCAL_SSH = """#!/bin/sh
# ssh that runs the remote command here: drops its options and the host, logs what it ran
while [ "$1" = "-T" ] || [ "$1" = "-o" ]; do [ "$1" = "-o" ] && shift; shift; done
shift
echo "$@" >> {log}
exec sh -c "$*"
"""


def test_native_stacks_of_another_machine_come_in_json_from_there(
    program: subprocess.Popen[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ssh, log = tmp_path / "ssh", tmp_path / "ssh.log"
    ssh.write_text(LOCAL_SSH.format(log=log))
    ssh.chmod(0o755)
    monkeypatch.setenv("IKET_TUI_SSH", str(ssh))
    monkeypatch.setenv("IKET_TUI_REMOTE", f"{sys.executable} -m iket_tui")
    done = run_iket("stacks", f"gpu-box:{program.pid}", "--native", "--format", "json")
    assert "--format json" in log.read_text()
    stacks = json.loads(done.stdout)  # whether or not py-spy may trace it here, the answer is JSON
    assert {"target", "threads", "native", "native_error"} <= set(stacks)
    assert [thread["frames"][0]["function"] for thread in stacks["threads"] if thread["main"]] == [
        "waiting_for_the_test"
    ]
    assert done.returncode == (0 if stacks["native"] is not None else 2), done.stderr
