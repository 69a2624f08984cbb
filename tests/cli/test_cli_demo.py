"""``iket-tui demo`` without TileLang replays the bundled H200 recording of the demo program in
the UI (its compiles, passes and kernels) instead of refusing; ``--recording`` asks for that
replay anywhere. With TileLang, the live demo's program lives until the UI closes, with a compile
stuck from the start, and ends with it."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from cli_helpers import Terminal, assert_no_traceback, assert_one_line_error, run_iket

RECORDED_PROGRAM = b"pid 471"
"""The header of the replay: the process the H200 recording was made of."""
FIRST_COMPILE = b"vector_add"
"""The kernel of the first compile in the recording, about 5 s into it."""
NO_TILELANG = "TileLang is not installed"


@pytest.fixture
def without_tilelang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands started from now on find no TileLang, as in an install without the extra."""
    shim = tmp_path / "no-tilelang"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text('import sys\nsys.modules["tilelang"] = None  # import tilelang fails\n')
    monkeypatch.setenv("PYTHONPATH", str(shim))


def _replay_shown(terminal: Terminal) -> None:
    terminal.wait_for(RECORDED_PROGRAM)
    terminal.wait_for(b"iket_tui.demo.program")
    terminal.wait_for(b"speed 1x")  # a replay, at the pace it was recorded
    terminal.wait_for(FIRST_COMPILE)  # the tree fills as the recording plays
    terminal.wait_for(b"tl.LayoutInference")  # with its passes


@pytest.mark.usefixtures("without_tilelang")
def test_demo_without_tilelang_replays_the_h200_recording() -> None:
    terminal = Terminal("demo", columns=160)
    _replay_shown(terminal)
    terminal.press(b"q")
    assert terminal.wait_exit() == 0
    after = terminal.lines_after_ui
    assert_no_traceback("\n".join(after))
    said = "iket-tui: that was the demo recorded on an H200: pip install 'iket-tui[tilelang]' runs it live here"
    assert after == [said]


def test_demo_recording_replays_it_anywhere() -> None:
    terminal = Terminal("demo", "--recording", columns=160)
    _replay_shown(terminal)
    terminal.press(b"q")
    assert terminal.wait_exit() == 0
    assert terminal.lines_after_ui == []


@pytest.mark.usefixtures("without_tilelang")
def test_demo_without_tilelang_says_that_recording_needs_the_live_demo(tmp_path: Path) -> None:
    result = run_iket("demo", "--no-ui", "--record", str(tmp_path / "demo.msgpack"))
    assert_one_line_error(result, NO_TILELANG, "--record and --no-ui", "pip install 'iket-tui[tilelang]'")
    assert not (tmp_path / "demo.msgpack").exists()


@pytest.mark.usefixtures("without_tilelang")
def test_demo_without_a_terminal_says_which_command_to_use() -> None:
    assert_one_line_error(run_iket("demo"), "the UI needs a terminal")


def _group_members(pgid: int) -> dict[int, str]:
    """The live processes (zombies aside) in process group ``pgid``: their command lines."""
    members = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members[int(stat.parent.name)] = command
    return members


def _group_ended(pgid: int, within_s: float = 10.0) -> dict[int, str]:
    """The processes of group ``pgid`` still alive ``within_s`` after it was sent SIGTERM."""
    deadline = time.monotonic() + within_s
    while (left := _group_members(pgid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


@pytest.mark.tilelang
def test_the_live_demo_shows_its_stuck_compile_and_its_program_ends_with_the_ui() -> None:
    pytest.importorskip("tilelang")
    terminal = Terminal("demo", columns=160, rows=48)
    terminal.wait_for(b"Try this")  # the hint of what to try
    terminal.wait_for(b"stuck: demo.WaitForAbort")  # the header, once the demo's 5 s have passed
    found = re.search(rb"pid (\d+)", terminal.output)
    assert found is not None
    pid = int(found.group(1))
    assert _group_members(pid)  # the program and the compiler processes it starts, in a group of their own

    terminal.press(b"q")

    assert terminal.wait_exit() == 0
    after = terminal.lines_after_ui
    assert_no_traceback("\n".join(after))
    assert after[0] == f"iket-tui: the demo program (pid {pid}) ends with the UI: stopped it with SIGTERM"
    assert re.fullmatch(r"iket-tui: recorded \d+ messages to .*/iket-tui-demo-\w+\.msgpack", after[1]), after
    assert _group_ended(pid) == {}  # nothing of it is left behind (nvcc and its children end too)
