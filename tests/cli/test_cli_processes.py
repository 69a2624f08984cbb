"""``attach PID PID`` and ``attach --all`` in a real terminal, against real TileLang programs
running the agent: one tree with a row per process, a header that counts them, and a recording
of every process's stream told apart."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import Terminal, assert_one_line_error, run_iket

from iket_tui import endpoints
from iket_tui.model.session import Session
from iket_tui.protocol import messages as m
from iket_tui.sources.reading import read_recording

pytestmark = pytest.mark.tilelang

TARGET = Path(__file__).parent / "tilelang_target.py"
WAIT_S = 120.0


@pytest.fixture
def programs() -> Iterator[list[subprocess.Popen[str]]]:
    """Two TileLang programs under the agent, each waiting for its cue to lower a kernel."""
    env = {**os.environ, "IKET_TUI": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, str(TARGET), "--on-cue"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
            wait_for_socket(proc.pid)
        yield procs
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def wait_for_socket(pid: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while not any(endpoint.pid == pid for endpoint in endpoints.list_endpoints(listening_only=True)):
        assert time.monotonic() < deadline, f"pid {pid} never served its agent"
        time.sleep(0.02)


def cue_and_finish(procs: list[subprocess.Popen[str]]) -> None:
    """Each program lowers its kernel, then exits."""
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline() == "lowered\n"
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(WAIT_S) == 0


def test_attach_two_pids_shows_both_processes_in_one_tree_and_records_them_apart(
    programs: list[subprocess.Popen[str]], tmp_path: Path
) -> None:
    out = tmp_path / "two.msgpack"
    first, second = programs
    terminal = Terminal("attach", str(first.pid), str(second.pid), "--record", str(out))
    terminal.wait_for(b"2 processes: 2 live")
    cue_and_finish(programs)
    terminal.wait_for(b"2 processes: 2 ended")
    terminal.press(b"q")
    assert terminal.wait_exit() == 0

    msgs, info = read_recording(out)
    assert info.ended
    named = [msg["pid"] for msg in msgs if msg["type"] == m.PROCESS]
    assert set(named) == {first.pid, second.pid}, "every run of frames names its process"
    session = Session()
    session.apply(msgs)
    processes = session.tree.processes
    assert sorted(process.pid for process in processes) == sorted([first.pid, second.pid])
    for process in processes:
        (compile_,) = process.compiles
        assert compile_.kernel == "add" and compile_.status.value == "done"
        assert len(compile_.contexts[0].passes) > 50 or sum(len(c.passes) for c in compile_.context_order) > 50
    dump = run_iket("dump", str(out))
    assert dump.returncode == 0
    assert f"process             pid={second.pid}" in dump.stdout


def test_attach_all_watches_every_agent_of_this_user(programs: list[subprocess.Popen[str]], tmp_path: Path) -> None:
    out = tmp_path / "all.msgpack"
    terminal = Terminal("attach", "--all", "--record", str(out))
    terminal.wait_for(b"2 processes: 2 live")
    cue_and_finish(programs)
    terminal.wait_for(b"2 processes: 2 ended")
    terminal.press(b"q")
    assert terminal.wait_exit() == 0
    msgs, _ = read_recording(out)
    assert {msg["pid"] for msg in msgs if msg["type"] == m.HELLO} == {proc.pid for proc in programs}


def test_attach_all_without_any_agent_and_a_bad_pid_among_several_are_one_line_errors() -> None:
    assert_one_line_error(run_iket("attach", "--all"), "no live iket-tui agents of this user")
    assert_one_line_error(run_iket("attach", "999999998", "999999999"), "no process with pid 999999998")
    assert_one_line_error(run_iket("attach", "--all", "123"), "name no TARGET with it")


def test_serve_attach_of_dead_pids_or_all_is_one_line() -> None:
    assert_one_line_error(run_iket("serve", "attach", "999999998", "999999999"), "no process with pid 999999998")
    assert_one_line_error(run_iket("serve", "attach", "--all"), "serve attach has no --all")
    assert_one_line_error(run_iket("serve", "attach", "999999999"), "no process with pid 999999999")


@pytest.mark.parametrize("follow", [True, False], ids=["follows", "no-follow"])
def test_run_follows_a_forked_child_unless_told_not_to(tmp_path: Path, follow: bool) -> None:
    out = tmp_path / "run.msgpack"
    children = Path(__file__).resolve().parents[1] / "agent" / "targets" / "children.py"
    choice = [] if follow else ["--no-follow"]
    result = run_iket("run", "--no-ui", "--record", str(out), *choice, "--", sys.executable, str(children), "fork")
    assert result.returncode == 0, result.stderr
    msgs, info = read_recording(out)
    assert info.ended
    hellos = [msg for msg in msgs if msg["type"] == m.HELLO]
    compiles = [msg for msg in msgs if msg["type"] == m.COMPILE_END]
    if not follow:
        assert len(hellos) == 1 and not compiles, "the program alone: its child's compile is not there"
        return
    parent, child = hellos
    assert child["ppid"] == parent["pid"]
    assert [msg["ok"] for msg in compiles] == [True], "the child's compile, told apart"
    assert next(msg["pid"] for msg in msgs if msg["type"] == m.PROCESS) == child["pid"]


def test_attach_several_where_one_socket_refuses_leaves_no_recording(
    programs: list[subprocess.Popen[str]], tmp_path: Path
) -> None:
    out = tmp_path / "never.msgpack"
    dead = tmp_path / "dead.sock"
    bound = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    bound.bind(str(dead))  # bound, never listening: a stale socket
    try:
        result = run_iket("attach", str(programs[0].pid), str(dead), "--record", str(out))
    finally:
        bound.close()
    assert_one_line_error(result, str(dead), "connection refused")
    assert not out.exists(), "no recording of a stream that never started"
