"""Stacks of a stuck compile: the bundled program held inside a pass slowed to minutes, asked
for its stacks over the wire, from the command line (with py-spy's native frames where it may
trace the program), and from the app's stacks pane."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("tilelang")

from live_target import SLEEPING, WAIT_S, Stuck

from iket_tui.protocol import messages as m
from iket_tui.sources.socket import SocketSource
from iket_tui.sources.stacks import native_stacks, py_spy_path, stack_lines
from iket_tui.ui.app import IketApp
from iket_tui.ui.stacks_screen import StacksScreen


def test_the_agent_answers_with_the_frame_of_the_stuck_pass(stuck: Stuck) -> None:
    response = stuck.first
    assert response["type"] == m.RESPONSE and response["ok"] and response["what"] == m.WHAT_STACKS
    main = next(thread for thread in response["threads"] if thread["main"])
    innermost = main["frames"][-1]
    assert (innermost["function"], innermost["code"]) == ("run", SLEEPING)
    functions = [frame["function"] for frame in main["frames"]]
    assert "run" in functions and "lower" in functions  # the slowed pass, inside the demo's lower()
    assert any(thread["agent"] for thread in response["threads"])  # the agent's own threads, marked
    assert Path(f"/proc/{stuck.program.pid}/cwd").resolve() == Path(response["cwd"])  # where its own files are
    text = "\n".join(stack_lines(response))
    assert f"    {SLEEPING}" in text and "threads of the iket-tui agent not shown" in text


def test_stacks_from_the_command_line(stuck: Stuck) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "iket_tui", "stacks", str(stuck.program.pid)],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        env=stuck.env,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert f"pid {stuck.program.pid}: " in lines[0] and lines[0].endswith("Python stacks, innermost frame first")
    assert SLEEPING in done.stdout and "Traceback" not in done.stderr
    main = lines.index(next(line for line in lines if line.startswith("Thread MainThread")))
    # where it is now first, its file from its package, with the line number in view
    assert lines[main + 1 : main + 3] == [lines[main + 1], f"    {SLEEPING}"]
    assert 'iket_tui/demo/kernels.py", line ' in lines[main + 1] and lines[main + 1].endswith(", in run")
    assert not any("site-packages" in line for line in lines)


def test_native_stacks_throughpy_spy_path(stuck: Stuck) -> None:
    if py_spy_path() is None:
        pytest.skip("py-spy is not installed")
    native = native_stacks(stuck.program.pid)
    if native.text is None:
        assert native.why is not None and "py-spy" in native.why
        pytest.skip(f"py-spy may not trace here: {native.why}")
    assert "run (iket_tui/demo/kernels.py" in native.text or "run (kernels.py" in native.text
    done = subprocess.run(
        [sys.executable, "-m", "iket_tui", "stacks", str(stuck.program.pid), "--native"],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        env=stuck.env,
    )
    assert done.returncode == 0, done.stderr
    assert "native stacks (py-spy)" in done.stdout


def test_the_stacks_pane_of_the_app(stuck: Stuck) -> None:
    async def scenario() -> None:
        source = SocketSource(stuck.path)
        app = IketApp(source)
        async with app.run_test(size=(160, 48)) as pilot:
            await _until(pilot, lambda: app.pass_tree.process.pid == stuck.program.pid)
            await pilot.press("S")
            await _until(pilot, lambda: isinstance(app.screen, StacksScreen))
            screen = app.screen
            assert isinstance(screen, StacksScreen)
            await _until(pilot, lambda: SLEEPING in screen.body_text())
            assert screen.title_text().startswith("stacks of ")
            assert "Thread MainThread" in screen.body_text()
            assert "iket-tui" not in screen.body_text().split("threads of the iket-tui agent")[0]
            await pilot.press("a")
            assert "Thread iket-tui" in screen.body_text()
            await pilot.press("escape")
            assert not isinstance(app.screen, StacksScreen)

    asyncio.run(scenario())


async def _until(pilot: Any, condition: Any) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await pilot.pause(0.05)
