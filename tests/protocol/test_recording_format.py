"""Recording files: header checks and what a reader recovers from a cut or damaged file."""

from __future__ import annotations

import pytest

from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import ProtocolError, encode_message
from iket_tui.protocol.recording import MAGIC, RecordingDecoder


def _recording(n: int) -> tuple[bytes, list[m.Message], list[int]]:
    msgs = [m.recording(created_unix=0.0, software_version="0", source="test")]
    msgs += [
        m.pass_end(compile=1, context=0, name=f"p{i}", seq=i, depth=0, parent=None, phase=None, t_ns=i, duration_ns=1)
        for i in range(n)
    ]
    data = bytearray(MAGIC)
    ends = []
    for msg in msgs:
        data += encode_message(msg)
        ends.append(len(data))
    return bytes(data), msgs, ends


def _read(data: bytes) -> tuple[list[m.Message], RecordingDecoder]:
    decoder = RecordingDecoder()
    decoder.feed(data)
    got = list(decoder)
    got += list(decoder.finish())
    return got, decoder


def test_complete_file_reads_back_without_a_cut() -> None:
    data, msgs, _ = _recording(20)
    got, decoder = _read(data)
    assert got == msgs
    assert decoder.cut_at is None


def test_a_file_cut_anywhere_keeps_every_complete_frame_and_says_where() -> None:
    data, msgs, ends = _recording(12)
    for cut in range(len(MAGIC), len(data)):
        got, decoder = _read(data[:cut])
        complete = sum(1 for end in ends if end <= cut)
        assert got == msgs[:complete], cut
        expected_cut = None if cut in ends or cut == len(MAGIC) else max([len(MAGIC), *[e for e in ends if e <= cut]])
        assert decoder.cut_at == expected_cut, cut


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"", "empty file"),
        (MAGIC[:5], "shorter than its header"),
        (b"PK\x03\x04 not ours at all", "bad magic"),
    ],
)
def test_files_that_are_not_recordings(data: bytes, error: str) -> None:
    with pytest.raises(ProtocolError, match=error):
        _read(data)


def test_a_recording_must_start_with_its_header_frame() -> None:
    data = MAGIC + encode_message(m.codegen_begin(compile=1, t_ns=0))
    with pytest.raises(ProtocolError, match="does not begin"):
        _read(data)
