"""A recording whose first frame (the ``recording`` header) is damaged: every other frame is
still read, and the loss is said once, with its size; a file whose first frame is intact but
not a header is still refused, and one where nothing decodes says how much it skipped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import decode_body, encode_batch, encode_message
from iket_tui.protocol.frames import HEADER
from iket_tui.protocol.recording import MAGIC, RecordingDecoder
from iket_tui.sources.base import SourceBatch, SourceError, SourceState
from iket_tui.sources.reading import RecordingReader, read_recording, recording_notes
from iket_tui.sources.recorder import RecordingWriter
from iket_tui.sources.replay import RecordingSource

SOURCE = "pid 42: python demo.py"


def _passes(n: int) -> list[m.Message]:
    msgs: list[m.Message] = []
    for seq in range(n):
        common: dict[str, Any] = {"compile": 1, "context": 0, "seq": seq, "depth": 0, "parent": None, "phase": None}
        msgs.append(m.pass_start(name=f"tl.P{seq}", t_ns=2_000 + seq * 10, **common))
        msgs.append(m.pass_end(name=f"tl.P{seq}", t_ns=2_005 + seq * 10, duration_ns=5, **common))
    return msgs


def _record(path: Path) -> None:
    """A real recording: the header, a batch of pass rows first (so the first item after the
    header is a row, not a map), then single frames, checkpoints and the end frame."""
    writer = RecordingWriter(path, source=SOURCE, checkpoint_every=9)  # the fourth frame a stream message
    batch = _passes(4)
    writer.write_frames(encode_batch(batch), batch)
    writer.write(m.hello(role="agent", pid=42, start_time=7, software_version="x", capabilities=[], t_ns=1_000))
    for msg in _passes(6)[2:]:
        writer.write(msg)
    writer.flush()
    writer.close("target exited")


def _frame_ends(data: bytes) -> list[int]:
    ends = []
    pos = len(MAGIC)
    while pos < len(data):
        (length, _crc) = HEADER.unpack_from(data, pos)
        pos += HEADER.size + length
        ends.append(pos)
    return ends


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    path = tmp_path / "intact.msgpack"
    _record(path)
    return path


def _damaged(recording: Path, offset: int, tmp_path: Path, bit: int = 1) -> Path:
    data = bytearray(recording.read_bytes())
    data[offset] ^= bit
    path = tmp_path / "damaged.msgpack"
    path.write_bytes(bytes(data))
    return path


HEADER_FRAME_BYTES = {
    "body": HEADER.size + 3,
    "last-body-byte": -1,  # relative to the header frame's end
    "crc": 5,
    "length-low": 3,
    "length-high": 0,
}


@pytest.mark.parametrize("where", HEADER_FRAME_BYTES, ids=list(HEADER_FRAME_BYTES))
@pytest.mark.parametrize("chunk_size", [1 << 20, 64, 7], ids=["one-chunk", "64-byte-chunks", "7-byte-chunks"])
def test_a_flipped_bit_in_the_header_frame_loses_only_the_header(
    recording: Path, tmp_path: Path, where: str, chunk_size: int
) -> None:
    intact, _ = read_recording(recording)
    first_end = _frame_ends(recording.read_bytes())[0]
    at = HEADER_FRAME_BYTES[where]
    offset = first_end + at if at < 0 else len(MAGIC) + at
    bit = 0x80 if where == "length-high" else 1  # a length beyond the limit, or one that lies a little
    damaged = _damaged(recording, offset, tmp_path, bit)
    reader = RecordingReader(damaged, chunk_size=chunk_size)
    msgs = [msg for chunk in reader.chunks() for msg in chunk]
    info = reader.info
    assert msgs == intact[1:]
    assert info.header_skipped == first_end - len(MAGIC) == info.skipped_bytes
    assert info.ended and info.cut_at is None and info.source == ""
    assert recording_notes(info) == (f"the recording's header was damaged: {first_end - len(MAGIC)} bytes skipped",)


def test_the_decoder_iterated_and_drained_agrees_on_a_damaged_header(recording: Path) -> None:
    data = bytearray(recording.read_bytes())
    data[len(MAGIC) + HEADER.size + 3] ^= 1
    drained: RecordingDecoder[m.Message] = RecordingDecoder()
    drained.feed(data)
    by_drain = [*drained.drain(), *drained.finish()]
    iterated: RecordingDecoder[m.Message] = RecordingDecoder()
    for byte in range(0, len(data), 5):
        iterated.feed(data[byte : byte + 5])
    by_iter = [*iterated, *iterated.finish()]
    assert by_drain == by_iter and by_drain[0]["type"] == m.PASS_START
    first_frame = _frame_ends(bytes(data))[0] - len(MAGIC)
    assert (drained.saw_header, drained.header_skipped) == (iterated.saw_header, iterated.header_skipped)
    assert (drained.saw_header, drained.header_skipped) == (False, first_frame)


def test_damage_to_the_header_and_elsewhere_is_said_apart(recording: Path, tmp_path: Path) -> None:
    data = bytearray(recording.read_bytes())
    ends = _frame_ends(bytes(data))
    data[len(MAGIC) + HEADER.size + 3] ^= 1  # the header
    data[ends[2] + HEADER.size + 3] ^= 1  # the fourth frame: a pass_start of its own
    path = tmp_path / "twice.msgpack"
    path.write_bytes(bytes(data))
    intact, _ = read_recording(recording)
    fourth = decode_body(recording.read_bytes()[ends[2] + HEADER.size : ends[3]])
    msgs, info = read_recording(path)
    assert fourth["type"] != m.BATCH and fourth in intact
    assert msgs == [msg for msg in intact[1:] if msg != fourth]
    header_bytes = ends[0] - len(MAGIC)
    assert info.skipped_bytes == header_bytes + ends[3] - ends[2]
    assert recording_notes(info) == (
        f"the recording's header was damaged: {header_bytes} bytes skipped",
        f"skipped {ends[3] - ends[2]} more damaged bytes",
    )


def test_an_intact_first_frame_that_is_not_a_header_is_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "foreign.msgpack"
    heartbeat = m.heartbeat(t_ns=1, produced=0, dropped=0, open_passes=0)
    path.write_bytes(MAGIC + encode_message(heartbeat) * 3)
    with pytest.raises(SourceError, match="does not begin with a 'recording' frame"):
        read_recording(path)


def test_a_recording_with_every_frame_damaged_says_how_many_bytes_it_skipped(recording: Path, tmp_path: Path) -> None:
    data = bytearray(recording.read_bytes())
    ends = _frame_ends(bytes(data))
    for start in [len(MAGIC), *ends[:-1]]:
        data[start + HEADER.size + 1] ^= 1
    path = tmp_path / "ruined.msgpack"
    path.write_bytes(bytes(data))
    with pytest.raises(SourceError) as caught:
        read_recording(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: no intact frame in this recording: ")
    skipped = int(message.split(": ")[2].split(" ")[0])
    tail = len(data) - len(MAGIC) - skipped
    assert message == (
        f"{path}: no intact frame in this recording: {skipped} damaged bytes skipped"
        + (f", the last {tail} bytes an incomplete frame" if tail else "")
    )
    assert "\n" not in message and skipped > 0.9 * (len(data) - len(MAGIC))


def _replayed(path: Path) -> list[SourceBatch]:
    return list(RecordingSource(path, speed=0).batches())


def test_a_replay_over_a_damaged_header_plays_everything_else_and_says_so(recording: Path, tmp_path: Path) -> None:
    intact, _ = read_recording(recording)
    damaged = _damaged(recording, len(MAGIC) + HEADER.size + 3, tmp_path)
    source = RecordingSource(damaged, speed=0)
    assert isinstance(source.open(), list)  # the first thing left is a pass row
    assert source.description == f"recording {damaged}"
    batches = _replayed(damaged)
    assert batches[0].state is SourceState.LIVE and batches[-1].state is SourceState.ENDED
    played = [m.message_of(msg) if isinstance(msg, list) else msg for b in batches for msg in b.messages]
    assert played == intact[1:]
    header_bytes = _frame_ends(recording.read_bytes())[0] - len(MAGIC)
    assert batches[-1].notes == (f"the recording's header was damaged: {header_bytes} bytes skipped",)
