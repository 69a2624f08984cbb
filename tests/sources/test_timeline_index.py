"""The index a recording holds of its own timeline: written as the recording is written, the same
timeline a read of the whole file finds, read back in place of that read, skipped by a reader
that does not know it, and never trusted where it is missing, cut, damaged or lying.

The stream is the bundled H200 demo's (a real TileLang session), written again by the recorder
``iket-tui record`` uses, with a checkpoint every 40 messages so that the index has many frames.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import msgpack
import pytest

from iket_tui.model.synthetic import Lowering, agent_hello
from iket_tui.protocol import codec
from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import encode_message
from iket_tui.protocol.frames import HEADER, HEADER_SIZE, FrameDecoder
from iket_tui.protocol.recording import MAGIC
from iket_tui.sources import timeline
from iket_tui.sources.reading import RecordingReader, read_recording, recording_notes
from iket_tui.sources.recorder import RecordingWriter
from iket_tui.sources.timeline import (
    MarkKind,
    RecordingTimeline,
    TimelineBuilder,
    index_problem,
    read_index,
    scan_timeline,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DEMO = EXAMPLES / "h200-demo.msgpack"
WAITING = EXAMPLES / "h200-demo-waiting.msgpack"
DEFAULTS = {"stuck_after_ns": 30_000_000_000, "kernel_stuck_after_ns": 2_000_000_000}
"""The UI's thresholds unless told otherwise, which the recorder's index is made with."""


def _rewrite(source: Path, path: Path, *, index: bool = True, close: bool = True) -> Path:
    """The stream of ``source`` recorded again at ``path`` as ``iket-tui record`` writes one."""
    writer = RecordingWriter(
        path, source="pid 471: python demo.py", checkpoint_every=40, checkpoint_interval_s=math.inf, index=index
    )
    for msg in RecordingReader(source):
        if msg["type"] not in (m.RECORDING, m.CHECKPOINT, m.END):
            writer.write(msg)
    if close:
        writer.close("exit")
    else:
        writer.flush()
    return path


def _said(timeline: RecordingTimeline) -> tuple[int, int, list[tuple[int, str, str]]]:
    return timeline.start_ns, timeline.end_ns, [(mark.t_ns, mark.kind.value, mark.what) for mark in timeline.marks]


def _scanned(path: Path, **thresholds: int) -> RecordingTimeline:
    """The timeline a read of the whole file finds, index or not."""
    builder = TimelineBuilder(**thresholds)
    for chunk in RecordingReader(path, rows=True).chunks():
        builder.feed(chunk)
    return builder.finish()


def _same_clock(items: list[Any]) -> list[Any]:
    """``items`` with the header's wall clock time, which differs from one writing to the next, left out."""
    return [
        {**item, "created_unix": 0} if type(item) is dict and item["type"] == m.RECORDING else item for item in items
    ]


def _frames(path: Path) -> list[tuple[int, m.Message]]:
    """Each frame of the recording at ``path``: its byte offset and its message."""
    data = path.read_bytes()
    decoder = FrameDecoder()
    decoder.feed(data[len(MAGIC) :])
    found = []
    for body in decoder:
        found.append((len(MAGIC) + decoder.consumed - HEADER_SIZE - len(body), msgpack.unpackb(body)))
    return found


@pytest.mark.parametrize("source", [DEMO, WAITING], ids=["demo", "waiting"])
def test_the_index_holds_the_timeline_a_read_of_the_whole_file_finds(source: Path, tmp_path: Path) -> None:
    indexed = _rewrite(source, tmp_path / "indexed.msgpack")
    plain = _rewrite(source, tmp_path / "plain.msgpack", index=False)
    from_index = read_index(indexed, **DEFAULTS)
    assert from_index is not None, index_problem(indexed, **DEFAULTS)
    assert read_index(plain, **DEFAULTS) is None
    assert _said(from_index) == _said(_scanned(plain, **DEFAULTS)) == _said(scan_timeline(source))
    assert _said(scan_timeline(indexed)) == _said(from_index)
    kinds = {mark.kind.value for mark in from_index.marks}
    assert {"compile", "failure", "process event"} <= kinds
    if source == WAITING:
        assert "quiet warp" in kinds


