"""Recording files as written by the recorder and read back: checkpoints, end frame, cuts."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import encode_message
from iket_tui.protocol.frames import HEADER, encode_frame
from iket_tui.protocol.recording import MAGIC
from iket_tui.sources.base import SourceError
from iket_tui.sources.reading import RecordingReader, read_recording, recording_notes
from iket_tui.sources.recorder import RecordingWriter


def _stream(n: int) -> list[m.Message]:
    msgs = [m.hello(role="agent", pid=42, start_time=7, software_version="x", capabilities=[], t_ns=1_000)]
    for seq in range(n):
        common: dict[str, Any] = {"compile": 1, "context": 0, "seq": seq, "depth": 0, "parent": None, "phase": None}
        msgs.append(m.pass_start(name=f"tl.P{seq}", t_ns=2_000 + seq * 10, **common))
        msgs.append(m.pass_end(name=f"tl.P{seq}", t_ns=2_005 + seq * 10, duration_ns=5, **common))
    return msgs


def _write(path: Path, msgs: list[m.Message], *, checkpoint_every: int = 1000, close: bool = True) -> None:
    writer = RecordingWriter(path, source="pid 42: test", checkpoint_every=checkpoint_every)
    for msg in msgs:
        writer.write(msg)
    writer.flush()
    if close:
        writer.close("target exited")


def _stream_part(msgs: list[m.Message]) -> list[m.Message]:
    return [msg for msg in msgs if msg["type"] not in (m.RECORDING, m.CHECKPOINT, m.END)]


def test_a_closed_recording_holds_header_stream_checkpoints_and_end(tmp_path: Path) -> None:
    path = tmp_path / "r.msgpack"
    sent = _stream(10)
    _write(path, sent, checkpoint_every=5)
    msgs, info = read_recording(path)
    assert path.read_bytes().startswith(MAGIC)
    assert msgs[0]["type"] == m.RECORDING and msgs[0]["source"] == "pid 42: test"
    assert list(msgs[0]["proto"]) == list(m.PROTOCOL_VERSION)
    assert _stream_part(msgs) == sent
    checkpoints = [msg for msg in msgs if msg["type"] == m.CHECKPOINT]
    assert [c["messages"] for c in checkpoints] == [5, 10, 15, 20]
    assert msgs[-1] == m.end(messages=len(sent), dropped=0, t_ns=sent[-1]["t_ns"], reason="target exited")
    assert info.ended and info.cut_at is None and recording_notes(info) == ()


def test_drops_reported_by_the_agent_reach_checkpoints_and_end(tmp_path: Path) -> None:
    path = tmp_path / "r.msgpack"
    sent = [
        *_stream(2),
        m.dropped(t_ns=5_000, count=3, total=3),
        m.heartbeat(t_ns=6_000, produced=9, dropped=4, open_passes=0),
    ]
    _write(path, sent, checkpoint_every=1)
    msgs, _ = read_recording(path)
    assert [c["dropped"] for c in msgs if c["type"] == m.CHECKPOINT][-2:] == [3, 4]
    assert msgs[-1]["dropped"] == 4


def test_a_drop_count_no_agent_could_reach_is_not_added_to_the_recordings_count(tmp_path: Path) -> None:
    """A lying report (2**63 dropped, or below 0) would be written into every checkpoint and the
    end frame, and said by ``record``: it is left out, and the honest reports still add up."""
    path = tmp_path / "r.msgpack"
    sent = [
        *_stream(2),
        m.dropped(t_ns=5_000, count=3, total=3),
        m.heartbeat(t_ns=6_000, produced=9, dropped=2**63, open_passes=0),
        m.dropped(t_ns=6_500, count=1, total=-1),
        m.heartbeat(t_ns=7_000, produced=9, dropped=4, open_passes=0),
    ]
    _write(path, sent, checkpoint_every=1)
    msgs, _ = read_recording(path)
    assert [c["dropped"] for c in msgs if c["type"] == m.CHECKPOINT][-4:] == [3, 3, 3, 4]
    assert msgs[-1]["dropped"] == 4


def test_drops_of_every_connection_and_every_process_add_up(tmp_path: Path) -> None:
    """Each connection reports a running total of its own: an agent that came back (a second
    hello of the same process) starts again from 0, and another process counts apart."""
    path = tmp_path / "r.msgpack"

    def hello(pid: int) -> m.Message:
        return m.hello(role="agent", pid=pid, start_time=7, software_version="x", capabilities=[], t_ns=1_000)

    sent = [
        hello(42),
        m.dropped(t_ns=2_000, count=30, total=30),
        m.bye(t_ns=3_000, produced=40, dropped=30, reason="stopped"),
        hello(42),  # the agent again, on a new connection
        m.dropped(t_ns=4_000, count=20, total=20),
        m.process(pid=43, start_time=8),
        hello(43),
        m.heartbeat(t_ns=5_000, produced=9, dropped=5, open_passes=0),
        m.process(pid=42, start_time=7),
        m.heartbeat(t_ns=6_000, produced=90, dropped=20, open_passes=0),
    ]
    _write(path, sent, checkpoint_every=1)
    msgs, _ = read_recording(path)
    assert [c["dropped"] for c in msgs if c["type"] == m.CHECKPOINT] == [0, 30, 30, 30, 50, 50, 50, 55, 55, 55]
    assert msgs[-1]["dropped"] == 55


def test_a_recording_never_closed_reads_fully_and_says_it_has_no_end(tmp_path: Path) -> None:
    path = tmp_path / "r.msgpack"
    sent = _stream(4)
    _write(path, sent, close=False)
    msgs, info = read_recording(path)
    assert _stream_part(msgs) == sent
    assert not info.ended
    assert recording_notes(info) == ("recording has no end frame: its recorder stopped without closing it",)


def _frame_ends(data: bytes) -> list[int]:
    return [end for end, _ in _frames(data)]


def _frames(data: bytes) -> list[tuple[int, bool]]:
    """Where each frame ends, and whether it holds a message readers deliver (not the index)."""
    ends = []
    pos = len(MAGIC)
    while pos < len(data):
        (length, _crc) = HEADER.unpack_from(data, pos)
        delivered = msgpack.unpackb(data[pos + HEADER.size : pos + HEADER.size + length])["type"] != m.INDEX
        pos += HEADER.size + length
        ends.append((pos, delivered))
    return ends


def test_a_recording_cut_at_any_byte_reads_every_complete_frame_or_fails_in_one_line(tmp_path: Path) -> None:
    full = tmp_path / "full.msgpack"
    _write(full, _stream(6), checkpoint_every=4)
    data = full.read_bytes()
    everything, _ = read_recording(full)
    ends = _frames(data)
    assert not all(delivered for _, delivered in ends)  # index frames among them
    cut_file = tmp_path / "cut.msgpack"
    for cut in range(len(data) + 1):
        cut_file.write_bytes(data[:cut])
        frames = [end for end, _ in ends if end <= cut]
        complete = sum(1 for end, delivered in ends if end <= cut and delivered)
        if complete == 0:
            with pytest.raises(SourceError) as caught:
                read_recording(cut_file)
            assert "\n" not in str(caught.value)
            continue
        msgs, info = read_recording(cut_file)
        assert msgs == everything[:complete], cut
        on_boundary = cut == frames[-1]
        assert info.cut_at == (None if on_boundary else frames[-1]), cut
        if not on_boundary:
            assert recording_notes(info)[0] == f"recording cut at byte {frames[-1]}: {complete} complete messages read"


def test_a_damaged_stretch_is_skipped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "r.msgpack"
    sent = _stream(3)
    _write(path, sent)
    data = bytearray(path.read_bytes())
    ends = _frame_ends(bytes(data))
    data[ends[2] + HEADER.size + 3] ^= 0xFF  # inside the fourth frame: the first pass_end
    path.write_bytes(bytes(data))
    msgs, info = read_recording(path)
    assert info.skipped_bytes == ends[3] - ends[2]
    assert f"skipped {ends[3] - ends[2]} damaged bytes" in recording_notes(info)
    assert _stream_part(msgs) == [*sent[:2], *sent[3:]]


def test_a_large_recording_is_read_in_chunks(tmp_path: Path) -> None:
    path = tmp_path / "big.msgpack"
    sent = _stream(3000)
    _write(path, sent)
    reader = RecordingReader(path, chunk_size=4096)
    chunks = list(reader.chunks())
    assert len(chunks) > 10
    assert _stream_part([msg for chunk in chunks for msg in chunk]) == sent
    assert reader.info.messages == sum(len(chunk) for chunk in chunks)


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (None, "no such file"),
        (b"", "empty file"),
        (b"\x00garbage that is not a recording at all", "not an iket-tui recording (bad magic)"),
        (MAGIC[:6], "shorter than its header"),
        (MAGIC, "no complete frame"),
        (MAGIC + encode_message(m.heartbeat(t_ns=1, produced=0, dropped=0, open_passes=0)), "does not begin"),
        (
            MAGIC
            + encode_frame(
                msgpack.packb({**m.recording(created_unix=0, software_version="", source=""), "proto": [3, 1]})
            ),
            "recorded with protocol 3.1, this iket-tui speaks 1.1",
        ),
    ],
    ids=["missing", "empty", "garbage", "short-magic", "magic-only", "no-header", "other-major"],
)
def test_files_that_are_not_readable_recordings(tmp_path: Path, content: bytes | None, error: str) -> None:
    path = tmp_path / "bad.msgpack"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(SourceError) as caught:
        read_recording(path)
    assert error in str(caught.value)
    assert str(caught.value).startswith(str(path))
    assert "\n" not in str(caught.value)


def test_a_directory_is_not_a_recording(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="is a directory"):
        read_recording(tmp_path)


def test_the_writer_refuses_a_path_it_cannot_write(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="cannot write"):
        RecordingWriter(tmp_path / "missing-dir" / "r.msgpack", source="x")


@settings(max_examples=200, deadline=None)
@given(
    head=st.sampled_from(
        [b"", MAGIC, MAGIC + encode_message(m.recording(created_unix=0, software_version="", source=""))]
    ),
    tail=st.binary(max_size=300),
)
def test_arbitrary_bytes_are_read_or_refused_in_one_line(head: bytes, tail: bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "any.msgpack"
        path.write_bytes(head + tail)
        try:
            msgs, info = read_recording(path)
        except SourceError as exc:
            assert "\n" not in str(exc)
            return
        assert msgs[0]["type"] == m.RECORDING
        assert info.messages == len(msgs)
