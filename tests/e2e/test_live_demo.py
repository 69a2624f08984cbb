"""The whole path, live: the bundled TileLang program under the real agent, the app attached
over the real socket, and the recording it leaves on disk.

The program lowers real kernels for ``sm_90a``: a good one, one with a pass slowed to
seconds, one failing in ``tl.LayoutInference``, and one that nvcc rejects. The test looks at
what a user looks at: the rows of the tree, the header, the detail pane, and the file.

The tour (what ``iket-tui demo`` asks the program for) is tried key by key on the live program:
its stuck compile is marked stuck after the demo's threshold, the IR, stacks, reproducer,
timing, kernels and abort keys answer, and the program lives on after the abort.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("tilelang")

from textual.pilot import Pilot
from textual.widgets import DataTable

from iket_tui import endpoints
from iket_tui.cli.live import DEMO_HINT, DEMO_STUCK_AFTER_S, DEMO_TOUR
from iket_tui.demo.sample import sample_recording
from iket_tui.model.nodes import FAILED, INCOMPLETE, RUNNING, CompileNode, PassNode
from iket_tui.protocol import messages as m
from iket_tui.sources.base import SourceState
from iket_tui.sources.reading import read_recording
from iket_tui.sources.socket import SocketSource
from iket_tui.ui.app import IketApp
from iket_tui.ui.detail_pane import DetailPane
from iket_tui.ui.hang_screens import AbortPane, ReproPane
from iket_tui.ui.header_bar import HeaderBar
from iket_tui.ui.ir_screen import IRScreen
from iket_tui.ui.kernels_screen import KernelsScreen
from iket_tui.ui.stacks_screen import StacksScreen
from iket_tui.ui.timing_screen import TimingScreen

WAIT_S = 120.0
SLOW_S = 3.0
KERNELS = "vector_add,slow_gemm,layout_conflict,nvcc_error"


@pytest.fixture
def runtime_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ik"))  # short: socket paths are limited to 107 bytes
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(path))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def demo(runtime_dir: Path, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    env = {**os.environ, "IKET_TUI": "1", "IKET_TUI_WAIT_CLIENT": str(WAIT_S), "XDG_RUNTIME_DIR": str(runtime_dir)}
    args = ["--kernels", KERNELS, "--slow-seconds", str(SLOW_S), "--pause", "0.1"]
    with open(tmp_path / "demo.log", "wb") as log:
        program = subprocess.Popen(
            [sys.executable, "-m", "iket_tui.demo.program", *args], env=env, stdout=log, stderr=subprocess.STDOUT
        )
    yield program
    if program.poll() is None:
        program.kill()
    program.wait()


def _socket_of(program: subprocess.Popen[bytes]) -> Path:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        for endpoint in endpoints.list_endpoints():
            if endpoint.pid == program.pid:
                return endpoint.path
        assert program.poll() is None, "the demo program exited before its agent listened"
        time.sleep(0.05)
    raise AssertionError("the demo program's agent never listened")


async def _wait(pilot: Pilot[int], condition: object, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await pilot.pause(0.05)
    await pilot.pause()


def _compile(app: IketApp, kernel: str) -> CompileNode:
    return next(comp for comp in app.pass_tree.compiles if comp.kernel == kernel)


def _passes(app: IketApp, comp: CompileNode) -> list[PassNode]:
    return [node for node in app.pass_tree.passes if node.compile is comp]


def _screen(app: IketApp) -> str:
    view = app.view
    return "\n".join(view.render_line(y).text.rstrip() for y in range(view.size.height))


def _details(app: IketApp) -> str:
    shown = app.query_one(DetailPane).details
    return "" if shown is None else shown.text()


async def _watch(app: IketApp, pilot: Pilot[int]) -> dict[str, str]:
    seen: dict[str, str] = {}

    def slow_pass_running() -> bool:
        return any(
            node.name == "tl.InjectSoftwarePipeline" and node.status is RUNNING and node.compile.kernel == "slow_gemm"
            for node in app.pass_tree.running_passes()
        )

    await _wait(pilot, slow_pass_running, "the slowed pass to be seen running")
    await pilot.pause(0.3)
    seen["while slow"] = _screen(app)
    seen["header while slow"] = app.query_one(HeaderBar).text()
    await _wait(pilot, lambda: app.source_state is SourceState.ENDED, "the program to exit")
    failed = _compile(app, "layout_conflict")
    app.view.select(failed.failing or failed, by_user=True, center=True)
    await _wait(pilot, lambda: "Layout infer conflict" in _details(app), "the detail pane to show the failure")
    seen["failure screen"] = _screen(app)
    seen["failure details"] = _details(app)
    codegen = _compile(app, "nvcc_error")
    app.view.select(codegen, by_user=True, center=True)
    await pilot.pause()
    seen["codegen details"] = _details(app)
    seen["header at exit"] = app.query_one(HeaderBar).text()
    return seen


def test_a_live_demo_seen_through_the_app_and_its_recording(demo: subprocess.Popen[bytes], tmp_path: Path) -> None:
    recording = tmp_path / "live.msgpack"
    app = IketApp(SocketSource(_socket_of(demo), record_to=recording), stuck_after_s=1.0)

    async def drive() -> dict[str, str]:
        async with app.run_test(size=(160, 48)) as pilot:
            return await _watch(app, pilot)

    seen = asyncio.run(drive())
    assert demo.wait(timeout=WAIT_S) == 0

    # The slowed pass was on screen as running, then stuck, before it finished.
    assert "tl.InjectSoftwarePipeline" in seen["while slow"]
    slow_row = next(line for line in seen["while slow"].splitlines() if "tl.InjectSoftwarePipeline" in line)
    assert "running" in slow_row or "stuck" in slow_row
    assert f"pid {demo.pid}" in seen["header while slow"] and "live" in seen["header while slow"]

    # Every compile is there, in order, with the right outcome; data stays after exit.
    tree = app.pass_tree
    assert [comp.kernel for comp in tree.compiles] == KERNELS.split(",")
    good = _compile(app, "vector_add")
    passes = _passes(app, good)
    assert 60 <= len(passes) <= 130
    assert all(node.status is not RUNNING and node.duration_ns is not None for node in passes)
    starts = [node.start_ns for node in passes]
    assert starts == sorted(starts)
    for node in passes:
        if node.parent is not None:
            assert node.depth == node.parent.depth + 1
            assert node.parent.start_ns <= node.start_ns <= node.end_ns <= node.parent.end_ns  # type: ignore[operator]
    slow = next(node for node in _passes(app, _compile(app, "slow_gemm")) if node.name == "tl.InjectSoftwarePipeline")
    assert slow.duration_ns is not None and slow.duration_ns >= SLOW_S * 1e9

    failed = _compile(app, "layout_conflict")
    assert failed.status is FAILED and failed.stage == "pass"
    assert failed.failing is not None and failed.failing.name == "tl.LayoutInference"
    assert failed.failing.status in (FAILED, INCOMPLETE)
    assert "tl.LayoutInference" in seen["failure screen"]
    assert "Layout infer conflict" in seen["failure details"]
    assert "Traceback" in seen["failure details"]

    codegen = _compile(app, "nvcc_error")
    assert codegen.status is FAILED and codegen.stage == "codegen"
    assert "iket_demo_missing_device_function" in seen["codegen details"]
    assert "disconnected" in seen["header at exit"] and "0 dropped" in seen["header at exit"]

    # The recording holds the same stream: every pass the app saw, and the program's exit.
    messages, info = read_recording(recording)
    assert info.cut_at is None and info.ended
    starts_recorded = [msg for msg in messages if msg["type"] == m.PASS_START]
    assert len(starts_recorded) == len(tree.passes)
    assert [msg["kernel"] for msg in messages if msg["type"] == m.COMPILE_BEGIN] == KERNELS.split(",")
    assert any(msg["type"] == m.BYE for msg in messages)


@pytest.fixture
def tour(runtime_dir: Path, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The demo program as ``iket-tui demo`` starts it (kernels traced), with a short list lowered only."""
    env = {
        **os.environ,
        "IKET_TUI": "1",
        "IKET_TUI_KERNELS": "1",
        "IKET_TUI_WAIT_CLIENT": str(WAIT_S),
        "XDG_RUNTIME_DIR": str(runtime_dir),
    }
    args = [*DEMO_TOUR, "--kernels", "vector_add", "--lower-only", "--pause", "0"]
    with open(tmp_path / "demo.log", "wb") as log:
        program = subprocess.Popen(
            [sys.executable, "-m", "iket_tui.demo.program", *args], env=env, stdout=log, stderr=subprocess.STDOUT
        )
    yield program
    if program.poll() is None:
        program.kill()
    program.wait()


