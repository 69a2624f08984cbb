"""A client that outlives its agent: the target stops its agent and starts it again, or its agent
hangs up without a bye while it runs on. The client reconnects to the same socket, takes up the
stream where it left it (nothing twice, nothing lost), and shows and counts the gap; the
recording gets it all. A target that dies, or an agent that never comes back, ends the stream."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_agent import FakeAgent

from iket_tui.protocol import messages as m
from iket_tui.sources.base import Answer, SourceBatch, SourceState
from iket_tui.sources.reading import read_recording
from iket_tui.sources.socket import SocketSource

TARGET = Path(__file__).parent / "restarting_target.py"
TIMEOUT_S = 120.0


def _start(env: dict[str, str]) -> tuple[subprocess.Popen[str], Path]:
    full = {**os.environ, **env}
    full.pop("IKET_TUI", None)
    proc = subprocess.Popen([sys.executable, str(TARGET)], env=full, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, Path(proc.stdout.readline().strip())


@pytest.fixture
def gate(tmp_path: Path) -> Path:
    return tmp_path / "gate"


@pytest.fixture
def target(gate: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    proc, path = _start({"IKET_TEST_GATE": str(gate)})
    yield proc, path
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def _numbers(msgs: list[m.Message]) -> list[int]:
    return [int(msg["got"].split()[1]) for msg in msgs if msg["type"] == m.CALLBACK_MISMATCH]


def _maps(batches: list[SourceBatch]) -> list[m.Message]:
    return [m.message_of(item) if isinstance(item, list) else item for batch in batches for item in batch.messages]


def _read(source: SocketSource, on_event: dict[int, Path]) -> list[SourceBatch]:
    """Every batch to the end; touches ``on_event[n]`` once event ``n`` has arrived."""
    batches = []
    for batch in source.batches():
        batches.append(batch)
        for number in _numbers(_maps([batch])):
            if number in on_event:
                on_event.pop(number).touch()
    return batches


def test_an_agent_stopped_and_started_again_is_followed_with_nothing_twice_and_nothing_lost(
    target: tuple[subprocess.Popen[str], Path], gate: Path, tmp_path: Path
) -> None:
    proc, path = target
    out = tmp_path / "run.msgpack"
    source = SocketSource(path, record_to=out)
    batches = _read(source, {99: gate, 249: gate.with_name("gate.exit")})
    msgs = _maps(batches)
    assert _numbers(msgs) == list(range(250))
    assert proc.wait(TIMEOUT_S) == 0
    states = [batch.state for batch in batches if batch.state is not None]
    assert states == [SourceState.LIVE, SourceState.CONNECTING, SourceState.LIVE, SourceState.ENDED]
    hellos = [msg for msg in msgs if msg["type"] == m.HELLO]
    assert [hello["pid"] for hello in hellos] == [proc.pid, proc.pid]
    byes = [msg["reason"] for msg in msgs if msg["type"] == m.BYE]
    assert byes == ["stopped", "exit"]
    syncs = [msg for msg in msgs if msg["type"] == m.SYNC]
    assert [(sync["backlog"], sync["backlog_lost"]) for sync in syncs] == [(0, 0), (50, 0)]
    notes = [note for batch in batches for note in batch.notes]
    assert notes[0] == f"the agent of pid {proc.pid} stopped; waiting up to 30 s for it to start again"
    gap = rf"reconnected to pid {proc.pid} after \d+(\.\d+)? (ms|s) without its agent; nothing of the gap was lost"
    assert re.fullmatch(gap, notes[1]), notes[1]
    assert source.reconnections == 1
    assert source.end_reason == "the target said bye (exit)"

    recorded, info = read_recording(out)
    assert info.ended and info.cut_at is None
    stream = [msg for msg in recorded if msg["type"] not in (m.RECORDING, m.CHECKPOINT, m.END)]
    assert stream == msgs
    assert _numbers(recorded) == list(range(250))


def test_record_follows_a_target_whose_agent_restarts_to_its_exit(tmp_path: Path) -> None:
    proc, _path = _start({})
    out = tmp_path / "run.msgpack"
    try:
        done = subprocess.run(
            [sys.executable, "-m", "iket_tui", "record", str(proc.pid), "-o", str(out)],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
        assert proc.wait(TIMEOUT_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0] == f"iket-tui: the agent of pid {proc.pid} stopped; waiting up to 30 s for it to start again"
    assert lines[1].startswith(f"iket-tui: reconnected to pid {proc.pid} after ")
    recorded, info = read_recording(out)
    assert info.ended
    assert _numbers(recorded) == list(range(250))
    assert [msg["pid"] for msg in recorded if msg["type"] == m.HELLO] == [proc.pid, proc.pid]


def test_an_agent_that_hangs_up_without_a_bye_while_its_process_runs_is_reconnected_to() -> None:
    with FakeAgent("hangup") as agent:
        source = SocketSource(agent.path)
        source.connect()
        asked = source.request(m.WHAT_STACKS, timeout_s=60)
        batches = list(source.batches())
    msgs = _maps(batches)
    assert [msg["seq"] for msg in msgs if msg["type"] == m.PASS_END] == [0, 1, 2, 0, 1, 2]
    assert [msg["label"] for msg in msgs if msg["type"] == m.COMPILE_BEGIN] == ["resumed from 6"]
    notes = [note for batch in batches for note in batch.notes]
    assert notes[0] == f"pid {agent.pid} hung up without a bye but still runs; reconnecting for up to 30 s"
    assert notes[1].startswith(f"reconnected to pid {agent.pid} after ")
    answers = [answer for batch in batches for answer in batch.answers]
    assert answers == [
        Answer(asked, error=f"no answer: the connection to pid {agent.pid} was lost (it hung up without a bye)")
    ]
    assert [batch.state for batch in batches if batch.state is not None][-1] is SourceState.ENDED
    assert source.reconnections == 1


def test_a_filtered_client_resumes_after_the_events_its_filter_left_out() -> None:
    """The events a filtered client names in its resume include those its filter left out, as
    the agent's reports of ``filtered`` grew since the sync (docs/protocol.md "Filters"):
    otherwise the agent would send again as many events as the client already has."""
    with FakeAgent("hangup") as agent:
        source = SocketSource(agent.path, filters={"passes": ["tl.*"]})
        source.connect()
        source.request(m.WHAT_STACKS, timeout_s=60)  # the fake hangs up once it is asked
        msgs = _maps(list(source.batches()))
    assert [msg["label"] for msg in msgs if msg["type"] == m.COMPILE_BEGIN] == ["resumed from 10"]
    assert source.reconnections == 1


def test_an_agent_that_does_not_come_back_ends_the_stream_after_the_wait(gate: Path) -> None:
    proc, path = _start({"IKET_TEST_GATE": str(gate), "IKET_TEST_STAY": "1"})
    try:
        source = SocketSource(path, reconnect_s=1.0)
        batches = _read(source, {99: gate})
    finally:
        proc.kill()
        proc.wait()
    assert _numbers(_maps(batches)) == list(range(100))
    assert batches[-1].state is SourceState.ENDED
    assert batches[-1].notes == (f"the agent of pid {proc.pid} did not come back within 1 s",)
    assert source.reconnections == 0


def test_a_target_killed_ends_the_stream_at_once_without_waiting_for_its_agent(
    target: tuple[subprocess.Popen[str], Path],
) -> None:
    proc, path = target
    source = SocketSource(path)
    seen: list[SourceBatch] = []
    first = threading.Event()

    def read() -> None:
        for batch in source.batches():
            seen.append(batch)
            if _numbers(_maps([batch])):
                first.set()

    reader = threading.Thread(target=read)
    reader.start()
    assert first.wait(TIMEOUT_S)
    os.kill(proc.pid, signal.SIGKILL)  # not reaped yet: a zombie, whose agent will never come back
    reader.join(5.0)
    assert not reader.is_alive()
    assert seen[-1].state is SourceState.ENDED
    assert any("closed the connection without saying bye (killed?)" in note for note in seen[-1].notes)
    assert source.reconnections == 0
