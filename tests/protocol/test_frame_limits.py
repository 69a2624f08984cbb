"""What one frame may expand to, what keys its maps may have, and how refusals are counted."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgpack
import pytest

from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import MessageDecoder, ProtocolError, decode_body, encode_batch, encode_message
from iket_tui.protocol.frames import MAX_FRAME_BODY, encode_frame
from iket_tui.protocol.limits import MAX_FRAME_OBJECTS
from iket_tui.protocol.recording import MAGIC

_BATCH_HEAD = b"\x82" + msgpack.packb("type") + msgpack.packb(m.BATCH) + msgpack.packb("messages")


@functools.cache
def _nested_empty_arrays() -> bytes:
    """A valid 16 MiB batch body whose messages are arrays of 1,000,000 empty arrays each: about
    16 million lists once decoded."""
    inner = b"\xdd" + (1_000_000).to_bytes(4, "big") + b"\x90" * 1_000_000
    count = (MAX_FRAME_BODY - len(_BATCH_HEAD) - 3) // len(inner)
    return _BATCH_HEAD + b"\xdc" + count.to_bytes(2, "big") + inner * count


def _heartbeat(i: int) -> m.Message:
    return m.heartbeat(t_ns=i, produced=i, dropped=0, open_passes=0)


def _recording(path: Path, *frames: bytes) -> None:
    header = encode_message(m.recording(created_unix=0.0, software_version="0", source="test"))
    path.write_bytes(MAGIC + header + b"".join(frames))


_READ = """
import json, resource, sys
from pathlib import Path
from iket_tui.sources.reading import RecordingReader, recording_notes
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
reader = RecordingReader(Path(sys.argv[1]))
types = [msg["type"] for msg in reader]
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"types": types, "grew_mb": (peak - before) / 1024, "notes": recording_notes(reader.info)}))
"""


def test_a_16mib_frame_of_nested_empty_arrays_is_one_undecodable_frame_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "bomb.msgpack"
    _recording(path, encode_message(_heartbeat(1)), encode_frame(_nested_empty_arrays()), encode_message(_heartbeat(2)))
    done = subprocess.run([sys.executable, "-c", _READ, str(path)], capture_output=True, text=True, check=True)
    report = json.loads(done.stdout)
    print(f"reading a recording with a 16 MiB frame of nested empty arrays: peak RSS grew {report['grew_mb']:.0f} MB")
    assert report["types"] == [m.RECORDING, m.HEARTBEAT, m.HEARTBEAT]
    assert report["notes"] == [
        "recording has no end frame: its recorder stopped without closing it",
        "skipped 1 undecodable frames",
    ]
    assert report["grew_mb"] < 300


def test_a_live_reader_refuses_a_frame_beyond_the_object_limit() -> None:
    with pytest.raises(ProtocolError, match=f"more than {MAX_FRAME_OBJECTS:,} objects"):
        decode_body(_nested_empty_arrays())
    decoder = MessageDecoder()
    decoder.feed(encode_frame(_nested_empty_arrays()))
    with pytest.raises(ProtocolError, match="objects"):
        decoder.drain()


def test_the_largest_batch_a_writer_sends_is_within_the_object_limit() -> None:
    """Pass rows as short as they come: 400,000 of them fit in a frame's bytes but decode to 4.8
    million objects, so a writer spreads them over two frames."""
    rows = [["pass_end", 1, 0, "p", i % 100, 0, None, None, i % 100, 1] for i in range(400_000)]
    data = encode_batch(rows)
    decoder = MessageDecoder(rows=True)
    decoder.feed(data)
    assert decoder.drain() == rows
    assert decoder.frames.frames == 2


@pytest.mark.parametrize(
    "body",
    [
        msgpack.packb({"type": m.HEARTBEAT, b"t_ns": 1, "produced": 1, "dropped": 0}),
        msgpack.packb({"type": m.KERNEL_RECORDS, "counters": {b"torn": 0}}),
        msgpack.packb({"type": m.BATCH, "messages": [_heartbeat(1), {"type": m.SYNC, b"backlog": 0}]}),
        msgpack.packb({"type": m.BATCH, "messages": [["pass_start", 1, 0, {b"x": 1}, 0, 0, None, None, 5, None]]}),
    ],
    ids=["top-level", "nested", "batch-item", "inside-a-row"],
)
def test_a_map_key_that_is_not_a_string_is_refused(body: bytes) -> None:
    with pytest.raises(ProtocolError, match="key"):
        decode_body(body)
    strict = MessageDecoder()
    strict.feed(encode_frame(body))
    with pytest.raises(ProtocolError, match="key"):
        strict.drain()
    lenient = MessageDecoder(resync=True)
    lenient.feed(encode_frame(body) + encode_message(_heartbeat(2)))
    assert lenient.drain() == [_heartbeat(2)]
    assert lenient.undecodable == 1


def test_undecodable_counts_frames_and_bad_batch_items_are_counted_apart() -> None:
    good = _heartbeat(1)
    junk: list[Any] = [7, "text", [], ["pass_start", 1]]
    body = msgpack.packb({"type": m.BATCH, "messages": [good, *junk, good]})
    for drain in (True, False):
        decoder = MessageDecoder(resync=True)
        decoder.feed(encode_frame(body) + encode_frame(b"\xc1"))
        got = decoder.drain() if drain else [*decoder, *decoder.finish()]
        assert got == [good, good]
        assert (decoder.undecodable, decoder.undecodable_items) == (1, len(junk))