async def _tour(app: IketApp, pilot: Pilot[int], program: subprocess.Popen[bytes], log: Path) -> dict[str, str]:
    seen: dict[str, str] = {}
    await pilot.pause(0.5)
    seen["hint"] = "\n".join(f"{note.title}: {note.message}" for note in app._notifications)

    def waiting() -> PassNode | None:
        return next((node for node in app.pass_tree.running_passes() if node.name == "demo.WaitForAbort"), None)

    await _wait(pilot, lambda: waiting() is not None, "the stuck compile's pass to run")
    node = waiting()
    assert node is not None
    header = app.query_one(HeaderBar)
    await _wait(pilot, lambda: "stuck: demo.WaitForAbort" in header.text(), "the header to say it is stuck")
    seen["stuck after"] = f"{(app.now_ns() - node.start_ns) / 1e9:.1f}"  # how long it had run, by the agent's clock
    app.following = False
    app.rows.reveal(node)
    app.view.sync()
    app.view.select(node)
    await pilot.pause()
    seen["row"] = next(line for line in _screen(app).splitlines() if "demo.WaitForAbort" in line)

    await pilot.press("i")
    await _wait(pilot, lambda: isinstance(app.screen, IRScreen) and app.screen.answer is not None, "the IR")
    assert isinstance(app.screen, IRScreen)
    seen["ir title"], seen["ir"] = app.screen.title_text(), app.screen.text
    await pilot.press("escape")

    await pilot.press("S")
    await _wait(pilot, lambda: isinstance(app.screen, StacksScreen) and app.screen.response is not None, "stacks")
    assert isinstance(app.screen, StacksScreen)
    seen["stacks"] = app.screen.body_text()
    await pilot.press("escape")

    await pilot.press("R")
    await _wait(pilot, lambda: isinstance(app.screen, ReproPane) and app.screen.written is not None, "a reproducer")
    assert isinstance(app.screen, ReproPane)
    seen["repro"] = app.screen.text()
    await pilot.press("escape")

    await pilot.press("T")
    await _wait(pilot, lambda: isinstance(app.screen, TimingScreen), "the timing screen")
    timing = app.screen.query_one("#pass-names", DataTable)
    await _wait(pilot, lambda: timing.row_count > 0, "the passes' timings")
    seen["slowest pass"] = str(timing.get_row_at(0)[0])
    await pilot.press("escape")

    await pilot.press("K")
    await _wait(pilot, lambda: isinstance(app.screen, KernelsScreen), "the kernels screen")
    launches = app.screen.query_one("#launches", DataTable)
    await _wait(pilot, lambda: launches.row_count == 4, "the recorded launches, read off the app's thread")
    seen["kernels"] = str(app.screen.query_one("#kernels-title").render())
    await pilot.press("escape")

    await pilot.press("A")
    await _wait(pilot, lambda: isinstance(app.screen, AbortPane), "the abort's confirmation")
    confirm = app.screen
    assert isinstance(confirm, AbortPane)
    await pilot.press("y")
    await _wait(pilot, lambda: confirm.answer is not None, "the abort's answer")
    seen["abort"] = confirm.text()
    await pilot.press("escape")
    await _wait(pilot, lambda: node.compile.status is FAILED, "the aborted compile to fail")
    staying = "demo: every kernel compiled; staying alive"
    await _wait(pilot, lambda: staying in log.read_text(), "the program to compile its list after the abort")
    await pilot.pause(1.0)
    seen["header after abort"] = header.text()
    return seen


