"""``record``, ``attach --record`` and ``run --record`` onto a disk that fills up, as a user runs
them: one line saying the disk is full and where the file was cut, and a file that replays up
to there. The disk is a real small tmpfs, ``/dev/full``, or a file-size limit."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from cli_helpers import (
    TIMEOUT_S,
    FakeAgent,
    Terminal,
    assert_no_traceback,
    assert_one_line_error,
    iket_command,
    run_iket,
)
from full_disk import DEV_FULL, file_size_limit, small_filesystem

from iket_tui.protocol import messages as m
from iket_tui.sources.reading import read_recording

STOPPED = re.compile(
    r"recording stopped, (?P<why>[^:]+): (?P<path>\S+) was cut at byte (?P<at>\d+), "
    r"after (?P<messages>\d+) messages \(all of them replay\)$"
)


def _stream(msgs: list[m.Message]) -> list[m.Message]:
    return [msg for msg in msgs if msg["type"] not in (m.RECORDING, m.CHECKPOINT, m.END)]


def _check_cut_file(path: Path, line: str, why: str) -> None:
    """The line names the file, why it stopped and where; the file replays exactly that much."""
    said = STOPPED.search(line)
    assert said is not None, line
    assert (said["why"], said["path"]) == (why, str(path))
    msgs, info = read_recording(path)
    assert info.cut_at is None and info.skipped_bytes == 0
    stream = _stream(msgs)
    assert len(stream) == int(said["messages"]) > 3
    assert stream[0]["type"] == m.HELLO and stream[-1]["type"] in (m.PASS_START, m.PASS_END, m.HEARTBEAT)
    assert int(said["at"]) <= path.stat().st_size < int(said["at"]) + 200


def test_record_onto_a_disk_that_fills_up_says_where_it_was_cut(tmp_path: Path) -> None:
    with small_filesystem(tmp_path) as disk, FakeAgent("endless") as agent:
        out = disk / "run.msgpack"
        result = run_iket("record", str(agent.pid), "-o", str(out))
        assert_one_line_error(result, "recording stopped, the disk is full")
        assert "(recording stopped)" in result.stdout
        _check_cut_file(out, result.stderr.strip(), "the disk is full")


@pytest.mark.skipif(not DEV_FULL.exists(), reason="needs /dev/full")
def test_record_onto_dev_full_says_the_disk_is_full() -> None:
    with FakeAgent("endless") as agent:
        result = run_iket("record", str(agent.pid), "-o", str(DEV_FULL))
    assert_one_line_error(result, "the disk is full: /dev/full cannot hold even a recording's header")


def test_record_past_a_file_size_limit_stops_the_same_way(tmp_path: Path) -> None:
    out = tmp_path / "run.msgpack"
    with FakeAgent("endless") as agent:
        result = subprocess.run(
            iket_command("record", str(agent.pid), "-o", str(out)),
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            preexec_fn=file_size_limit(50_000),
        )
    assert_one_line_error(result, "recording stopped, file too large")
    _check_cut_file(out, result.stderr.strip(), "file too large")


def test_attach_keeps_showing_the_stream_when_its_recording_stops(tmp_path: Path) -> None:
    with small_filesystem(tmp_path) as disk, FakeAgent("endless") as agent:
        out = disk / "attach.msgpack"
        terminal = Terminal("attach", str(agent.pid), "--record", str(out), columns=200)
        terminal.wait_for(b"recording stopped, the disk is full", timeout=60)
        shown = len(terminal.output)
        terminal.read_for(1.0)
        assert len(terminal.output) > shown + 1000, "the screen stopped changing"
        assert b"failed" not in terminal.output[shown:]
        terminal.press(b"q")
        code = terminal.wait_exit()
        after = terminal.lines_after_ui
        assert code == 2, after
        assert_no_traceback("\n".join(after))
        lines = [line for line in after if line.startswith("iket-tui: ")]
        assert len(lines) == 1, after
        _check_cut_file(out, lines[0], "the disk is full")


def test_run_no_ui_says_at_once_that_recording_stopped_and_the_program_goes_on(tmp_path: Path) -> None:
    with small_filesystem(tmp_path) as disk:
        out = disk / "run.msgpack"
        runner = subprocess.Popen(
            iket_command("run", "--no-ui", "--record", str(out), "--", "env", "IKET_TUI=", *FakeAgent("endless").argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert runner.stderr is not None
        line = runner.stderr.readline()
        while line and "recording stopped" not in line:
            line = runner.stderr.readline()
        _check_cut_file(out, line.strip(), "the disk is full")
        time.sleep(0.5)
        assert runner.poll() is None, "run stopped with the recording"
        runner.send_signal(signal.SIGTERM)
        _, rest = runner.communicate(timeout=TIMEOUT_S)
    assert_no_traceback(rest)
    assert runner.returncode == 143
    said = STOPPED.search(line)
    assert said is not None
    assert f"iket-tui: recorded {said['messages']} messages to {out}" in rest.splitlines()
