"""A recording's index of its timeline seen from the command line: ``record`` writes one as it
records a process, ``cut`` one for what it keeps, and ``dump`` prints a recording with an index
exactly as the same recording without."""

from __future__ import annotations

import math
from pathlib import Path

from cli_helpers import FakeAgent, run_iket

from iket_tui.protocol import messages as m
from iket_tui.sources.reading import RecordingReader
from iket_tui.sources.recorder import RecordingWriter
from iket_tui.sources.timeline import TimelineBuilder, index_problem, read_index

DEMO = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"
DEFAULTS = {"stuck_after_ns": 30_000_000_000, "kernel_stuck_after_ns": 2_000_000_000}


def _rewrite(path: Path, *, index: bool) -> Path:
    writer = RecordingWriter(path, source="pid 471: python demo.py", checkpoint_interval_s=math.inf, index=index)
    for msg in RecordingReader(DEMO):
        if msg["type"] not in (m.RECORDING, m.CHECKPOINT, m.END):
            writer.write(msg)
    writer.close("exit")
    return path


def _scanned(path: Path) -> list[tuple[int, str, str]]:
    builder = TimelineBuilder(**DEFAULTS)
    for chunk in RecordingReader(path, rows=True).chunks():
        builder.feed(chunk)
    return [(mark.t_ns, mark.kind.value, mark.what) for mark in builder.finish().marks]


def test_record_writes_the_index_of_what_it_records(tmp_path: Path) -> None:
    out = tmp_path / "session.msgpack"
    with FakeAgent("normal") as agent:
        assert run_iket("record", str(agent.pid), "-o", str(out)).returncode == 0
    timeline = read_index(out, **DEFAULTS)
    assert timeline is not None, index_problem(out, **DEFAULTS)
    said = [(mark.t_ns, mark.kind.value, mark.what) for mark in timeline.marks]
    assert said == _scanned(out)
    assert [what for _, kind, what in said if kind == "compile"] == ["compile add began"]
    assert [kind for _, kind, _ in said][-1] == "process event"  # its bye


def test_a_cut_holds_the_index_of_its_own_timeline(tmp_path: Path) -> None:
    out = tmp_path / "cut.msgpack"
    result = run_iket("cut", str(DEMO), "--from", "5.5", "--to", "19", "-o", str(out))
    assert result.returncode == 0, result.stderr
    timeline = read_index(out, **DEFAULTS)
    assert timeline is not None, index_problem(out, **DEFAULTS)
    builder = TimelineBuilder(**DEFAULTS)
    for chunk in RecordingReader(out, rows=True).chunks():
        builder.feed(chunk)
    scanned = builder.finish()
    said = [(mark.t_ns, mark.kind.value, mark.what) for mark in timeline.marks]
    assert said == [(mark.t_ns, mark.kind.value, mark.what) for mark in scanned.marks]
    assert (timeline.start_ns, timeline.end_ns) == (scanned.start_ns, scanned.end_ns)
    assert ("failure", "compile layout_conflict failed") in [(kind, what) for _, kind, what in said]


def test_dump_prints_a_recording_with_its_index_as_the_same_recording_without(tmp_path: Path) -> None:
    indexed = run_iket("dump", str(_rewrite(tmp_path / "indexed.msgpack", index=True)))
    plain = run_iket("dump", str(_rewrite(tmp_path / "plain.msgpack", index=False)))
    assert indexed.returncode == plain.returncode == 0
    # Past the header's line (its wall clock time differs from one writing to the next):
    assert indexed.stdout.splitlines()[1:] == plain.stdout.splitlines()[1:]
    assert len(indexed.stdout.splitlines()) > 100
    assert indexed.stderr == plain.stderr
    assert not [line for line in indexed.stdout.splitlines() if line.split()[2:3] == [m.INDEX]]
