"""The commands that open the UI, in a real terminal: run, attach and replay, quit with ``q``."""

from __future__ import annotations

import os
import shlex
import signal
import sys
from pathlib import Path

from cli_helpers import FAKE_AGENT_PATH, FakeAgent, Terminal, assert_no_traceback, run_iket, wait_until

from iket_tui.protocol import messages as m
from iket_tui.sources.base import SourceError
from iket_tui.sources.reading import read_recording

READY = b"Quit"


def _fake(mode: str, exit_code: int = 0) -> str:
    agent = f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKE_AGENT_PATH))}"
    return f"exec env IKET_TUI= {agent} {mode} --exit-code {exit_code}"


def _recorded_bye(path: Path) -> bool:
    try:
        msgs, _ = read_recording(path)
    except SourceError:
        return False
    return any(msg["type"] == m.BYE for msg in msgs)


def test_quitting_the_ui_stops_a_program_that_still_runs(tmp_path: Path) -> None:
    out = tmp_path / "run.msgpack"
    terminal = Terminal("run", "--record", str(out), "--", "sh", "-c", _fake("endless"))
    terminal.wait_for(READY)
    terminal.press(b"q")
    assert terminal.wait_exit() == 143
    after = terminal.lines_after_ui
    assert_no_traceback("\n".join(after))
    assert any("was still running: stopped it with SIGTERM" in line for line in after), after
    assert "iket-tui: recorded" in " ".join(after)
    msgs, info = read_recording(out)
    assert info.ended and msgs[1]["type"] == m.HELLO


def test_run_exits_with_the_programs_code_once_the_user_quits(tmp_path: Path) -> None:
    out = tmp_path / "run.msgpack"
    terminal = Terminal("run", "--record", str(out), "--", "sh", "-c", _fake("normal", 3))
    terminal.wait_for(READY)
    wait_until(lambda: _recorded_bye(out))
    terminal.press(b"q")
    assert terminal.wait_exit() == 3
    after = terminal.lines_after_ui
    assert not any("still running" in line for line in after), after


def test_attach_shows_a_live_target_and_records_it(tmp_path: Path) -> None:
    out = tmp_path / "attach.msgpack"
    with FakeAgent("endless") as agent:
        terminal = Terminal("attach", str(agent.pid), "--record", str(out))
        terminal.wait_for(READY)
        terminal.press(b"q")
        assert terminal.wait_exit() == 0
        assert agent.process is not None and agent.process.poll() is None
    msgs, info = read_recording(out)
    assert info.ended and msgs[1]["pid"] == agent.pid


def test_replay_opens_the_ui_over_a_recording(tmp_path: Path) -> None:
    out = tmp_path / "run.msgpack"
    with FakeAgent("normal") as agent:
        assert run_iket("record", str(agent.pid), "-o", str(out)).returncode == 0
    terminal = Terminal("replay", str(out), "--speed", "max")
    terminal.wait_for(READY)
    terminal.press(b"q")
    assert terminal.wait_exit() == 0


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return True
    return stat[stat.rfind(b")") + 2 :].split()[0] == b"Z"


def _recorded_pid(path: Path) -> int | None:
    try:
        msgs, _ = read_recording(path)
    except SourceError:
        return None
    hello = next((msg for msg in msgs if msg["type"] == m.HELLO), None)
    return None if hello is None else int(hello["pid"])


def test_sigterm_closes_the_ui_stops_the_program_and_closes_the_recording(tmp_path: Path) -> None:
    out = tmp_path / "run.msgpack"
    terminal = Terminal("run", "--record", str(out), "--", "sh", "-c", _fake("endless"))
    terminal.wait_for(READY)
    os.kill(terminal.pid, signal.SIGTERM)
    assert terminal.wait_exit() == 143
    after = terminal.lines_after_ui
    assert any("was still running: stopped it with SIGTERM" in line for line in after), after
    _msgs, info = read_recording(out)
    assert info.ended


def test_a_killed_iket_tui_takes_its_program_with_it(tmp_path: Path) -> None:
    out = tmp_path / "run.msgpack"
    terminal = Terminal("run", "--record", str(out), "--", "sh", "-c", _fake("endless"))
    terminal.wait_for(READY)
    wait_until(lambda: _recorded_pid(out) is not None)
    program = _recorded_pid(out)
    assert program is not None and not _gone(program)
    os.kill(terminal.pid, signal.SIGKILL)
    assert terminal.wait_exit() == -signal.SIGKILL
    wait_until(lambda: _gone(program))
