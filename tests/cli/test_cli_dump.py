"""``iket-tui dump`` over real recordings: the two formats, cut files and unreadable files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import FakeAgent, assert_one_line_error, complete_messages, run_iket

from iket_tui.protocol import messages as m
from iket_tui.protocol.recording import MAGIC
from iket_tui.sources.reading import read_recording
from iket_tui.sources.recorder import RecordingWriter

PASS_KEYS = {"type", "name", "seq", "depth", "parent", "phase", "compile", "t_ns"}


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recording of a whole session from a fake agent, made by ``iket-tui record``."""
    out = tmp_path_factory.mktemp("dump") / "session.msgpack"
    with FakeAgent("normal") as agent:
        assert run_iket("record", str(agent.pid), "-o", str(out)).returncode == 0
    return out


def _failing_compile(path: Path) -> Path:
    writer = RecordingWriter(path, source="pid 1: python fails.py")
    common: dict[str, Any] = {"compile": 2, "context": 0, "seq": 4, "depth": 1, "parent": 3, "phase": "pipeline_cuda"}
    writer.write(m.compile_begin(compile=2, label="stage=jit-lower, kernel=bad", kernel="bad", target="cuda", t_ns=10))
    writer.write(m.pass_start(name="tl.LayoutInference", t_ns=20, **common))
    writer.write(
        m.pass_incomplete(name="tl.LayoutInference", t_ns=30, error="InternalError: Layout infer conflict", **common)
    )
    writer.write(
        m.compile_end(
            compile=2,
            label="stage=jit-lower, kernel=bad",
            t_ns=40,
            duration_ns=30,
            ok=False,
            error="InternalError: Layout infer conflict",
            error_type="tvm.error.InternalError",
            traceback="Traceback (most recent call last):\n  ...\nInternalError: Layout infer conflict\n",
            stage="pass",
        )
    )
    writer.close("target exited")
    return path


def test_jsonl_has_one_object_per_message_with_the_documented_keys(recording: Path) -> None:
    result = run_iket("dump", str(recording), "--format", "jsonl")
    assert result.returncode == 0 and result.stderr == ""
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    msgs, _ = read_recording(recording)
    assert len(objects) == len(msgs)
    assert all("type" in obj for obj in objects)
    assert objects[0]["type"] == m.RECORDING and objects[-1]["type"] == m.END
    ends = [obj for obj in objects if obj["type"] == m.PASS_END]
    assert [obj["name"] for obj in ends] == ["tl.Pass0", "tl.Pass1", "tl.Pass2"]
    assert all(PASS_KEYS | {"duration_ns"} <= obj.keys() for obj in ends)
    begin = next(obj for obj in objects if obj["type"] == m.COMPILE_BEGIN)
    assert begin["compile"] == 1 and begin["label"] == "stage=jit-lower, kernel=add"
    end = next(obj for obj in objects if obj["type"] == m.COMPILE_END)
    assert end["ok"] is True and end["error"] is None and end["stage"] is None


def test_jsonl_of_a_failed_compile_carries_the_error(tmp_path: Path) -> None:
    result = run_iket("dump", str(_failing_compile(tmp_path / "fail.msgpack")), "--format", "jsonl")
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    incomplete = next(obj for obj in objects if obj["type"] == m.PASS_INCOMPLETE)
    assert PASS_KEYS | {"error"} <= incomplete.keys()
    assert incomplete["error"] == "InternalError: Layout infer conflict"
    assert incomplete["parent"] == 3 and incomplete["depth"] == 1
    end = next(obj for obj in objects if obj["type"] == m.COMPILE_END)
    assert (end["ok"], end["stage"], end["error"]) == (False, "pass", "InternalError: Layout infer conflict")
    assert end["traceback"].startswith("Traceback")


def test_text_is_one_aligned_line_per_message(recording: Path, tmp_path: Path) -> None:
    result = run_iket("dump", str(recording))
    assert result.returncode == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    msgs, _ = read_recording(recording)
    assert len(lines) == len(msgs)
    assert [line[17:35].strip() for line in lines] == [msg["type"] for msg in msgs]
    first_pass = next(line for line in lines if "pass_end" in line)
    assert "compile=1 context=0 seq=0 depth=0 parent=- phase=pipeline_cuda tl.Pass0 duration=1.00µs" in first_pass
    failed = run_iket("dump", str(_failing_compile(tmp_path / "fail.msgpack"))).stdout.splitlines()
    assert len(failed) == 6
    assert 'error="InternalError: Layout infer conflict"' in failed[3]
    assert "traceback=<3 lines>" in failed[4]


