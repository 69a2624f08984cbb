"""A recording holding damaged ``kernel_records`` (impossible fields): ``export`` and
``dump --records`` skip and count them and keep every intact batch."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from export_helpers import EXAMPLE

from iket_tui.cli import main
from iket_tui.export import chrome_trace, recording_session, session_notes
from iket_tui.protocol import messages as m
from iket_tui.sources.lines import KernelEvents
from iket_tui.sources.reading import read_recording
from iket_tui.sources.recorder import RecordingWriter

DAMAGE: dict[str, dict[str, Any]] = {
    "warp_slots-infinite": {"warp_slots": math.inf},
    "warp_slots-negative": {"warp_slots": -64},
    "ring_id-infinite": {"ring_id": -math.inf},
    "counter-negative": {"counters": {"generation": -1}},
}


@pytest.fixture(scope="module")
def damaged_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The H200 recording with, before its one intact ``kernel_records``, one damaged copy of it
    for each kind of damage."""
    messages, _ = read_recording(EXAMPLE)
    path = tmp_path_factory.mktemp("damaged") / "damaged.msgpack"
    writer = RecordingWriter(path, source="damaged kernel batches")
    for msg in messages[1:-1]:
        if msg["type"] in (m.CHECKPOINT, m.END):
            continue
        if msg["type"] == m.KERNEL_RECORDS:
            for change in DAMAGE.values():
                writer.write({**msg, **change})
        writer.write(msg)
    writer.close("test")
    return path


def test_the_kernel_events_of_damaged_batches_are_skipped_and_counted(damaged_recording: Path) -> None:
    messages, _ = read_recording(damaged_recording)
    expander = KernelEvents()
    events = [event for msg in messages for event in expander.events(msg)]
    assert len(events) == 126_720
    assert expander.damaged == len(DAMAGE)
    assert expander.notes() == (f"skipped {len(DAMAGE)} damaged kernel_records batches",)


def test_dump_records_prints_every_intact_event(damaged_recording: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["dump", "--records", "--format", "jsonl", str(damaged_recording)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "Traceback" not in captured.err and "internal error" not in captured.err
    lines = [json.loads(line) for line in captured.out.splitlines()]
    assert sum(line["type"] == "kernel_event" for line in lines) == 126_720
    assert sum(line["type"] == m.KERNEL_RECORDS for line in lines) == len(DAMAGE) + 1
    assert (
        f"iket-tui: {damaged_recording}: skipped {len(DAMAGE)} damaged kernel_records batches"
        in captured.err.splitlines()
    )


def test_export_keeps_the_intact_launches(
    damaged_recording: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "trace.json"
    code = main(["export", str(damaged_recording), "-o", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "Traceback" not in captured.err and "internal error" not in captured.err
    written = json.loads(out.read_text(encoding="utf-8"))
    assert [launch["events"] for launch in written["otherData"]["launches"]] == [42_240] * 3
    said = f"skipped {len(DAMAGE)} malformed messages (missing or impossible fields, e.g. a damaged kernel batch)"
    assert f"iket-tui: {damaged_recording}: {said}" in captured.err.splitlines()


def test_the_exported_session_counts_the_damaged_batches(damaged_recording: Path) -> None:
    messages, _ = read_recording(damaged_recording)
    session = recording_session(messages)
    assert session.counters.malformed == len(DAMAGE)
    assert session_notes(session) == (
        f"skipped {len(DAMAGE)} malformed messages (missing or impossible fields, e.g. a damaged kernel batch)",
    )
    assert len(chrome_trace(session)["otherData"]["launches"]) == 3
