"""Finding the next frame after damage takes work in proportion to the file, not to the file
times the frames that might start in the damaged stretch."""

from __future__ import annotations

import random
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iket_tui.protocol import frames
from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import encode_message
from iket_tui.protocol.frames import HEADER, HEADER_SIZE
from iket_tui.sources.reading import read_recording
from iket_tui.sources.recorder import RecordingWriter

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"
SIZE = 20_000_000


class _Work:
    """Counts the bytes checksummed and the headers read while a recording is read; fails at
    once when either goes beyond what a linear resync needs."""

    def __init__(self, crc_bytes: int, headers: int) -> None:
        self.crc_bytes = 0
        self.headers = 0
        self._limits = (crc_bytes, headers)
        self._header = struct.Struct(">II")
        self.size = self._header.size

    def crc32(self, data: Any, value: int = 0) -> int:
        self.crc_bytes += len(data)
        assert self.crc_bytes <= self._limits[0], f"checksummed more than {self._limits[0]:,} bytes"
        return zlib.crc32(data, value)

    def unpack_from(self, buffer: Any, offset: int = 0) -> tuple[Any, ...]:
        self.headers += 1
        assert self.headers <= self._limits[1], f"read more than {self._limits[1]:,} frame headers"
        return self._header.unpack_from(buffer, offset)

    def pack(self, *values: int) -> bytes:
        return self._header.pack(*values)


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    """A 20 MB recording of the H200 demo's stream over and over, written by the recorder, and
    the frame of its one 1 MB ``kernel_records``."""
    messages, _ = read_recording(EXAMPLE)
    stream = [msg for msg in messages if msg["type"] not in (m.RECORDING, m.CHECKPOINT, m.END)]
    path = tmp_path_factory.mktemp("resync") / "20mb.msgpack"
    writer = RecordingWriter(path, source="resync test")
    while path.stat().st_size < SIZE:
        for msg in stream:
            writer.write(msg)
        writer.flush()
    writer.close("test")
    records = next(msg for msg in stream if msg["type"] == m.KERNEL_RECORDS)
    return path, encode_message(records)


def test_one_flipped_bit_in_a_1mb_frame_of_20mb_loses_that_frame_only(
    recording: tuple[Path, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, frame = recording
    data = path.read_bytes()
    assert len(frame) > 980_000 and len(data) >= SIZE
    intact, info = read_recording(path)
    at = data.find(frame, len(data) // 2)
    assert at > 0
    damaged_path = tmp_path / "damaged.msgpack"
    damaged = bytearray(data)
    damaged[at + HEADER_SIZE + len(frame) // 2] ^= 0x10
    damaged_path.write_bytes(damaged)
    nth = data.count(frame, 0, at)  # the damaged frame is the recording's nth kernel_records, from 0
    lost = [i for i, msg in enumerate(intact) if msg["type"] == m.KERNEL_RECORDS][nth]

    work = _Work(crc_bytes=2 * len(data), headers=2 * info.messages)
    monkeypatch.setattr(frames, "zlib", work)
    monkeypatch.setattr(frames, "HEADER", work)
    got, damaged_info = read_recording(damaged_path)

    assert damaged_info.skipped_bytes == len(frame)
    assert (damaged_info.undecodable, damaged_info.cut_at, damaged_info.ended) == (0, None, True)
    assert got == intact[:lost] + intact[lost + 1 :]


def _frames(count: int, size: int = 40) -> list[bytes]:
    return [
        encode_message({"type": m.HEARTBEAT, "t_ns": i, "produced": i, "dropped": 0, "pad": "x" * size})
        for i in range(count)
    ]


def _read_all(data: bytes, chunk: int = 1 << 16) -> tuple[list[bytes], frames.FrameDecoder]:
    decoder = frames.FrameDecoder(resync=True)
    got: list[bytes] = []
    for start in range(0, len(data), chunk):
        decoder.feed(data[start : start + chunk])
        got += decoder.drain()
    got += list(decoder.finish())
    return got, decoder


def test_a_large_frame_right_after_random_damage_is_recovered() -> None:
    garbage = random.Random(7).randbytes(1 << 20)
    big = encode_message({"type": m.KERNEL_RECORDS, "t_ns": 1, "chunks": b"\x00" * (4 << 20)})
    after = _frames(3)
    got, decoder = _read_all(garbage + big + b"".join(after))
    assert [len(body) for body in got] == [len(big) - HEADER_SIZE] + [len(f) - HEADER_SIZE for f in after]
    assert decoder.skipped_bytes == len(garbage)


def test_a_stretch_of_fake_frame_starts_costs_checksums_in_proportion_to_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every 520 bytes a header claiming 8 MiB and a body that parses as the start of a map of
    many string keys: each is worth checksumming until the checksum fails."""
    fake = HEADER.pack(8 << 20, 0) + b"\xdf\x00\x00\x27\x10" + b"\xa2kk\x00" * 128
    hostile = fake * (2_000_000 // len(fake))
    tail = _frames(5)
    data = hostile + b"\x00" * (8 << 20) + b"".join(tail)
    allowed = frames.RESYNC_BUDGET + frames.RESYNC_CREDIT * len(data) + len(data)
    work = _Work(crc_bytes=allowed, headers=len(data))
    monkeypatch.setattr(frames, "zlib", work)
    got, decoder = _read_all(data)
    assert got == [f[HEADER_SIZE:] for f in tail]
    assert decoder.skipped_bytes == len(data) - sum(map(len, tail))
    assert work.crc_bytes > frames.RESYNC_BUDGET  # the fakes were checksummed, up to the budget


@given(st.binary(min_size=1, max_size=4096), st.integers(min_value=1, max_value=6), st.integers(1, 512))
@settings(max_examples=200, deadline=None)
def test_every_intact_frame_after_garbage_is_recovered(garbage: bytes, count: int, chunk: int) -> None:
    after = _frames(count, size=20)
    got, decoder = _read_all(garbage + b"".join(after), chunk)
    assert got == [f[HEADER_SIZE:] for f in after]
    assert (decoder.skipped_bytes, decoder.pending) == (len(garbage), 0)
