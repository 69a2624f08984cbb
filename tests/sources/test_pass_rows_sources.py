"""Recordings whose batches carry pass rows: replayed as rows, read and dumped as maps,
counted one message a row."""

from __future__ import annotations

import json
from pathlib import Path

from iket_tui.model.synthetic import Lowering, agent_hello
from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import encode_batch
from iket_tui.sources.lines import TextLines, json_line
from iket_tui.sources.reading import RecordingReader, read_recording
from iket_tui.sources.recorder import RecordingWriter
from iket_tui.sources.replay import RecordingSource

FRAME = 16


def _record(path: Path) -> list[m.Message]:
    """A compile recorded as the agent batches it; returns the stream messages."""
    stream = [agent_hello(), *Lowering(compile=1, kernel="gemm", start_ns=1_000_000).messages()]
    writer = RecordingWriter(path, source="pid 4242: python gemm.py", checkpoint_every=50)
    writer.write(stream[0])
    for start in range(1, len(stream), FRAME):
        frame = stream[start : start + FRAME]
        writer.write_frames(encode_batch(frame), frame)
    writer.close("target exited")
    return stream


def _maps(items: list[m.Item]) -> list[m.Message]:
    return [m.message_of(item) if isinstance(item, list) else item for item in items]


def _stream_part(items: list[m.Message]) -> list[m.Message]:
    return [msg for msg in items if msg["type"] not in (m.RECORDING, m.CHECKPOINT, m.END)]


def test_reading_a_recording_gives_the_maps_that_were_sent(tmp_path: Path) -> None:
    path = tmp_path / "rows.msgpack"
    sent = _record(path)
    msgs, info = read_recording(path)
    assert _stream_part(msgs) == sent
    assert all(isinstance(msg, dict) for msg in msgs)
    assert info.messages == len(msgs)
    assert msgs[-1]["messages"] == len(sent)
    checkpoints = [msg["messages"] for msg in msgs if msg["type"] == m.CHECKPOINT]
    assert checkpoints and all(count % FRAME == 1 for count in checkpoints)  # whole frames, hello included


def test_a_reader_that_keeps_rows_counts_each_row_as_a_message(tmp_path: Path) -> None:
    path = tmp_path / "rows.msgpack"
    sent = _record(path)
    reader = RecordingReader(path, rows=True)
    items = list(reader)
    rows = [item for item in items if isinstance(item, list)]
    assert len(rows) == sum(msg["type"] in m.PASS_EVENTS for msg in sent)
    assert _stream_part(_maps(items)) == sent
    assert reader.info.messages == len(items) and reader.info.ended


def test_a_replay_hands_out_pass_rows_in_order_with_the_other_messages(tmp_path: Path) -> None:
    path = tmp_path / "rows.msgpack"
    sent = _record(path)
    batches = list(RecordingSource(path, speed=0).batches())
    items = [item for batch in batches for item in batch.messages]
    assert any(isinstance(item, list) for item in items)
    assert _stream_part(_maps(items)) == sent
    assert batches[-1].notes == ()


def test_a_paused_replay_steps_through_rows_one_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "rows.msgpack"
    _record(path)
    everything = list(RecordingReader(path, rows=True))
    source = RecordingSource(path, start_paused=True)
    batches = source.batches()
    next(batches)  # the source is live
    stepped: list[m.Item] = []
    for _ in range(12):
        source.step()
        batch = next(batches)
        assert len(batch.messages) == 1
        stepped.extend(batch.messages)
    source.close()
    assert stepped == everything[:12]
    assert sum(isinstance(item, list) for item in stepped) >= 6


def test_a_pass_row_dumps_as_the_line_of_its_map() -> None:
    end = m.pass_end(
        compile=1, context=0, name="tl.Simplify", seq=3, depth=1, parent=2, phase=None, t_ns=9_000_000, duration_ns=4
    )
    row = m.row_of(end)
    assert row is not None
    assert json_line(row) == json_line(end)
    assert json.loads(json_line(row)) == end
    assert TextLines().line(row) == TextLines().line(end)


def test_a_json_line_with_flat_lists_is_the_same_as_through_the_careful_path() -> None:
    """A kernel event's block coordinates (a flat list) take the fast path and read the same;
    what the fast path cannot write (bytes, NaN, nesting) is still written the careful way."""
    from iket_tui.sources.lines import _jsonable

    event = {"type": "kernel_event", "block": [1, 2, 0], "warp": 3, "name": "k_step", "payload": 1.5}
    assert json_line(event) == json.dumps(_jsonable(event), ensure_ascii=False, separators=(",", ":"))
    assert json.loads(json_line(event)) == event
    odd = {"type": "x", "a": [b"\x01", float("nan")], "b": [[1, [2]]]}
    assert json.loads(json_line(odd)) == {"type": "x", "a": ["01", "nan"], "b": [[1, [2]]]}
