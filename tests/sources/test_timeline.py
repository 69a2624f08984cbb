"""The marks of a recording's timeline, read from the bundled H200 demo's recordings: its
compiles, its two failures, a pass stuck past the threshold, a quiet warp and the process's
hello and bye, each where a replay from the start shows it."""

from __future__ import annotations

from pathlib import Path

import pytest

from iket_tui.model.session import Session
from iket_tui.protocol import messages as m
from iket_tui.sources.base import SourceError
from iket_tui.sources.reading import RecordingReader
from iket_tui.sources.timeline import MarkKind, scan_timeline

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DEMO = EXAMPLES / "h200-demo.msgpack"
WAITING = EXAMPLES / "h200-demo-waiting.msgpack"


def _said(path: Path, kind: MarkKind, **thresholds: int) -> list[tuple[float, str]]:
    timeline = scan_timeline(path, **thresholds)
    return [(round(timeline.seconds(mark.t_ns), 2), mark.what) for mark in timeline.marks if mark.kind is kind]


def test_the_demo_s_timeline_spans_its_time_column_and_marks_its_compiles_failures_and_process() -> None:
    timeline = scan_timeline(DEMO)
    assert round(timeline.seconds(timeline.end_ns), 3) == 29.481  # as dump's last line reads
    assert _said(DEMO, MarkKind.FAILURE) == [
        (18.77, "compile layout_conflict failed"),
        (20.89, "compile nvcc_error failed"),
    ]
    compiles = _said(DEMO, MarkKind.COMPILE)
    assert len(compiles) == 9 and compiles[0] == (5.37, "compile vector_add began")
    assert _said(DEMO, MarkKind.PROCESS) == [(0.0, "process 471 connected"), (29.48, "the process said bye (exit)")]
    assert _said(DEMO, MarkKind.STUCK) == [] and _said(DEMO, MarkKind.QUIET) == []  # the defaults: 30 s, 2 s


def test_a_stuck_pass_is_marked_at_the_first_beat_where_a_replay_shows_it_stuck() -> None:
    stuck = _said(DEMO, MarkKind.STUCK, stuck_after_ns=3_000_000_000)
    assert stuck == [(15.05, "tl.InjectSoftwarePipeline stuck in compile slow_gemm")]
    timeline = scan_timeline(DEMO, stuck_after_ns=3_000_000_000)
    mark = timeline.next_mark([MarkKind.STUCK], timeline.start_ns)
    assert mark is not None
    session = Session(stuck_after_ns=3_000_000_000)
    items = []
    for item in RecordingReader(DEMO, rows=True):
        t = m.t_ns_of(item)
        if t is not None and t > mark.t_ns:
            break
        items.append(item)
    session.apply(items)
    assert [node.name for node in session.tree.running_passes() if session.tree.is_stuck(node, mark.t_ns)] == [
        "tl.InjectSoftwarePipeline"
    ]


def test_a_kernel_whose_block_waits_marks_a_quiet_warp() -> None:
    assert _said(WAITING, MarkKind.QUIET) == [(32.9, "a warp of traced_gemm_kernel went quiet")]


def test_next_and_previous_marks_of_the_kinds_asked_for() -> None:
    timeline = scan_timeline(DEMO)
    first = timeline.next_mark([MarkKind.FAILURE], timeline.start_ns)
    assert first is not None and first.what == "compile layout_conflict failed"
    second = timeline.next_mark([MarkKind.FAILURE], first.t_ns)
    assert second is not None and second.what == "compile nvcc_error failed"
    assert timeline.next_mark([MarkKind.FAILURE], second.t_ns) is None
    assert timeline.previous_mark([MarkKind.FAILURE], second.t_ns) == first
    assert timeline.previous_mark([MarkKind.FAILURE], first.t_ns) is None
    back = timeline.previous_mark([MarkKind.PROCESS, MarkKind.COMPILE], first.t_ns)
    assert back is not None and back.what == "compile layout_conflict began"


def test_a_file_that_is_no_recording_is_a_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.msgpack"
    bad.write_bytes(b"not a recording at all")
    with pytest.raises(SourceError, match="not an iket-tui recording"):
        scan_timeline(bad)
