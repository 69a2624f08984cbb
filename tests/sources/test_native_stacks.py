"""Native stacks are a request through the source: a live local source reads them with py-spy
of the process its agent's hello named and the kernel says serves the socket, on a thread of its
own while the stream goes on; a merged source asks the process named; a recording and a socket
served by another process are refused without running py-spy.

Where a test must know exactly how py-spy was run, a stand-in takes its place (``stand_in``): it
notes its arguments, waits until the test releases it, and prints a stack. The test of the real
py-spy asks it for the peer's stacks when it is installed, and otherwise checks the one-line
answer that says it is needed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fake_agent import FakeAgent, socket_of

from iket_tui.sources import py_spy
from iket_tui.sources.base import NATIVE_STACKS, NOT_LIVE, Answer, SourceBatch, SourceError
from iket_tui.sources.merged import ProcessStreams
from iket_tui.sources.replay import RecordingSource
from iket_tui.sources.socket import SocketSource

WAIT_S = 60.0
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"
PROGRAM = """
import sys, threading, time
def only_in_this_program():
    sys.stdin.readline()
only_in_this_program()
"""
STAND_IN = """#!/bin/sh
echo "$@" >> {calls}
tries=0
while [ ! -e {release} ]; do
    tries=$((tries + 1))
    if [ "$tries" -gt 600 ]; then echo "never released" >&2; exit 1; fi
    sleep 0.05
done
echo 'Thread 1 (idle): "MainThread"'
echo '    stand_in_frame (stand_in.py:1)'
"""


@dataclass
class StandIn:
    """py-spy's stand-in: ``calls`` holds one line of arguments per run; it dumps once ``release`` exists."""

    calls: Path
    release: Path

    def runs(self) -> list[str]:
        return self.calls.read_text().splitlines() if self.calls.exists() else []


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StandIn:
    found = StandIn(tmp_path / "calls", tmp_path / "release")
    script = tmp_path / "py-spy"
    script.write_text(STAND_IN.format(calls=found.calls, release=found.release))
    script.chmod(0o755)
    monkeypatch.setattr(py_spy, "py_spy_path", lambda: str(script))
    return found


@pytest.fixture
def agents() -> Iterator[list[subprocess.Popen[str]]]:
    """Two real agents (``IKET_TUI=1``) running until their stdin closes."""
    env = {**os.environ, "IKET_TUI": "1"}
    procs = [
        subprocess.Popen([sys.executable, "-c", PROGRAM], env=env, stdin=subprocess.PIPE, text=True) for _ in range(2)
    ]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def answer_to(batches: Iterator[SourceBatch], request_id: int, messages: list[object] | None = None) -> Answer:
    deadline = time.monotonic() + WAIT_S
    for batch in batches:
        if messages is not None:
            messages += batch.messages
        for answer in batch.answers:
            if answer.request_id == request_id:
                return answer
        assert time.monotonic() < deadline, "no answer came"
    raise AssertionError("the stream ended without the answer")


def test_a_live_source_reads_its_own_peers_native_stacks_with_py_spy(
    agents: list[subprocess.Popen[str]],
) -> None:
    """The real py-spy where it is installed; where it is not, the answer says it is needed."""
    agent = agents[0]
    source = SocketSource(socket_of(agent))
    try:
        source.connect()
        asked = source.request(NATIVE_STACKS, timeout_s=30)
        answer = answer_to(iter(source.batches()), asked)
    finally:
        source.close_and_wait()
    if py_spy.py_spy_path() is None:
        assert answer.response is None
        assert answer.error == "native stacks need py-spy: pip install 'iket-tui[native]'"
        return
    if answer.error is not None and answer.error.startswith(f"py-spy could not read pid {agent.pid}: "):
        pytest.skip(f"py-spy may not trace here: {answer.error}")
    assert answer.error is None and answer.response is not None
    assert answer.response["ok"] and answer.response["pid"] == agent.pid
    assert answer.response["target"] == f"pid {agent.pid}"
    assert "only_in_this_program" in answer.response["text"]


