"""Replaying a recording as a source: order, pacing controls, notes and bad files."""

from __future__ import annotations

import queue
import threading
from pathlib import Path
from typing import Any, Literal

import pytest

from iket_tui.protocol import messages as m
from iket_tui.protocol.recording import MAGIC
from iket_tui.sources.base import PlaybackControl, SourceBatch, SourceState
from iket_tui.sources.reading import read_recording
from iket_tui.sources.recorder import RecordingWriter
from iket_tui.sources.replay import RecordingSource

WAIT_S = 30.0


def _record(path: Path, n: int, *, gap_ns: int = 1_000_000, close: bool = True) -> list[m.Message]:
    writer = RecordingWriter(path, source="pid 42: python demo.py")
    sent = [m.hello(role="agent", pid=42, start_time=7, software_version="x", capabilities=[], t_ns=1)]
    for seq in range(n):
        common: dict[str, Any] = {"compile": 1, "context": 0, "seq": seq, "depth": 0, "parent": None, "phase": None}
        sent.append(m.pass_start(name=f"tl.P{seq}", t_ns=10_000_000 + seq * gap_ns, **common))
    for msg in sent:
        writer.write(msg)
    writer.flush()
    if close:
        writer.close("done")
    return sent


class _Consumer:
    """Reads a source's batches on a worker thread, as the UI does."""

    def __init__(self, source: RecordingSource) -> None:
        self.batches: queue.Queue[SourceBatch] = queue.Queue()
        self.thread = threading.Thread(target=self._run, args=(source,))
        self.thread.start()

    def _run(self, source: RecordingSource) -> None:
        for batch in source.batches():
            self.batches.put(batch)

    def next(self) -> SourceBatch:
        return self.batches.get(timeout=WAIT_S)

    def until_state(self) -> list[SourceBatch]:
        got = [self.next()]
        while got[-1].state is None:
            got.append(self.next())
        return got


def _messages(batches: list[SourceBatch]) -> list[m.Message]:
    return [msg for batch in batches for msg in batch.messages]


@pytest.mark.parametrize("speed", [0.0, "max", 1.0, 50.0])
def test_a_replay_delivers_the_whole_file_in_order_and_ends(tmp_path: Path, speed: float | Literal["max"]) -> None:
    path = tmp_path / "r.msgpack"
    _record(path, 40)
    everything, _ = read_recording(path)
    batches = list(RecordingSource(path, speed=speed).batches())
    assert batches[0].state is SourceState.LIVE
    assert _messages(batches) == everything
    assert batches[-1].state is SourceState.ENDED
    assert batches[-1].notes == ()


def test_a_replay_is_a_playback_control(tmp_path: Path) -> None:
    path = tmp_path / "r.msgpack"
    _record(path, 1)
    source = RecordingSource(path, speed=2.0)
    assert isinstance(source, PlaybackControl)
    assert source.speed == 2.0 and not source.paused


def test_paused_replay_steps_one_message_at_a_time_then_plays_on(tmp_path: Path) -> None:
    path = tmp_path / "r.msgpack"
    _record(path, 30, gap_ns=1_000)
    everything, _ = read_recording(path)
    source = RecordingSource(path, start_paused=True)
    consumer = _Consumer(source)
    assert consumer.next().state is SourceState.LIVE
    stepped = []
    for _ in range(3):
        source.step()
        batch = consumer.next()
        assert len(batch.messages) == 1
        stepped.append(batch.messages[0])
    assert stepped == everything[:3]
    assert consumer.batches.empty()
    source.set_speed(0)
    source.set_paused(False)
    rest = consumer.until_state()
    assert stepped + _messages(rest) == everything
    assert rest[-1].state is SourceState.ENDED
    consumer.thread.join(WAIT_S)


def test_close_ends_a_paused_replay(tmp_path: Path) -> None:
    path = tmp_path / "r.msgpack"
    _record(path, 5)
    source = RecordingSource(path, start_paused=True)
    consumer = _Consumer(source)
    assert consumer.next().state is SourceState.LIVE
    source.close()
    consumer.thread.join(WAIT_S)
    assert not consumer.thread.is_alive()


def test_a_cut_recording_replays_what_it_holds_and_says_where_it_was_cut(tmp_path: Path) -> None:
    path = tmp_path / "r.msgpack"
    _record(path, 10)
    everything, _ = read_recording(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 30])
    batches = list(RecordingSource(path, speed=0).batches())
    replayed = _messages(batches)
    assert replayed == everything[: len(replayed)]
    assert batches[-1].state is SourceState.ENDED
    assert len(batches[-1].notes) == 1
    assert batches[-1].notes[0].startswith("recording cut at byte ")
    assert batches[-1].notes[0].endswith(f": {len(replayed)} complete messages replayed")


def test_a_recording_without_end_frame_says_so(tmp_path: Path) -> None:
    path = tmp_path / "r.msgpack"
    _record(path, 3, close=False)
    batches = list(RecordingSource(path, speed=0).batches())
    assert batches[-1].notes == ("recording has no end frame: its recorder stopped without closing it",)


@pytest.mark.parametrize(
    ("content", "error"),
    [(None, "no such file"), (b"", "empty file"), (b"#!/bin/sh\necho hi\n", "bad magic"), (MAGIC, "no complete frame")],
    ids=["missing", "empty", "garbage", "magic-only"],
)
def test_an_unreadable_file_fails_in_one_line(tmp_path: Path, content: bytes | None, error: str) -> None:
    path = tmp_path / "bad.msgpack"
    if content is not None:
        path.write_bytes(content)
    batches = list(RecordingSource(path).batches())
    assert len(batches) == 1
    assert batches[0].state is SourceState.FAILED
    assert batches[0].error is not None and error in batches[0].error and "\n" not in batches[0].error


def test_the_description_names_the_recorded_target(tmp_path: Path) -> None:
    path = tmp_path / "r.msgpack"
    _record(path, 1)
    source = RecordingSource(path)
    source.open()
    assert source.description == "recording r.msgpack of pid 42: python demo.py"