def test_a_cut_recording_dumps_every_complete_frame_and_says_where_it_was_cut(recording: Path, tmp_path: Path) -> None:
    data = recording.read_bytes()
    cut = tmp_path / "cut.msgpack"
    cut.write_bytes(data[: len(data) - 20])
    result = run_iket("dump", str(cut), "--format", "jsonl")
    assert result.returncode == 0
    complete = complete_messages(cut.read_bytes())
    assert len(result.stdout.splitlines()) == complete
    msgs, _ = read_recording(recording)
    assert [json.loads(line)["type"] for line in result.stdout.splitlines()] == [msg["type"] for msg in msgs[:complete]]
    [note] = result.stderr.splitlines()
    assert note.startswith(f"iket-tui: {cut}: recording cut at byte ")
    assert note.endswith(f": {complete} complete messages read")


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (None, "no such file"),
        (b"", "empty file"),
        (b"\x7fELF\x02\x01\x01" + bytes(64), "not an iket-tui recording"),
        (MAGIC[:4], "shorter than its header"),
        (MAGIC + b"\x00\x00\x00\x09\x00\x00", "no complete frame"),
    ],
    ids=["missing", "empty", "garbage", "short", "cut-in-first-frame"],
)
def test_an_unreadable_file_is_a_one_line_error(tmp_path: Path, content: bytes | None, error: str) -> None:
    path = tmp_path / "bad.msgpack"
    if content is not None:
        path.write_bytes(content)
    for fmt in ("text", "jsonl"):
        result = run_iket("dump", str(path), "--format", fmt)
        assert_one_line_error(result, str(path), error)
        assert result.stdout == ""


def test_a_directory_is_a_one_line_error(tmp_path: Path) -> None:
    assert_one_line_error(run_iket("dump", str(tmp_path)), "is a directory")


def _hello(pid: int) -> m.Message:
    return m.hello(role="agent", pid=pid, start_time=pid, software_version="0.1", capabilities=["passes"], t_ns=1)


def _stuck_pass(compile_id: int, seq: int, name: str, t_ns: int) -> m.Message:
    return m.pass_start(compile=compile_id, context=0, seq=seq, depth=0, parent=None, phase=None, name=name, t_ns=t_ns)


def test_a_pass_the_recording_ends_in_gets_a_closing_line_saying_it_is_incomplete(tmp_path: Path) -> None:
    """As the UI and export call it: the pass never finished, the recording ends there."""
    path = tmp_path / "hang.msgpack"
    writer = RecordingWriter(path, source="pid 4242: python hang.py")
    writer.write(_hello(4242))
    writer.write(m.compile_begin(compile=1, label="k", kernel="k", target="cuda", t_ns=10))
    writer.write(_stuck_pass(1, 1, "tl.Done", 20))
    writer.write(
        m.pass_end(
            compile=1, context=0, seq=1, depth=0, parent=None, phase=None, name="tl.Done", t_ns=30, duration_ns=10
        )
    )
    writer.write(_stuck_pass(1, 2, "x.Stuck", 40))
    writer.write(m.heartbeat(t_ns=5_000, produced=3, dropped=0, open_passes=1))
    writer.close("interrupted")
    result = run_iket("dump", str(path), "--format", "jsonl")
    assert result.returncode == 0, result.stderr
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    assert objects[-2]["type"] == m.END
    closing = objects[-1]
    assert closing == {
        "type": m.PASS_INCOMPLETE,
        "compile": 1,
        "context": 0,
        "seq": 2,
        "depth": 0,
        "parent": None,
        "phase": None,
        "name": "x.Stuck",
        "t_ns": 5_000,
        "error": "never finished: the recording ends here",
    }
    trace = tmp_path / "trace.json"
    assert run_iket("export", str(path), "-o", str(trace)).returncode == 0
    (exported,) = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("name") == "x.Stuck"]
    assert exported["args"]["status"] == "incomplete" and exported["args"]["error"] == closing["error"]
    text = run_iket("dump", str(path)).stdout.splitlines()[-1]
    assert "pass_incomplete" in text and 'error="never finished: the recording ends here"' in text


def test_of_several_processes_only_the_passes_no_line_closed_get_one_naming_their_process(tmp_path: Path) -> None:
    """A process whose stream ended has its line saying so; one still going at the end has none."""
    path = tmp_path / "pool.msgpack"
    writer = RecordingWriter(path, source="pid 1: python pool.py")
    writer.write(m.process(pid=101, start_time=101))
    writer.write(_hello(101))
    writer.write(m.compile_begin(compile=1, label="a", kernel="a", target="cuda", t_ns=10))
    writer.write(_stuck_pass(1, 1, "x.KilledIn", 20))
    writer.write(m.process(pid=102, start_time=102))
    writer.write(_hello(102))
    writer.write(m.compile_begin(compile=1, label="b", kernel="b", target="cuda", t_ns=10))
    writer.write(_stuck_pass(1, 1, "x.StillIn", 30))
    writer.write(m.process(pid=101, start_time=101, state=m.PROCESS_ENDED, reason="killed"))
    writer.write(m.process(pid=102, start_time=102))
    writer.write(_stuck_pass(1, 2, "x.Ended", 40))
    writer.write(m.compile_end(compile=1, label="b", t_ns=50, duration_ns=40, ok=True))
    writer.write(m.compile_begin(compile=2, label="c", kernel="c", target="cuda", t_ns=60))
    writer.write(_stuck_pass(2, 1, "x.StillIn", 70))
    writer.close("interrupted")
    result = run_iket("dump", str(path), "--format", "jsonl")
    assert result.returncode == 0, result.stderr
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    closing = objects[[o["type"] for o in objects].index(m.END) + 1 :]
    assert [(o["type"], o["pid"], o["compile"], o["name"]) for o in closing] == [
        (m.PASS_INCOMPLETE, 102, 2, "x.StillIn")
    ]