def test_without_py_spy_the_answer_says_it_is_needed(
    agents: list[subprocess.Popen[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(py_spy, "py_spy_path", lambda: None)
    source = SocketSource(socket_of(agents[0]))
    try:
        source.connect()
        asked = source.request(NATIVE_STACKS, timeout_s=30)
        answer = answer_to(iter(source.batches()), asked)
    finally:
        source.close_and_wait()
    assert answer == Answer(asked, error="native stacks need py-spy: pip install 'iket-tui[native]'")


def test_py_spy_runs_off_the_askers_thread_on_the_pid_the_agent_named(
    agents: list[subprocess.Popen[str]], stand_in: StandIn
) -> None:
    """The request returns while py-spy still runs (it waits to be released, and says it never
    was after 30 s), and it is run once, on the agent's pid. The answer is the source's own: no
    message of the stream holds it."""
    agent = agents[0]
    source = SocketSource(socket_of(agent))
    messages: list[object] = []
    try:
        source.connect()
        asked = source.request(NATIVE_STACKS, timeout_s=40)
        stand_in.release.touch()
        answer = answer_to(iter(source.batches()), asked, messages)
    finally:
        source.close_and_wait()
    assert messages and not [msg for msg in messages if isinstance(msg, dict) and msg["type"] == "response"]
    assert answer.error is None and answer.response is not None
    assert answer.response["pid"] == agent.pid
    assert answer.response["text"].splitlines() == [
        'Thread 1 (idle): "MainThread"',
        "    stand_in_frame (stand_in.py:1)",
    ]
    assert stand_in.runs() == [f"dump --pid {agent.pid} --native"]


def test_a_socket_served_by_another_process_is_not_read_with_py_spy(runtime_dir: Path, stand_in: StandIn) -> None:
    """An agent at a socket of another name (a forwarded one, say) whose hello names a process
    that does not serve it here: py-spy is not pointed at the pid it named."""
    stand_in.release.touch()
    with FakeAgent("quiet", socket_path=runtime_dir / "forwarded.sock", claim_pid=os.getpid()) as agent:
        source = SocketSource(agent.path)
        try:
            assert source.connect()["pid"] == os.getpid()
            asked = source.request(NATIVE_STACKS, timeout_s=30)
            answer = answer_to(iter(source.batches()), asked)
        finally:
            source.close_and_wait()
    assert answer.response is None
    assert answer.error == (
        f"native stacks are read on the target's machine, and pid {os.getpid()} does not serve"
        f" {runtime_dir / 'forwarded.sock'} here (a forwarded socket?)"
    )
    assert stand_in.runs() == []


def test_a_merged_source_reads_the_native_stacks_of_the_process_named(
    agents: list[subprocess.Popen[str]], stand_in: StandIn
) -> None:
    first, second = agents
    source = ProcessStreams([socket_of(first), socket_of(second)], description="two")
    stand_in.release.touch()
    try:
        source.connect()
        batches = iter(source.batches())
        next(batches)  # live
        asked = source.request(NATIVE_STACKS, timeout_s=30, process=second.pid)
        answer = answer_to(batches, asked)
        with pytest.raises(SourceError, match=r"^pid 1 is not one of the processes watched$"):
            source.request(NATIVE_STACKS, timeout_s=30, process=1)
    finally:
        source.close_and_wait()
    assert answer.response is not None and answer.response["id"] == asked
    assert answer.response["pid"] == second.pid and answer.response["target"] == f"pid {second.pid}"
    assert stand_in.runs() == [f"dump --pid {second.pid} --native"]


def test_a_recording_refuses_native_stacks_without_running_py_spy(stand_in: StandIn) -> None:
    stand_in.release.touch()
    with pytest.raises(SourceError) as refused:
        RecordingSource(EXAMPLE).request(NATIVE_STACKS, timeout_s=30)
    assert str(refused.value) == NOT_LIVE
    assert stand_in.runs() == []


def test_a_second_ask_while_py_spy_reads_is_refused_and_a_failure_is_one_line(
    agents: list[subprocess.Popen[str]], stand_in: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """py-spy pauses the target while it reads it: a second ask meanwhile is answered at once
    that it is under way, and runs nothing. Whatever goes wrong reading is the request's own
    one-line answer, never a traceback on the reader's thread."""
    source = SocketSource(socket_of(agents[0]))
    try:
        source.connect()
        batches = iter(source.batches())
        first = source.request(NATIVE_STACKS, timeout_s=40)
        second = source.request(NATIVE_STACKS, timeout_s=40)
        assert answer_to(batches, second) == Answer(second, error="native stacks are being read already: wait for them")
        stand_in.release.touch()
        assert answer_to(batches, first).error is None
        assert stand_in.runs() == [f"dump --pid {agents[0].pid} --native"]

        def broken(pid: int, timeout_s: float) -> py_spy.NativeStacks:
            raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")

        monkeypatch.setattr(source, "_native_stacks", lambda hello, timeout_s: broken(hello["pid"], timeout_s))
        third = source.request(NATIVE_STACKS, timeout_s=40)
        assert answer_to(batches, third) == Answer(
            third,
            error="native stacks failed: UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position 0: "
            "invalid start byte",
        )
    finally:
        source.close_and_wait()