def test_the_demo_tour_works_key_by_key_on_the_live_program(
    tour: subprocess.Popen[bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # where R writes the reproducer
    app = IketApp(
        SocketSource(_socket_of(tour)),
        stuck_after_s=DEMO_STUCK_AFTER_S,
        hint=DEMO_HINT,
        sample_kernels=sample_recording(),
    )

    async def drive() -> dict[str, str]:
        async with app.run_test(size=(160, 48)) as pilot:
            return await _tour(app, pilot, tour, tmp_path / "demo.log")

    seen = asyncio.run(drive())

    assert seen["hint"].startswith("Try this: stuck_gemm is stuck in demo.WaitForAbort: on its row, i shows the IR")
    # Marked stuck once the demo's threshold passed, not before (the header refreshes once a second;
    # a loaded machine may show it a little later).
    assert DEMO_STUCK_AFTER_S <= float(seen["stuck after"]) <= DEMO_STUCK_AFTER_S + 5.0, seen["stuck after"]
    assert "stuck" in seen["row"]
    assert seen["ir title"].startswith("IR before demo.WaitForAbort (pass "), seen["ir title"]
    assert "def stuck_gemm(" in seen["ir"]
    assert "Thread stuck compile" in seen["stacks"] and "in wait_until_aborted" in seen["stacks"]
    assert "by wait_for_abort(poll_s=0.2)" in seen["repro"].replace("\n", " ")
    assert seen["slowest pass"].endswith("demo.WaitForAbort")
    assert seen["kernels"] == "kernels: no GPU here; showing a recorded run on NVIDIA H200 (h200-demo-waiting.msgpack)"
    assert seen["abort"].startswith(
        "compile 1 aborted\ncompile 1 failed: CompileAborted: aborted by iket-tui after "
    ), seen["abort"]

    # The program lives on after the abort, its list done, still connected.
    assert tour.poll() is None
    assert "live" in seen["header after abort"] and "disconnected" not in seen["header after abort"]
    said = (tmp_path / "demo.log").read_text()
    assert "failed stuck_gemm after " in said and "CompileAborted: aborted by iket-tui after " in said

    # The reproducer R wrote hangs the same way, in a fresh process without the program.
    (directory,) = tmp_path.glob("iket-repro-c1-p*")
    env = {key: value for key, value in os.environ.items() if not key.startswith("IKET_TUI")}
    ran = subprocess.run(
        [sys.executable, str(directory / "repro.py"), "--timeout", "2"],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        cwd=tmp_path,
        env=env,
    )
    assert ran.returncode == 3, ran.stderr[-3000:]
    assert ran.stdout.splitlines()[0] == "still running after 2 s: reproduced"
    assert "in wait_until_aborted" in ran.stdout
