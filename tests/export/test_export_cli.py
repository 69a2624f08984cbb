"""``iket-tui export``: the files it writes, what it says, and its one-line errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from export_helpers import EXAMPLE

from iket_tui.cli import main
from iket_tui.protocol import messages as m
from iket_tui.sources.recorder import RecordingWriter

CHROME_EVENTS = 3 * (16_896 + 8_704) + 9 + 734 + 15
"""Ranges and marks of three launches, then the compiles, their passes and codegen steps."""


def export(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    code = main(["export", *args])
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "Traceback" not in captured.err
    return code, captured.err.splitlines()


def assert_one_line_error(code: int, lines: list[str], *expected: str) -> None:
    assert code == 2, lines
    assert len(lines) == 1 and lines[0].startswith("iket-tui: "), lines
    for part in expected:
        assert part in lines[0], lines


def test_chrome_is_the_default_and_the_file_is_the_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], example_chrome: Any
) -> None:
    out = tmp_path / "trace.json"
    code, lines = export(capsys, str(EXAMPLE), "-o", str(out))
    written = json.loads(out.read_text(encoding="utf-8"))
    count = sum(1 for event in written["traceEvents"] if event["ph"] != "M")
    assert (code, lines) == (0, [f"iket-tui: wrote {count} events to {out}"])
    assert count == CHROME_EVENTS
    assert written["traceEvents"] == example_chrome["traceEvents"]
    assert written["otherData"]["recording"] == "h200-demo.msgpack"


def test_speedscope_writes_one_profile_of_the_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "passes.speedscope.json"
    code, lines = export(capsys, str(EXAMPLE), "-o", str(out), "--format", "speedscope")
    written = json.loads(out.read_text(encoding="utf-8"))
    assert (code, lines) == (0, [f"iket-tui: wrote {2 * (9 + 734 + 15)} events to {out}"])
    assert len(written["profiles"]) == 1
    assert written["name"] == "h200-demo.msgpack"


def test_a_cut_recording_exports_what_it_holds_and_says_where_it_was_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cut = tmp_path / "cut.msgpack"
    data = EXAMPLE.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    out = tmp_path / "trace.json"
    code, lines = export(capsys, str(cut), "-o", str(out))
    assert code == 0
    assert len(lines) == 2
    assert lines[0].startswith(f"iket-tui: {cut}: recording cut at byte ")
    assert lines[1].startswith("iket-tui: wrote ") and lines[1].endswith(f" events to {out}")
    written = json.loads(out.read_text(encoding="utf-8"))
    assert 0 < sum(1 for event in written["traceEvents"] if event["ph"] != "M") < CHROME_EVENTS


def test_a_garbage_input_is_one_line_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    garbage = tmp_path / "garbage.msgpack"
    garbage.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(200))
    out = tmp_path / "trace.json"
    code, lines = export(capsys, str(garbage), "-o", str(out))
    assert_one_line_error(code, lines, str(garbage), "not an iket-tui recording")
    assert not out.exists()
    code, lines = export(capsys, str(tmp_path / "missing.msgpack"), "-o", str(out))
    assert_one_line_error(code, lines, "no such file")


def test_an_output_that_cannot_be_written_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = export(capsys, str(EXAMPLE), "-o", str(tmp_path / "no" / "such" / "trace.json"))
    assert_one_line_error(code, lines, "no such directory")
    code, lines = export(capsys, str(EXAMPLE), "-o", str(tmp_path))
    assert_one_line_error(code, lines, str(tmp_path), "is a directory")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_write_that_fails_midway_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = export(capsys, str(EXAMPLE), "-o", "/dev/full")
    assert_one_line_error(code, lines, "/dev/full: ")
    assert lines[0].endswith(("No space left on device", "permission denied"))


def test_speedscope_of_a_recording_without_compiles_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], small_kernel_stream: list[m.Message]
) -> None:
    recording = tmp_path / "kernels.msgpack"
    writer = RecordingWriter(recording, source="pid 1: python small_kernel.py")
    for msg in small_kernel_stream:
        writer.write(msg)
    writer.close("target exited")
    out = tmp_path / "passes.json"
    code, lines = export(capsys, str(recording), "-o", str(out), "--format", "speedscope")
    assert_one_line_error(code, lines, "holds no compile")
    assert not out.exists()
    code, lines = export(capsys, str(recording), "-o", str(out))
    assert (code, lines) == (0, [f"iket-tui: wrote 6 events to {out}"])


def test_help_says_every_format_is_written_while_read(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "Every format is written while the recording is read, in bounded memory" in text
    assert "temporary file, under TMPDIR" in text
    assert "The Chrome trace is written while" not in text