def test_the_index_is_written_as_the_recording_is_a_frame_after_each_checkpoint(tmp_path: Path) -> None:
    path = _rewrite(DEMO, tmp_path / "indexed.msgpack")
    frames = _frames(path)
    kinds = [msg["type"] for _, msg in frames]
    checkpoints = [i for i, kind in enumerate(kinds) if kind == m.CHECKPOINT]
    assert len(checkpoints) > 10
    assert all(kinds[i + 1] == m.INDEX for i in checkpoints)
    assert kinds[-2:] == [m.INDEX, m.END]
    timeline = read_index(path, **DEFAULTS)
    assert timeline is not None
    where = dict(frames)
    assert [t for t, _ in timeline.places] == [frames[i][1]["t_ns"] for i in checkpoints]
    assert all(where[offset]["type"] == m.CHECKPOINT for _, offset in timeline.places)
    middle = timeline.start_ns + timeline.length_ns // 2
    place = timeline.place_before(middle)
    assert place is not None and place[0] <= middle
    assert timeline.place_before(timeline.start_ns - 1) is None


def test_every_reading_of_a_recording_is_the_same_with_its_index_or_without(tmp_path: Path) -> None:
    indexed = _rewrite(DEMO, tmp_path / "indexed.msgpack")
    plain = _rewrite(DEMO, tmp_path / "plain.msgpack", index=False)
    with_index, info = read_recording(indexed)
    without, plain_info = read_recording(plain)
    assert _same_clock(with_index) == _same_clock(without)
    assert _same_clock(list(RecordingReader(indexed, rows=True))) == _same_clock(
        list(RecordingReader(plain, rows=True))
    )
    chunked = [item for chunk in RecordingReader(indexed, chunk_size=4096, rows=True).chunks() for item in chunk]
    assert _same_clock(chunked) == _same_clock(list(RecordingReader(plain, rows=True)))
    assert (info.messages, info.unknown, info.undecodable, info.skipped_bytes, info.ended) == (
        plain_info.messages,
        0,
        0,
        0,
        True,
    )
    assert recording_notes(info) == recording_notes(plain_info) == ()


