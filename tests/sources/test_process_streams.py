"""Several real agent processes merged into one stream: each batch behind a ``process`` message
naming whose it is, one process ending while the other goes on, a request answered by the
process it names, and a recording that tells the processes apart when it is read again."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fake_agent import socket_of

from iket_tui.model.session import Session
from iket_tui.protocol import messages as m
from iket_tui.sources.base import SourceBatch, SourceState
from iket_tui.sources.merged import ProcessStreams
from iket_tui.sources.reading import read_recording

WAIT_S = 60.0
PROGRAM = """
import os, sys, threading, time
threading.Thread(target=time.sleep, args=(600,), name="only-in-" + sys.argv[1], daemon=True).start()
sys.stdin.readline()
"""


@pytest.fixture
def agents() -> Iterator[list[subprocess.Popen[str]]]:
    """Two real agents (``IKET_TUI=1``), each with a thread named after it, running until their
    stdin closes."""
    env = {**os.environ, "IKET_TUI": "1"}
    procs = [
        subprocess.Popen([sys.executable, "-c", PROGRAM, name], env=env, stdin=subprocess.PIPE, text=True)
        for name in ("first", "second")
    ]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def read_until(
    batches: Iterator[SourceBatch], seen: list[SourceBatch], done: Callable[[list[SourceBatch]], bool]
) -> None:
    deadline = time.monotonic() + WAIT_S
    for batch in batches:
        seen.append(batch)
        if done(seen):
            return
        assert time.monotonic() < deadline, "the merged stream never got there"


def whose(batches: list[SourceBatch]) -> list[tuple[int, str]]:
    """Each message as (the pid the last ``process`` message named, its type)."""
    out: list[tuple[int, str]] = []
    pid = 0
    for batch in batches:
        for msg in batch.messages:
            kind = msg["type"] if isinstance(msg, dict) else msg[0]
            if kind == m.PROCESS:
                pid = msg["pid"]
            else:
                out.append((pid, kind))
    return out


def ended_in(batches: list[SourceBatch]) -> list[m.Message]:
    """The ``process`` messages that say a process's stream ended."""
    return [
        msg
        for batch in batches
        for msg in batch.messages
        if isinstance(msg, dict) and msg["type"] == m.PROCESS and msg.get("state")
    ]


def test_two_agents_merge_into_one_stream_told_apart_and_recorded(
    agents: list[subprocess.Popen[str]], tmp_path: Path
) -> None:
    first, second = agents
    out = tmp_path / "two.msgpack"
    source = ProcessStreams([socket_of(first), socket_of(second)], record_to=out, description="pids 1, 2")
    assert [hello["pid"] for hello in source.connect()] == [first.pid, second.pid]
    seen: list[SourceBatch] = []
    batches = iter(source.batches())
    read_until(batches, seen, lambda got: {(first.pid, m.SYNC), (second.pid, m.SYNC)} <= set(whose(got)))
    assert seen[0].state is SourceState.LIVE

    asked = source.request(m.WHAT_STACKS, timeout_s=30, process=second.pid)
    read_until(batches, seen, lambda got: any(answer.request_id == asked for b in got for answer in b.answers))
    answers = [answer for batch in seen for answer in batch.answers if answer.request_id == asked]
    response = answers[0].response
    assert response is not None and response["ok"] and response["id"] == asked
    names = {thread["name"] for thread in response["threads"]}
    assert "only-in-second" in names and "only-in-first" not in names, "the process named answered"

    assert first.stdin is not None
    first.stdin.close()
    read_until(batches, seen, lambda got: bool(ended_in(got)))
    ended = ended_in(seen)
    assert [(msg["pid"], msg["state"]) for msg in ended] == [(first.pid, m.PROCESS_ENDED)]
    assert all(batch.state is not SourceState.ENDED for batch in seen), "the other process goes on"

    assert second.stdin is not None
    second.stdin.close()
    read_until(batches, seen, lambda got: got[-1].state is SourceState.ENDED)
    source.close_and_wait()

    msgs, info = read_recording(out)
    assert info.ended
    hellos = [(msg["pid"], msg["ppid"]) for msg in msgs if msg["type"] == m.HELLO]
    assert sorted(hellos) == sorted([(first.pid, os.getpid()), (second.pid, os.getpid())])
    session = Session()
    session.apply(msgs)
    assert [process.pid for process in session.tree.processes] == [first.pid, second.pid]
    assert all(process.exit_reason == "exit" for process in session.tree.processes), "each said bye"
    assert all(process.stream_end for process in session.tree.processes)
