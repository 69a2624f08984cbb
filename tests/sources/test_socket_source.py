"""The live socket source against real agent processes: good ones, bad ones and vanishing ones."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest
from fake_agent import FakeAgent

from iket_tui.protocol import messages as m
from iket_tui.protocol.recording import MAGIC
from iket_tui.sources.base import Answer, SourceBatch, SourceError, SourceState
from iket_tui.sources.reading import read_recording
from iket_tui.sources.replay import RecordingSource
from iket_tui.sources.socket import SocketSource

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"


def _drain(source: SocketSource) -> list[SourceBatch]:
    return list(source.batches())


def _messages(batches: list[SourceBatch]) -> list[m.Message]:
    """What the batches hold, pass rows as the maps they stand for."""
    return [_as_map(item) for batch in batches for item in batch.messages]


def _as_map(item: m.Message | m.PassRow) -> m.Message:
    return m.message_of(item) if isinstance(item, list) else item


def _states(batches: list[SourceBatch]) -> list[SourceState]:
    return [batch.state for batch in batches if batch.state is not None]


def test_a_session_arrives_in_order_from_hello_to_bye() -> None:
    with FakeAgent("normal") as agent:
        source = SocketSource(agent.path)
        batches = _drain(source)
    msgs = _messages(batches)
    assert batches[0].state is SourceState.LIVE
    rows = [item for batch in batches for item in batch.messages if isinstance(item, list)]
    assert [row[0] for row in rows] == [msg["type"] for msg in msgs if msg["type"] in m.PASS_EVENTS]
    assert msgs[0]["type"] == m.HELLO and msgs[0]["pid"] == agent.pid
    assert [msg["type"] for msg in msgs[1:3]] == [m.SYNC, m.COMPILE_BEGIN]
    assert [msg["seq"] for msg in msgs if msg["type"] == m.PASS_END] == [0, 1, 2]
    assert msgs[-1]["type"] == m.BYE
    assert _states(batches) == [SourceState.LIVE, SourceState.ENDED]
    assert source.error is None
    assert source.end_reason == "the target said bye (exit)"
    assert source.description.startswith(f"pid {agent.pid}: ")


def test_the_recording_holds_every_frame_exactly_as_received(tmp_path: Path) -> None:
    sent = tmp_path / "sent.bin"
    out = tmp_path / "run.msgpack"
    with FakeAgent("normal", sent=sent) as agent:
        source = SocketSource(agent.path, record_to=out)
        received = _messages(_drain(source))
    data = out.read_bytes()
    assert data.startswith(MAGIC)
    assert sent.read_bytes() in data
    msgs, info = read_recording(out)
    assert msgs[0]["type"] == m.RECORDING and msgs[0]["source"] == source.description
    assert [msg for msg in msgs if msg["type"] not in (m.RECORDING, m.CHECKPOINT, m.END)] == received
    assert msgs[-1]["type"] == m.END
    assert msgs[-1]["messages"] == len(received)
    assert info.ended and info.cut_at is None


def test_a_target_that_hangs_up_without_bye_ends_with_a_note() -> None:
    with FakeAgent("nobye") as agent:
        batches = _drain(SocketSource(agent.path))
    assert _states(batches)[-1] is SourceState.ENDED
    assert [msg["seq"] for msg in _messages(batches) if msg["type"] == m.PASS_END] == [0, 1, 2]
    assert any("without saying bye" in note for note in batches[-1].notes)


def test_a_peer_that_vanishes_mid_frame_fails_after_delivering_everything_before(tmp_path: Path) -> None:
    out = tmp_path / "cut.msgpack"
    with FakeAgent("vanish") as agent:
        source = SocketSource(agent.path, record_to=out)
        batches = _drain(source)
    msgs = _messages(batches)
    assert [msg["seq"] for msg in msgs if msg["type"] == m.PASS_END] == [0, 1, 2]
    assert batches[-1].state is SourceState.FAILED
    assert batches[-1].error is not None and "disappeared in the middle of a message" in batches[-1].error
    assert "\n" not in batches[-1].error
    recorded, _ = read_recording(out)
    assert recorded[-1]["type"] == m.END and recorded[-1]["reason"].startswith("error: ")
    assert [msg for msg in recorded if msg["type"] not in (m.RECORDING, m.CHECKPOINT, m.END)] == msgs


def test_a_damaged_frame_fails_the_stream_after_everything_before_it(tmp_path: Path) -> None:
    out = tmp_path / "damaged.msgpack"
    with FakeAgent("corrupt") as agent:
        source = SocketSource(agent.path, record_to=out)
        batches = _drain(source)
    msgs = _messages(batches)
    assert [msg["type"] for msg in msgs[-3:]] == [m.PASS_START, m.PASS_END, m.CODEGEN_BEGIN]
    assert batches[-1].state is SourceState.FAILED
    assert batches[-1].error == f"protocol error from pid {agent.pid}: frame checksum mismatch"
    recorded, info = read_recording(out)
    assert [msg for msg in recorded if msg["type"] not in (m.RECORDING, m.CHECKPOINT, m.END)] == msgs
    assert info.ended and info.skipped_bytes == 0


def test_unknown_message_types_are_skipped_counted_and_still_recorded(tmp_path: Path) -> None:
    out = tmp_path / "future.msgpack"
    with FakeAgent("unknown") as agent:
        source = SocketSource(agent.path, record_to=out)
        batches = _drain(source)
    assert all(msg["type"] in m.KNOWN_TYPES for msg in _messages(batches))
    assert [msg["seq"] for msg in _messages(batches) if msg["type"] == m.PASS_END] == [0, 1, 2, 3]
    assert source.unknown == 1
    assert any("1 messages of types this iket-tui does not know" in note for note in batches[-1].notes)
    _, info = read_recording(out)
    assert info.unknown == 1


@pytest.mark.parametrize(
    ("mode", "error"),
    [
        ("garbage", "not an iket-tui agent (frame length"),
        ("major", "protocol version mismatch: peer speaks 2.0, this iket-tui speaks 1.1"),
    ],
)
def test_a_peer_that_speaks_something_else_is_refused_in_one_line(mode: str, error: str, tmp_path: Path) -> None:
    out = tmp_path / "never.msgpack"
    with FakeAgent(mode) as agent:
        source = SocketSource(agent.path, record_to=out)
        with pytest.raises(SourceError) as caught:
            source.connect()
        source.close()
    assert error in str(caught.value)
    assert "\n" not in str(caught.value)
    assert not out.exists()


def test_connect_errors_come_out_of_batches_as_a_failed_state() -> None:
    with FakeAgent("major") as agent:
        batches = _drain(SocketSource(agent.path))
    assert len(batches) == 1
    assert batches[0].state is SourceState.FAILED
    assert batches[0].error is not None and "protocol version mismatch" in batches[0].error


def test_a_peer_that_never_says_hello_times_out() -> None:
    with FakeAgent("silent") as agent, pytest.raises(SourceError, match="no hello within 1 s"):
        SocketSource(agent.path, hello_timeout_s=1.0).connect()


def test_a_stale_socket_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "stale.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.close()
    with pytest.raises(SourceError, match="connection refused"):
        SocketSource(path).connect()


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to run a peer as another user")
def test_another_users_socket_is_refused(runtime_dir: Path) -> None:
    shared = runtime_dir / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    runtime_dir.chmod(0o755)
    with (
        FakeAgent("normal", socket_path=shared / "other.sock", uid=65534) as agent,
        pytest.raises(
            SourceError, match="peer runs as uid 65534, so the agent belongs to uid 65534; iket-tui must run"
        ),
    ):
        SocketSource(agent.path).connect()


def test_close_from_another_thread_ends_a_live_stream_and_closes_the_recording(tmp_path: Path) -> None:
    out = tmp_path / "live.msgpack"
    with FakeAgent("endless") as agent:
        source = SocketSource(agent.path, record_to=out)
        first_passes = threading.Event()
        seen: list[SourceBatch] = []

        def read() -> None:
            for batch in source.batches():
                seen.append(batch)
                if any(_as_map(msg)["type"] == m.PASS_END for msg in batch.messages):
                    first_passes.set()

        reader = threading.Thread(target=read)
        reader.start()
        assert first_passes.wait(30)
        source.close_and_wait("stopped by the test")
        reader.join(30)
        assert not reader.is_alive()
    recorded, info = read_recording(out)
    assert info.ended
    assert recorded[-1] == {**recorded[-1], "type": m.END, "reason": "stopped by the test"}
    live = [msg for msg in recorded if msg["type"] not in (m.RECORDING, m.CHECKPOINT, m.END)]
    assert live[: len(_messages(seen))] == _messages(seen)


def test_asking_a_target_that_has_gone_is_one_clear_error() -> None:
    with FakeAgent("normal") as agent:
        source = SocketSource(agent.path)
        _drain(source)  # to its bye
    with pytest.raises(SourceError, match=r"is no longer connected \(the target exited, or the stream ended\)$"):
        source.request(m.WHAT_STACKS)


def _answers(batches: list[SourceBatch]) -> list[Answer]:
    return [answer for batch in batches for answer in batch.answers]


def test_a_request_nobody_answers_is_settled_once_overdue_in_a_batch() -> None:
    with FakeAgent("endless") as agent:
        source = SocketSource(agent.path)
        source.connect()
        asked = source.request(m.WHAT_STACKS, timeout_s=0.3)
        started = time.monotonic()
        seen: list[SourceBatch] = []
        for batch in source.batches():
            seen.append(batch)
            if batch.answers:
                waited = time.monotonic() - started
                break
        source.close_and_wait("done")
    assert _answers(seen) == [Answer(asked, error="no answer within 0.3 s (is the target still running the agent?)")]
    assert 0.3 <= waited < 5.0
    assert any(msg["type"] == m.PASS_END for msg in _messages(seen))  # the stream went on meanwhile


def test_a_request_still_open_when_the_target_dies_is_settled_with_why() -> None:
    with FakeAgent("quiet") as agent:
        source = SocketSource(agent.path)
        source.connect()
        asked = source.request(m.WHAT_IR, timeout_s=60.0, compile=1, seq=0, which="both")
        agent.process.kill()
        batches = _drain(source)
    (answer,) = _answers(batches)
    assert answer.request_id == asked and answer.response is None
    assert answer.error == f"pid {agent.pid} is no longer connected (the target closed the connection without a bye)"
    assert _states(batches)[-1] is SourceState.ENDED
    assert batches[-1].answers == (answer,)  # settled with the state that ends the stream, not lost before it


def test_a_recording_cannot_be_asked() -> None:
    source = RecordingSource(EXAMPLE, speed=0.0)
    with pytest.raises(SourceError, match=r"^a recording cannot be asked: this needs a live target$"):
        source.request(m.WHAT_STACKS, timeout_s=1.0)
