"""``record`` and ``run --no-ui --record`` against a real TileLang program running the real agent."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import TIMEOUT_S, iket_command, run_iket, wait_until

from iket_tui.endpoints import process_start_time, socket_path_for
from iket_tui.protocol import messages as m
from iket_tui.sources.base import SourceError
from iket_tui.sources.reading import read_recording

pytestmark = [
    pytest.mark.tilelang,
    pytest.mark.skipif(importlib.util.find_spec("tilelang") is None, reason="needs the tilelang extra"),
]

TARGET = Path(__file__).resolve().parent / "tilelang_target.py"


def _types(path: Path) -> list[str]:
    try:
        msgs, _ = read_recording(path)
    except SourceError:
        return []
    return [msg["type"] for msg in msgs]


def _check_one_lowering(msgs: list[m.Message], pid: int) -> None:
    """The hello of ``pid``, one whole successful compile with its passes in order, and a goodbye."""
    types = [msg["type"] for msg in msgs]
    assert types[0] == m.RECORDING and types[-1] == m.END
    hello = msgs[1]
    assert hello["type"] == m.HELLO and hello["role"] == "agent" and hello["pid"] == pid
    assert types.count(m.COMPILE_BEGIN) == types.count(m.COMPILE_END) == 1
    starts = [msg for msg in msgs if msg["type"] == m.PASS_START]
    ends = [msg for msg in msgs if msg["type"] == m.PASS_END]
    assert len(starts) == len(ends) >= 50
    assert [msg["seq"] for msg in starts] == list(range(len(starts)))
    assert {msg["name"] for msg in ends} >= {"tl.LayoutInference", "tl.LowerTileOp"}
    assert all(msg["duration_ns"] >= 0 for msg in ends)
    compile_end = next(msg for msg in msgs if msg["type"] == m.COMPILE_END)
    assert compile_end["ok"] is True and compile_end["error"] is None
    assert types.index(m.COMPILE_BEGIN) < types.index(m.PASS_START) < types.index(m.COMPILE_END) < types.index(m.BYE)


def test_record_a_running_program_through_its_compile_to_its_exit(tmp_path: Path) -> None:
    out = tmp_path / "real.msgpack"
    target = subprocess.Popen(
        [sys.executable, str(TARGET), "--on-cue"],
        env=dict(os.environ, IKET_TUI="1"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert target.stdin is not None and target.stdout is not None
    try:
        assert target.stdout.readline() == "ready\n"
        start = process_start_time(target.pid)
        assert start is not None
        wait_until(socket_path_for(target.pid, start).exists)
        recorder = subprocess.Popen(
            iket_command("record", str(target.pid), "-o", str(out)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_until(lambda: m.SYNC in _types(out))
        target.stdin.write("go\n")
        target.stdin.flush()
        assert target.stdout.readline() == "lowered\n"
        target.stdin.close()
        assert target.wait(TIMEOUT_S) == 0
        stdout, stderr = recorder.communicate(timeout=TIMEOUT_S)
    finally:
        if target.poll() is None:
            target.kill()
            target.wait()
    assert recorder.returncode == 0, stderr
    assert stderr == ""
    assert stdout.rstrip().endswith("(the target exited)")
    msgs, info = read_recording(out)
    assert info.ended and info.cut_at is None
    _check_one_lowering(msgs, target.pid)


def test_run_records_a_real_program_and_exits_with_its_code(tmp_path: Path) -> None:
    out = tmp_path / "run.msgpack"
    result = run_iket("run", "--no-ui", "--record", str(out), "--", sys.executable, str(TARGET), "--exit-code", "3")
    assert result.returncode == 3, result.stderr
    assert result.stdout == "lowered\n"
    msgs, info = read_recording(out)
    assert info.ended
    assert [msg["type"] for msg in msgs[1:3]] == [m.HELLO, m.SYNC]
    _check_one_lowering(msgs, msgs[1]["pid"])
    assert msgs[1]["argv"][-2:] == ["--exit-code", "3"]