def test_a_reader_that_does_not_know_the_index_skips_it_and_reads_every_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader of the release before the index knows no ``index`` type: it skips those frames
    as it skips any unknown type, counts them, and reads every message as without them."""
    indexed = _rewrite(DEMO, tmp_path / "indexed.msgpack")
    plain = _rewrite(DEMO, tmp_path / "plain.msgpack", index=False)
    monkeypatch.setattr(codec, "UNDELIVERED_TYPES", frozenset())
    with_index, info = read_recording(indexed)
    without, _ = read_recording(plain)
    assert _same_clock(with_index) == _same_clock(without)
    frames = sum(msg["type"] == m.INDEX for _, msg in _frames(indexed))
    assert info.unknown == frames > 10 and info.ended
    assert recording_notes(info) == (
        f"skipped {frames} messages of types this iket-tui does not know (a newer recorder?)",
    )


def test_a_recording_cut_short_keeps_its_index_frames_and_its_timeline_is_read_from_the_file(
    tmp_path: Path,
) -> None:
    whole = _rewrite(DEMO, tmp_path / "whole.msgpack")
    data = whole.read_bytes()
    cut = tmp_path / "cut.msgpack"
    cut.write_bytes(data[: len(data) * 2 // 3])
    assert sum(msg["type"] == m.INDEX for _, msg in _frames(cut)) > 5  # most of it was written before the cut
    assert read_index(cut, **DEFAULTS) is None
    assert index_problem(cut, **DEFAULTS) == "no end frame"
    assert _said(scan_timeline(cut)) == _said(_scanned(cut, **DEFAULTS))
    unclosed = _rewrite(DEMO, tmp_path / "unclosed.msgpack", close=False)  # the recorder was killed
    assert read_index(unclosed, **DEFAULTS) is None
    assert index_problem(unclosed, **DEFAULTS) == "no end frame"
    assert _said(scan_timeline(unclosed)) == _said(
        scan_timeline(DEMO)
    )  # the stream is whole; only its end frame is missing


def test_other_thresholds_than_the_index_s_read_the_file(tmp_path: Path) -> None:
    path = _rewrite(DEMO, tmp_path / "indexed.msgpack")
    lower = {"stuck_after_ns": 3_000_000_000, "kernel_stuck_after_ns": 2_000_000_000}
    assert index_problem(path, **lower) == "made with other thresholds"
    timeline = scan_timeline(path, stuck_after_ns=3_000_000_000)
    assert [mark.what for mark in timeline.marks if mark.kind.value == "stuck pass"] == [
        "tl.InjectSoftwarePipeline stuck in compile slow_gemm"
    ]


def _with_last_index(path: Path, change: dict[str, object]) -> Path:
    """The recording at ``path`` with its last index frame (the one before its end) changed."""
    frames = _frames(path)
    (at, index), (end_at, _) = frames[-2:]
    data = path.read_bytes()
    lying = path.with_name("lying.msgpack")
    lying.write_bytes(data[:at] + encode_message({**index, **change}) + data[end_at:])
    return lying


def _checkpoint_offset(path: Path) -> int:
    return next(offset for offset, msg in _frames(path) if msg["type"] == m.CHECKPOINT)


@pytest.mark.parametrize(
    ("lie", "problem"),
    [
        (lambda path: {"prev": path.stat().st_size + 100}, "points at byte"),
        (lambda path: {"prev": len(MAGIC) + 3}, "at byte"),
        (lambda path: {"prev": _checkpoint_offset(path)}, "no index frame at byte"),
        (lambda path: {"marks": [[10**19 - 1, "compile", "compile later began"]]}, "a mark out of place"),
        (lambda path: {"marks": [[0, "compile", "compile nothing began"]]}, "a mark out of place"),
        (lambda path: {"marks": [["soon", "compile", "x"]]}, "a mark out of place"),
        (lambda path: {"marks": [[0, "party", "x"]]}, "a mark out of place"),
        (lambda path: {"marks": "none"}, "marks that are not a list"),
        (lambda path: {"end_ns": 10**19}, "ends elsewhere"),
        (lambda path: {"start_ns": 5}, "disagree"),
        (lambda path: {"stuck_after_ns": 1}, "other thresholds"),
    ],
    ids=[
        "past-the-end",
        "inside-a-frame",
        "not-an-index",
        "mark-after-the-end",
        "mark-at-no-time",
        "mark-without-time",
        "mark-of-no-kind",
        "marks-not-a-list",
        "end-elsewhere",
        "start-elsewhere",
        "thresholds",
    ],
)
def test_a_lying_index_is_not_trusted_and_the_file_is_read_instead(tmp_path: Path, lie: object, problem: str) -> None:
    path = _rewrite(DEMO, tmp_path / "indexed.msgpack")
    assert callable(lie)
    lying = _with_last_index(path, lie(path))
    said = index_problem(lying, **DEFAULTS)
    assert said is not None and problem in said
    assert read_index(lying, **DEFAULTS) is None
    assert _said(scan_timeline(lying)) == _said(scan_timeline(DEMO))


def test_marks_out_of_order_along_the_chain_are_not_trusted(tmp_path: Path) -> None:
    """An index frame whose marks come after the time a later frame says the stream reached."""
    path = _rewrite(DEMO, tmp_path / "indexed.msgpack")
    frames = _frames(path)
    indexes = [(offset, msg) for offset, msg in frames if msg["type"] == m.INDEX and msg["marks"]]
    at, first = indexes[0]
    (_, kind, what), *rest = first["marks"]
    body = encode_message({**first, "marks": [[first["end_ns"] + 1, kind, what], *rest]})
    data = path.read_bytes()
    size = HEADER.unpack_from(data, at)[0] + HEADER_SIZE
    assert len(body) == size  # the same size (a time is 9 bytes either way): every later offset holds
    lying = tmp_path / "lying.msgpack"
    lying.write_bytes(data[:at] + body + data[at + size :])
    assert "a mark out of place" in (index_problem(lying, **DEFAULTS) or "")
    assert _said(scan_timeline(lying)) == _said(scan_timeline(DEMO))


def test_a_damaged_index_frame_is_not_trusted(tmp_path: Path) -> None:
    path = _rewrite(DEMO, tmp_path / "indexed.msgpack")
    middle = [offset for offset, msg in _frames(path) if msg["type"] == m.INDEX][5]
    data = bytearray(path.read_bytes())
    data[middle + HEADER_SIZE + 12] ^= 0xFF
    damaged = tmp_path / "damaged.msgpack"
    damaged.write_bytes(bytes(data))
    assert "damaged frame" in (index_problem(damaged, **DEFAULTS) or "")
    assert _said(scan_timeline(damaged)) == _said(_scanned(damaged, **DEFAULTS))


def test_a_recording_damaged_anywhere_gives_the_index_or_nothing_and_never_an_error(tmp_path: Path) -> None:
    """Bytes changed at random all over a recording with an index, one place at a time: the index
    is read whole or not at all, and what it says is what a read of the file finds."""
    path = _rewrite(DEMO, tmp_path / "indexed.msgpack")
    data = path.read_bytes()
    frames = _frames(path)
    index_at = [offset for offset, msg in frames if msg["type"] == m.INDEX]
    places = [offset + HEADER_SIZE + delta for offset in index_at[-3:] for delta in (0, 3, 9, 30)]
    generator = random.Random(27)
    places += [generator.randrange(len(MAGIC), len(data)) for _ in range(40)]
    damaged = tmp_path / "damaged.msgpack"
    trusted = 0
    for place in places:
        changed = bytearray(data)
        changed[place] ^= generator.randrange(1, 256)
        damaged.write_bytes(bytes(changed))
        timeline = read_index(damaged, **DEFAULTS)
        if timeline is not None:
            trusted += 1
            assert _said(timeline) == _said(scan_timeline(DEMO))  # damage outside the index alone
    assert trusted < len(places)


def test_a_stream_with_more_marks_between_checkpoints_than_a_frame_holds_gets_no_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(timeline, "MARKS_PER_FRAME", 3)  # the demo makes 9 compiles' marks in a stretch
    path = tmp_path / "many.msgpack"
    writer = RecordingWriter(path, source="pid 471: python demo.py", checkpoint_interval_s=math.inf)
    for msg in RecordingReader(DEMO):
        if msg["type"] not in (m.RECORDING, m.CHECKPOINT, m.END):
            writer.write(msg)
    writer.close("exit")
    assert index_problem(path, **DEFAULTS) == "no index before the end frame"
    assert _said(scan_timeline(path)) == _said(scan_timeline(DEMO))
    messages, info = read_recording(path)
    assert info.ended and recording_notes(info) == ()
    own = (m.RECORDING, m.CHECKPOINT, m.END)
    assert [msg for msg in messages if msg["type"] not in own] == [
        msg for msg in read_recording(DEMO)[0] if msg["type"] not in own
    ]


def test_a_recording_appended_to_another_in_one_file_is_not_indexed_by_its_own_index(tmp_path: Path) -> None:
    """Two recordings in one file (``record -o - >> FILE`` twice): the second's index counts its
    offsets from its own start and knows nothing of the first, so the whole file is read."""
    first, second = tmp_path / "a.msgpack", tmp_path / "b.msgpack"
    for path, start, fail in ((first, 1_000_000, "tl.LayoutInference"), (second, 9_000_000_000, None)):
        writer = RecordingWriter(path, source="test")
        writer.write(agent_hello())
        for msg in Lowering(compile=1, kernel="k", start_ns=start, fail_in=fail).messages():
            writer.write(msg)
        writer.close("done")
    both = tmp_path / "both.msgpack"
    both.write_bytes(first.read_bytes() + second.read_bytes())
    builder = TimelineBuilder()
    for chunk in RecordingReader(both, rows=True).chunks():
        builder.feed(chunk)
    whole = builder.finish()
    assert index_problem(
        both, stuck_after_ns=builder.stuck_after_ns, kernel_stuck_after_ns=builder.kernel_stuck_after_ns
    )
    timeline = scan_timeline(both)
    assert (timeline.start_ns, timeline.marks) == (whole.start_ns, whole.marks)
    assert any(mark.kind is MarkKind.FAILURE for mark in timeline.marks)
