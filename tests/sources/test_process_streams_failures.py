"""The merged stream of several processes when a process's stream fails, and a request's answer
that arrives before ``request`` returned.

A stream that fails when it is the only one (``run`` follows even one process through the
merged stream) fails the merged stream, as a lone socket source's failure does: the error is
the source's, not a note. One failing among several stays that process's, said as a note.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from fake_agent import FakeAgent

from iket_tui.protocol import messages as m
from iket_tui.sources.base import Answer, SourceBatch, SourceState
from iket_tui.sources.merged import FramesTo, ProcessStreams
from iket_tui.sources.reading import read_recording
from iket_tui.sources.socket import SocketSource

WAIT_S = 20.0


def drain(streams: ProcessStreams) -> list[SourceBatch]:
    """Every batch of the merged stream until it ends; one that has not ended within
    :data:`WAIT_S` (it waits for more while following) is closed and fails the test."""
    seen: list[SourceBatch] = []
    reading = threading.Thread(target=lambda: seen.extend(streams.batches()), daemon=True)
    reading.start()
    reading.join(WAIT_S)
    if reading.is_alive():
        streams.close_and_wait("the test gave up")
        raise AssertionError(f"the merged stream never ended; its notes: {[n for b in seen for n in b.notes]}")
    return seen


def messages(batches: list[SourceBatch]) -> list[m.Message]:
    """The messages of the batches (those sent one by one: a ``batch`` frame's are not)."""
    return [msg for batch in batches for msg in batch.messages if isinstance(msg, dict)]


def pass_ends(batches: list[SourceBatch]) -> list[int]:
    return [msg["seq"] for msg in messages(batches) if msg["type"] == m.PASS_END]


@pytest.mark.parametrize(
    ("mode", "error"),
    [("vanish", "disappeared in the middle of a message"), ("corrupt", "frame checksum mismatch")],
)
def test_the_only_process_failing_fails_the_merged_stream_with_its_error(tmp_path: Path, mode: str, error: str) -> None:
    out = tmp_path / "one.msgpack"
    with FakeAgent(mode) as agent:
        streams = ProcessStreams([agent.path], record_to=out, following=lambda: True)
        batches = drain(streams)
    assert batches[-1].state is SourceState.FAILED
    assert streams.error is not None and error in streams.error and "\n" not in streams.error
    assert batches[-1].error == streams.error
    assert not [note for batch in batches for note in batch.notes], "said once, as the error, not also as a note"
    assert pass_ends(batches) == [0, 1, 2], "everything before the failure was delivered"
    recorded, _ = read_recording(out)
    assert [msg["seq"] for msg in recorded if msg["type"] == m.PASS_END] == [0, 1, 2]


def test_one_process_failing_among_several_is_a_note_and_the_others_go_on(tmp_path: Path) -> None:
    with FakeAgent("vanish") as bad, FakeAgent("normal") as good:
        streams = ProcessStreams([bad.path, good.path])
        batches = drain(streams)
        bad_pid, good_pid = bad.pid, good.pid
    assert batches[-1].state is SourceState.ENDED and streams.error is None
    notes = [note for batch in batches for note in batch.notes]
    assert len(notes) == 1 and notes[0].startswith(f"pid {bad_pid}: ") and "middle of a message" in notes[0]
    ended = {msg["pid"]: msg["state"] for msg in messages(batches) if msg["type"] == m.PROCESS and "state" in msg}
    assert ended == {bad_pid: m.PROCESS_FAILED, good_pid: m.PROCESS_ENDED}


def test_every_process_failing_fails_the_merged_stream_naming_each() -> None:
    with FakeAgent("vanish") as first, FakeAgent("vanish") as second:
        streams = ProcessStreams([first.path, second.path])
        batches = drain(streams)
    assert batches[-1].state is SourceState.FAILED
    error = streams.error
    assert error is not None and error.startswith("every process's stream failed: ")
    assert f"pid {first.pid}: " in error and f"pid {second.pid}: " in error and "\n" not in error


class AnswersAtOnce:
    """A process's source whose answer reaches the merged stream before ``request`` returns:
    the interleaving a fast agent makes when the reader's thread wins the race. It waits (up
    to a second) for the answer to come out of the merged stream before returning its id."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.agent_hello: m.Message | None = None
        self.end_reason: str | None = None
        self.out = threading.Event()  # set by the test once the answer came out
        self._batches: queue.Queue[SourceBatch | None] = queue.Queue()
        self._next = 100  # ids unlike the merged stream's, so a mix-up shows

    def connect(self) -> m.Message:
        self.agent_hello = m.hello(role="agent", pid=4242, start_time=7, software_version="t", capabilities=[])
        return self.agent_hello

    def batches(self) -> Iterator[SourceBatch]:
        while (batch := self._batches.get()) is not None:
            yield batch

    def request(self, what: str, *, timeout_s: float = 5.0, **fields: object) -> int:
        theirs, self._next = self._next, self._next + 1
        response = {"type": m.RESPONSE, "id": theirs, "what": what, "ok": True}
        self._batches.put(SourceBatch(answers=(Answer(theirs, response=response),)))
        self.out.wait(1.0)
        return theirs

    def close(self, reason: str = "closed") -> None:
        self._batches.put(None)

    def close_and_wait(self, reason: str = "closed", *, timeout_s: float = 5.0) -> None:
        self.close(reason)


def test_an_answer_merged_before_request_returns_comes_under_the_id_it_returned() -> None:
    made: list[AnswersAtOnce] = []

    def reader_of(path: Path, frames_to: FramesTo | None) -> SocketSource:
        made.append(AnswersAtOnce(path))
        return cast(SocketSource, made[0])

    streams = ProcessStreams([Path("fast")], reader_of=reader_of)
    batches = streams.batches()
    assert next(batches).state is SourceState.LIVE
    answers: list[Answer] = []

    def read() -> None:
        for batch in batches:
            answers.extend(batch.answers)
            if answers:
                made[0].out.set()
                return

    reading = threading.Thread(target=read, daemon=True)
    reading.start()
    ours = streams.request(m.WHAT_STACKS)
    reading.join(WAIT_S)
    streams.close()
    assert [answer.request_id for answer in answers] == [ours]
    response = cast(dict[str, Any], answers[0].response)
    assert response["id"] == ours
