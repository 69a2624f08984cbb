"""``iket-tui cut`` and ``dump --from/--to`` over a real recording (the bundled H200 demo's):
the stretch they keep, what a cut holds of what came before it, and damaged recordings."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_helpers import assert_one_line_error, run_iket

from iket_tui.model.nodes import CompileNode
from iket_tui.model.session import Session
from iket_tui.protocol import messages as m
from iket_tui.sources.reading import RecordingReader, read_recording

DEMO = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"
_TIME = re.compile(r"^\s*(\d+\.\d+) ms ")
FROM_S, TO_S = 5.5, 19.0
"""From inside the first compile (vector_add, 5.37 to 7.03 s) to past the failed layout_conflict one (18.77 s)."""


def _dump(*args: str) -> list[str]:
    result = run_iket("dump", *args)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def _stream(lines: list[str]) -> list[str]:
    """The lines of the stream's messages, without the recording's own checkpoints (a cut writes its own)."""
    return [line for line in lines if line.split()[2:3] != [m.CHECKPOINT]]


def _seconds(line: str) -> float | None:
    found = _TIME.match(line)
    return float(found.group(1)) / 1e3 if found else None


def _compiles(path: Path) -> dict[int, tuple[str, str, list[tuple[int, str, str, int | None]]]]:
    """Each compile a replay of ``path`` shows: its label, status and passes (seq, name, status, duration)."""
    session = Session()
    for chunk in RecordingReader(path, rows=True).chunks():
        session.apply(chunk)
    found = {}
    for comp in session.tree.compiles:
        assert isinstance(comp, CompileNode)
        passes = [
            (p.seq, p.name, str(p.status), p.duration_ns)
            for context in comp.context_order
            for p in sorted(context.passes.values(), key=lambda p: p.seq)
        ]
        found[comp.id] = (comp.label, str(comp.status), passes)
    return found


def test_dump_from_to_prints_the_lines_of_the_whole_dump_in_that_stretch_with_the_same_times() -> None:
    whole = _dump(str(DEMO))
    part = _dump(str(DEMO), "--from", str(FROM_S), "--to", str(TO_S))
    timed = [_seconds(line) for line in part if _seconds(line) is not None]
    assert timed and min(timed) >= FROM_S and max(timed) <= TO_S  # type: ignore[type-var]
    start = whole.index(part[0])
    assert whole[start : start + len(part)] == part
    before = [_seconds(line) for line in whole[:start] if _seconds(line) is not None]
    after = [_seconds(line) for line in whole[start + len(part) :] if _seconds(line) is not None]
    assert max(before) < FROM_S and min(after) > TO_S  # type: ignore[type-var]
    assert any("compile_end" in line and "layout_conflict" in line and "ok=false" in line for line in part)


def test_cut_replays_dumps_and_exports_that_stretch_with_the_compile_running_at_its_start(tmp_path: Path) -> None:
    out = tmp_path / "cut.msgpack"
    result = run_iket("cut", str(DEMO), "--from", str(FROM_S), "--to", str(TO_S), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("iket-tui: wrote ") and str(out) in result.stderr
    msgs, info = read_recording(out)
    assert info.ended and info.cut_at is None and info.skipped_bytes == 0
    assert [msg["type"] for msg in msgs[:2]] == [m.RECORDING, m.HELLO]
    # Its header says where the stretch begins: a replay passes the context before it at once.
    until = info.context_until_ns
    assert until is not None and msgs[0]["context_until_ns"] == until
    times = [t for msg in msgs if (t := m.t_ns_of(msg))]
    assert until in times and min(times) < until  # the stretch's first message, and context before it
    # Dumped: the stretch as dump --from/--to prints it, after what it needs of what came before.
    part = _stream(_dump(str(DEMO), "--from", str(FROM_S), "--to", str(TO_S)))
    dumped = _stream(_dump(str(out)))
    end = next(i for i, line in enumerate(dumped) if line.split()[2:3] == [m.END])
    assert "cut from 5.5 s to 19 s of h200-demo.msgpack" in dumped[end]
    assert dumped[end - len(part) : end] == part
    assert all("never finished: the recording ends here" in line for line in dumped[end + 1 :])  # compile 6's
    kept_before = [_seconds(line) for line in dumped[: end - len(part)] if _seconds(line) is not None]
    assert kept_before and all(t is not None and t < FROM_S for t in kept_before)
    # Replayed: the compiles the stretch shows are the original's, the first with its earlier passes.
    original = _compiles(DEMO)
    replayed = _compiles(out)
    assert sorted(replayed) == [1, 2, 3, 4, 5, 6]
    for compile_id in (1, 2, 3, 4, 5):
        assert replayed[compile_id] == original[compile_id]
    assert replayed[5][1] == "failed" and replayed[6][1] == "running"  # nvcc_error began at 18.98 s
    # Exported: a Chrome trace with the passes of every compile kept.
    trace = tmp_path / "cut.json"
    exported = run_iket("export", str(out), "-o", str(trace))
    assert exported.returncode == 0, exported.stderr
    names = {event.get("name") for event in json.loads(trace.read_text())["traceEvents"]}
    assert {"tl.LayoutInference", "tirx.BindTarget"} <= names


def test_a_cut_of_a_truncated_recording_writes_what_was_complete_and_says_where_it_was_cut(tmp_path: Path) -> None:
    data = DEMO.read_bytes()
    truncated = tmp_path / "truncated.msgpack"
    truncated.write_bytes(data[: len(data) * 2 // 3])
    out = tmp_path / "cut.msgpack"
    result = run_iket("cut", str(truncated), "--from", "20", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert f"{truncated}: recording cut at byte " in result.stderr
    msgs, info = read_recording(out)
    assert info.ended and info.cut_at is None
    complete, _ = read_recording(truncated)
    last = max(t for t in map(m.t_ns_of, complete) if t is not None)
    assert max(t for t in map(m.t_ns_of, msgs) if t is not None) == last
    assert sum(1 for msg in msgs if msg["type"] == m.COMPILE_BEGIN) >= 1


def test_dump_from_to_over_garbage_in_the_middle_skips_it_and_says_so(tmp_path: Path) -> None:
    data = DEMO.read_bytes()
    middle = len(data) // 2
    damaged = tmp_path / "damaged.msgpack"
    damaged.write_bytes(data[:middle] + b"\xde\xad\xbe\xef" * 1000 + data[middle:])
    result = run_iket("dump", str(damaged), "--from", "1", "--to", "29")
    assert result.returncode == 0
    assert "damaged bytes" in result.stderr
    lines = _stream(result.stdout.splitlines())
    assert lines and all((t := _seconds(line)) is None or 1 <= t <= 29 for line in lines)
    out = tmp_path / "cut.msgpack"
    cut = run_iket("cut", str(damaged), "--from", "1", "--to", "29", "-o", str(out))
    assert cut.returncode == 0 and "damaged bytes" in cut.stderr
    dumped = _stream(_dump(str(out)))
    end = next(i for i, line in enumerate(dumped) if line.split()[2:3] == [m.END])
    assert dumped[end - len(lines) : end] == lines


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--from", "5", "--to", "3"), "--to 3 is before --from 5"),
        (("--from", "50"), "nothing recorded from 50 s to the end (it lasts 29.481 s)"),
        (("--from", "-1"), "must be 0 or more seconds"),
    ],
)
def test_a_span_that_holds_nothing_is_a_one_line_error(args: tuple[str, ...], expected: str, tmp_path: Path) -> None:
    assert_one_line_error(run_iket("dump", str(DEMO), *args), expected)
    out = tmp_path / "cut.msgpack"
    assert_one_line_error(run_iket("cut", str(DEMO), *args, "-o", str(out)), expected)
    assert not out.exists()


def test_cut_writes_no_recording_to_standard_output() -> None:
    result = run_iket("cut", str(DEMO), "--from", "5", "-o", "-")
    assert_one_line_error(result, "iket-tui: -o -: only `record`, `export` and `repro` write to standard output")
    assert result.stdout == ""


def test_cut_refuses_to_write_over_the_recording_it_reads(tmp_path: Path) -> None:
    copy = tmp_path / "run.msgpack"
    copy.write_bytes(DEMO.read_bytes())
    assert_one_line_error(run_iket("cut", str(copy), "--from", "5", "-o", str(copy)), str(copy))
    assert copy.read_bytes() == DEMO.read_bytes()


def test_dump_records_from_a_time_names_the_kernel_events_with_the_tables_sent_before_it() -> None:
    events = [line for line in _dump(str(DEMO), "--records") if line.split()[:1] == ["kernel_event"]]
    part = _dump(str(DEMO), "--records", "--from", "27", "--to", "28")  # the drain at 27.68 s, its table at 23.94 s
    assert [line for line in part if line.split()[:1] == ["kernel_event"]] == events
    assert events and "tile module=1 kernel=traced_gemm_kernel" in events[0]


def test_dump_from_a_time_still_closes_the_passes_the_recording_ends_in() -> None:
    whole = [line for line in _dump(str(DEMO)) if "never finished" in line or "kernel_launch" in line]
    assert [
        line for line in _dump(str(DEMO), "--from", "29") if "never finished" in line or "kernel_launch" in line
    ] == whole


def test_a_cut_from_inside_a_running_kernel_launch_says_it_holds_the_launch_from_there_on(tmp_path: Path) -> None:
    waiting = DEMO.parent / "h200-demo-waiting.msgpack"  # block 3 of its last launch waits 4 s
    out = tmp_path / "cut.msgpack"
    result = run_iket("cut", str(waiting), "--from", "31", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "iket-tui: 1 kernel launch was running at 31 s: the cut holds its events from there on",
        f"iket-tui: wrote 6 messages from 31 s to the end, and 2 from before it that they need, to {out}",
    ]
    quiet = run_iket("cut", str(waiting), "--from", "25", "--to", "27", "-o", str(tmp_path / "before.msgpack"))
    assert "running at" not in quiet.stderr  # no launch ran then


@pytest.mark.parametrize(("name", "expected"), [("missing.msgpack", "no such file"), (".", "is a directory")])
def test_a_file_that_cannot_be_read_is_its_error_alone(name: str, expected: str, tmp_path: Path) -> None:
    result = run_iket("cut", str(tmp_path / name), "--from", "1", "-o", str(tmp_path / "cut.msgpack"))
    assert_one_line_error(result, expected)  # no note on a recording that was never opened
