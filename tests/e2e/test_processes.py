"""A real program compiling TileLang kernels in four worker processes, watched the way
``iket-tui run`` watches it (its agent, then every agent below it, merged into one stream) and
recorded: the tree shows the four workers under the parent, the slowed worker's pass marked
stuck while it runs, the failing worker failed, the others done; the recording replays the
same; and ``run --no-ui --record`` records the workers of a fork server headless."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot

from iket_tui.model.nodes import DONE, FAILED, PassNode, ProcessNode
from iket_tui.model.session import Session
from iket_tui.sources.descendants import agents_below
from iket_tui.sources.launch import LaunchedProgram
from iket_tui.sources.merged import ProcessStreams
from iket_tui.sources.reading import read_recording
from iket_tui.ui.app import IketApp
from iket_tui.ui.details import describe

pytestmark = pytest.mark.tilelang

WORKERS = Path(__file__).parent / "targets" / "workers.py"
KERNELS = {"vector_add", "softmax", "slow_gemm", "layout_conflict"}


async def wait_until(pilot: Pilot[int], condition: Callable[[], bool], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await pilot.pause(0.05)
    await pilot.pause()


def screen_lines(app: IketApp) -> list[str]:
    """The tree's rows as the user sees them."""
    return [app.view.render_line(y).text.rstrip() for y in range(app.view.size.height)]


def cursor_row(app: IketApp) -> str:
    view = app.view
    return view.render_line(view.cursor_line - view.scroll_offset.y).text.strip()


def workers_of(session: Session) -> dict[str, ProcessNode]:
    """The worker processes by the kernel each compiled."""
    return {process.compiles[0].kernel or "": process for process in session.tree.processes if process.compiles}


def watched(program: LaunchedProgram, record_to: Path) -> ProcessStreams:
    """What ``iket-tui run`` watches: the program's agent, and every agent below it while it runs."""
    path = program.find_agent(threading.Event())
    assert path is not None, "the program exited before its agent started"
    return ProcessStreams(
        [path],
        record_to=record_to,
        find=lambda: [found.path for found in agents_below(program.pid)],
        following=lambda: program.returncode is None,
        description=f"pid {program.pid}: workers.py",
    )


def test_four_workers_appear_under_their_parent_with_a_stuck_and_a_failed_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IKET_TEST_SLOW", "8")
    out = tmp_path / "workers.msgpack"
    program = LaunchedProgram(
        [sys.executable, str(WORKERS), "fork"], log_output=True, agent_env={"IKET_TUI_CHILD_WAIT": "60"}
    )
    try:
        asyncio.run(_watch_live(watched(program, out)))
        assert program.wait(60) == 0
    finally:
        program.stop(grace_s=1.0)

    msgs, info = read_recording(out)
    assert info.ended
    replayed = Session()
    replayed.apply(msgs)
    replayed.end_stream("the recording ended")
    _check_finished(replayed, program.pid)


async def _watch_live(source: ProcessStreams) -> None:
    app = IketApp(source, stuck_after_s=3.0)  # a loaded machine may take a second in any pass
    async with app.run_test(size=(150, 50)) as pilot:
        tree = app.pass_tree

        def slowed_pass() -> PassNode | None:
            return next(
                (
                    node
                    for node in tree.stuck_passes(app.now_ns())
                    if node.name == "tl.InjectSoftwarePipeline" and node.compile.kernel == "slow_gemm"
                ),
                None,
            )

        def slow_pass_stuck() -> bool:
            return len(tree.processes) == 5 and slowed_pass() is not None

        await wait_until(pilot, slow_pass_stuck, "the slowed worker's pass marked stuck", timeout=120)
        stuck = slowed_pass()
        assert stuck is not None
        header = app.header.text()
        assert "5 processes:" in header and "live" in header, header
        slowed = tree.process_of(stuck.compile)
        said = f"pid {slowed.pid} has been in `tl.InjectSoftwarePipeline`"
        await wait_until(pilot, lambda: said in app.header.text(), "the pass compared in the header", timeout=60)
        compared = app.header.text()
        assert re.search(r"; (the other processes|\d of the other 3 processes) finished it in \d", compared), compared
        app.following = False
        app.rows.reveal(stuck)
        app.view.sync()
        app.view.select(stuck)
        app.refresh_views()
        await pilot.pause()
        row = cursor_row(app)
        assert "tl.InjectSoftwarePipeline" in row and "stuck" in row, row
        behind = dict(describe(app.session, stuck, app.view.now_ns).fields).get("behind", "")
        assert behind.startswith(f"pid {slowed.pid} has been in `tl.InjectSoftwarePipeline`"), behind

        await wait_until(pilot, lambda: app.session.ended is not None, "every process's stream ended", timeout=120)
        await pilot.pause(0.2)
        _check_finished(app.session, None)
        header = app.header.text()
        assert "5 processes: 4 ended, 1 failed" in header, header
        parent = next(process for process in tree.processes if process.parent is None)
        app.rows.collapse_all()
        app.view.select(parent)
        app.refresh_views()
        app.view.scroll_to(y=0, animate=False, immediate=True)
        await pilot.pause()
        worker_rows = [line.strip() for line in screen_lines(app) if line.startswith("  ▼ ") or line.startswith("  ▶ ")]
        assert len(worker_rows) == 4 and sum("✗" in row for row in worker_rows) == 1, worker_rows
        assert screen_lines(app)[0].lstrip("▼ ").startswith(f"✓ pid {parent.pid}")


def _check_finished(session: Session, parent_pid: int | None) -> None:
    tree = session.tree
    (parent,) = [process for process in tree.processes if process.parent is None]
    if parent_pid is not None:
        assert parent.pid == parent_pid
    assert not parent.compiles and len(parent.children) == 4
    workers = workers_of(session)
    assert set(workers) == KERNELS
    assert all(worker.parent is parent for worker in workers.values())
    for kernel, worker in workers.items():
        expected = FAILED if kernel == "layout_conflict" else DONE
        assert tree.process_status(worker) is expected, kernel
    failed = workers["layout_conflict"].compiles[0]
    assert failed.failing is not None and failed.failing.name == "tl.LayoutInference"
    slowed = workers["slow_gemm"].compiles[0]
    assert slowed.duration_ns is not None and slowed.duration_ns > 4e9


def test_run_headless_records_workers_of_the_fork_server_told_apart(tmp_path: Path) -> None:
    out = tmp_path / "forkserver.msgpack"
    command = [sys.executable, str(WORKERS), "forkserver"]
    result = subprocess.run(
        [sys.executable, "-m", "iket_tui", "run", "--no-ui", "--record", str(out), "--", *command],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "IKET_TEST_SLOW": "0"},
    )
    assert result.returncode == 0, result.stderr
    msgs, info = read_recording(out)
    assert info.ended
    session = Session()
    session.apply(msgs)
    tree = session.tree
    (parent,) = [process for process in tree.processes if process.parent is None]
    workers = workers_of(session)
    assert set(workers) == KERNELS
    servers = {worker.parent for worker in workers.values()}
    assert len(servers) == 1, "every worker sits under the fork server"
    (server,) = servers
    assert server is not None and server.parent is parent and not server.compiles
    helpers = [process for process in parent.children if process is not server]
    assert all("resource_tracker" in process.command for process in helpers), [p.command for p in helpers]
    dump = subprocess.run(
        [sys.executable, "-m", "iket_tui", "dump", str(out)], capture_output=True, text=True, timeout=60
    )
    assert dump.returncode == 0
    for worker in workers.values():
        assert f"process             pid={worker.pid} " in dump.stdout
