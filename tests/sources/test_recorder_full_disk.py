"""A recording onto a full disk: the writer stops at the last whole frame and says where, and a
live source goes on streaming without it. The disk is a real small tmpfs or ``/dev/full``."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from fake_agent import FakeAgent
from full_disk import DEV_FULL, small_filesystem

from iket_tui.protocol import messages as m
from iket_tui.sources.base import SourceError, SourceState
from iket_tui.sources.reading import read_recording
from iket_tui.sources.recorder import RecordingWriter
from iket_tui.sources.socket import SocketSource

STOPPED = re.compile(
    r"^recording stopped, the disk is full: (?P<path>\S+) was cut at byte (?P<at>\d+), "
    r"after (?P<messages>\d+) messages \(all of them replay\)$"
)


def _pass(seq: int) -> m.Message:
    common: dict[str, Any] = {"compile": 1, "context": 0, "seq": seq, "depth": 0, "parent": None, "phase": None}
    return m.pass_end(name=f"tl.Pass{seq}" + "x" * 300, t_ns=1_000 + seq, duration_ns=5, **common)


def _stream(msgs: list[m.Message]) -> list[m.Message]:
    return [msg for msg in msgs if msg["type"] not in (m.RECORDING, m.CHECKPOINT, m.END)]


def test_a_full_disk_stops_the_recording_after_its_last_whole_frame(tmp_path: Path) -> None:
    with small_filesystem(tmp_path) as disk:
        path = disk / "run.msgpack"
        writer = RecordingWriter(path, source="pid 42: test", checkpoint_every=50)
        sent: list[m.Message] = []
        with pytest.raises(SourceError) as stopped:
            for seq in range(10_000):
                msg = _pass(seq)
                writer.write(msg)
                writer.flush()
                sent.append(msg)
        said = STOPPED.match(str(stopped.value))
        assert said is not None, str(stopped.value)
        assert said["path"] == str(path)
        kept = int(said["messages"])
        assert writer.messages == kept and 0 < kept <= len(sent) + 1
        writer.write(_pass(99_999))  # a stopped writer takes nothing more, and says nothing more
        writer.close("closed")
        msgs, info = read_recording(path)
        assert _stream(msgs) == [*sent, _pass(len(sent))][:kept]
        assert info.cut_at is None and info.skipped_bytes == 0
        if info.ended:  # the end frame fitted into what the cut frame left free
            assert msgs[-1]["reason"] == "recording stopped: the disk is full" and msgs[-1]["messages"] == kept
        assert path.stat().st_size >= int(said["at"]) and path.stat().st_size - int(said["at"]) < 200


def test_a_recording_that_cannot_start_leaves_the_file_it_would_replace(tmp_path: Path) -> None:
    with small_filesystem(tmp_path, kib=16) as disk:
        path = disk / "run.msgpack"
        path.write_bytes(b"an older recording")
        filler = disk / "filler"
        with open(filler, "wb", buffering=0) as out, pytest.raises(OSError):
            while True:
                out.write(b"\0" * 4096)
        with pytest.raises(SourceError, match=r"the disk is full: .*nothing was recorded"):
            RecordingWriter(path, source="pid 42: test")
        assert path.read_bytes() == b"an older recording"
        assert sorted(p.name for p in disk.iterdir()) == ["filler", "run.msgpack"]


@pytest.mark.skipif(not DEV_FULL.exists(), reason="needs /dev/full")
def test_dev_full_is_a_disk_that_is_full_from_the_start() -> None:
    with pytest.raises(SourceError) as refused:
        RecordingWriter(DEV_FULL, source="pid 42: test")
    assert (
        str(refused.value) == "the disk is full: /dev/full cannot hold even a recording's header; nothing was recorded"
    )


def test_a_live_source_goes_on_when_its_recording_stops(tmp_path: Path) -> None:
    with small_filesystem(tmp_path) as disk, FakeAgent("endless") as agent:
        out = disk / "live.msgpack"
        source = SocketSource(agent.path, record_to=out)
        stopped_at: int | None = None
        after = 0
        deadline = time.monotonic() + 60
        for batch in source.batches():
            assert batch.state in (None, SourceState.LIVE), batch.error
            if batch.recording_stopped is not None:
                assert stopped_at is None, "said twice"
                stopped_at = time.monotonic()
                said = STOPPED.match(batch.recording_stopped)
                assert said is not None, batch.recording_stopped
            elif stopped_at is not None:
                after += len(batch.messages)
                if after >= 200:
                    source.close("seen enough")
            assert time.monotonic() < deadline, "the recording never stopped, or the stream stopped with it"
        assert after >= 200
        assert source.error is None
        msgs, info = read_recording(out)
    assert info.cut_at is None and info.skipped_bytes == 0
    assert _stream(msgs)[0]["type"] == m.HELLO and len(_stream(msgs)) == int(said["messages"])
