"""Refresh the SVG screenshots in ``screenshots/``: the live tree, a failure, a stuck pass, the
kernels screen (flame view, grouped by SM) over the recording of a real H200 run, the kernels
screen while a block of a launch waits, a codegen failure, the IR diff of a pass, the stacks
of a stuck compile, and four ranks under their launcher with one stuck behind the others.

Each drives the real app with ``run_test`` over a realistic stream (passes as TileLang
lowers them for sm_90a) on a frozen clock, so the pictures are the same on every run.

    python scripts/screenshots.py
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

from textual.app import App
from textual.pilot import Pilot

from iket_tui.model.synthetic import live_stream
from iket_tui.protocol.messages import Message
from iket_tui.sources.base import SourceBatch, SourceState
from iket_tui.ui.app import IketApp

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "screenshots"
SIZE = (160, 48)


class OneBatch:
    """A live source that delivers one batch and then stays connected until closed."""

    def __init__(self, messages: list[Message], description: str = "pid 4242") -> None:
        self.description = description
        self._messages = tuple(messages)
        self._closed = threading.Event()

    def batches(self) -> Iterator[SourceBatch]:
        yield SourceBatch(messages=self._messages, state=SourceState.LIVE)
        self._closed.wait()

    def close(self) -> None:
        self._closed.set()


async def shoot(name: str, app: IketApp, then: Callable[[Pilot[int], IketApp], Awaitable[None]] | None = None) -> Path:
    async with app.run_test(size=SIZE) as pilot:
        deadline = time.monotonic() + 60
        while app.batches_received < 1:
            if time.monotonic() > deadline:
                raise SystemExit(f"{name}: the app never received its events")
            await pilot.pause(0.02)
        if then is not None:
            await then(pilot, app)
        await pilot.pause()
        path = Path(app.save_screenshot(filename=f"{name}.svg", path=str(OUT)))
    return path


class QuietClock:
    """A frozen clock that a shot can move on, as if the target went quiet for a while."""

    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now

    async def three_quiet_seconds(self, pilot: Pilot[int], app: IketApp) -> None:
        self.now += 3.0
        app.refresh_views()


async def select_failing_pass(pilot: Pilot[int], app: IketApp) -> None:
    failing = next(comp.failing for comp in app.pass_tree.compiles if comp.failing is not None)
    line = app.rows.index_of(failing)
    assert line is not None
    await pilot.press("home", *["down"] * line)


async def shoot_kernels(name: str, keys: tuple[str, ...]) -> Path:
    """The kernels screen over ``examples/h200-demo.msgpack``, after ``keys``."""
    from iket_tui.sources.replay import RecordingSource

    recording = ROOT / "examples" / "h200-demo.msgpack"
    if not recording.is_file():
        raise SystemExit("examples/h200-demo.msgpack is missing")
    app = IketApp(RecordingSource(recording, speed=0.0))
    async with app.run_test(size=SIZE) as pilot:
        deadline = time.monotonic() + 60
        while app.source_state is not SourceState.ENDED:
            if time.monotonic() > deadline:
                raise SystemExit(f"{name}: the replay never ended")
            await pilot.pause(0.02)
        await pilot.press("K")
        await pilot.pause(0.3)
        await pilot.press(*keys)
        await pilot.pause(0.3)
        path = Path(app.save_screenshot(filename=f"{name}.svg", path=str(OUT)))
    return path


async def shoot_waiting_kernel(name: str) -> Path:
    """The kernels screen 12.4 s after a traced_gemm launch began whose block (3,0) waits (the
    launch of the demo's recording, before its release), on the waiting block."""
    from iket_tui.demo.waiting_launch import waiting_stream
    from iket_tui.ui.kernels_screen import KernelsScreen
    from iket_tui.ui.running_warps import RunningWarps

    agent_t = 5_000_000_000  # after the passes of live_stream()
    stream = waiting_stream(
        agent_t_ns=agent_t, device_t_ns=1_795_976_916_032_000_000, hold_ns=60_000_000_000, ring_id=1
    )
    tracing = {"type": "kernel_tracing", "enabled": True, "device": "NVIDIA H200", "reason": None, "t_ns": agent_t}
    clock = QuietClock(1000.0)
    app = IketApp(OneBatch([*live_stream(), tracing, stream.table, stream.held]), clock=clock.time, tick_s=0.05)

    async def quiet(pilot: Pilot[int], app: IketApp) -> None:
        await pilot.press("K")
        clock.now += 12.35
        deadline = time.monotonic() + 60
        while not (isinstance(app.screen, KernelsScreen) and app.screen.query_one(RunningWarps).summary):
            if time.monotonic() > deadline:
                raise SystemExit(f"{name}: the waiting warps were never listed")
            await pilot.pause(0.02)
        await pilot.press("g", "3", "enter")

    return await shoot(name, app, quiet)


async def shoot_screen(name: str, app: App[None], ready: Callable[[App[None]], bool]) -> Path:
    """An app of the UI snapshot tests (``tests/ui``), once ``ready`` says its screen shows its answer."""
    async with app.run_test(size=SIZE) as pilot:
        deadline = time.monotonic() + 60
        while not ready(app):
            if time.monotonic() > deadline:
                raise SystemExit(f"{name}: the screen never showed its answer")
            await pilot.pause(0.02)
        await pilot.pause()
        return Path(app.save_screenshot(filename=f"{name}.svg", path=str(OUT)))


def snapshot_test_shots() -> list[Awaitable[Path]]:
    """The codegen failure, IR diff and stacks shots, over the inputs of their snapshot tests."""
    sys.path.insert(0, str(ROOT / "tests" / "ui"))
    from test_ui_failure_snapshots import failed_codegen_step, nvcc_rejected_stream, selecting
    from test_ui_ir_snapshots import IRApp, lowered_answer
    from test_ui_processes_snapshots import four_ranks
    from test_ui_stacks_snapshots import STACKS, StacksApp

    from iket_tui.ui.ir_screen import IRScreen
    from iket_tui.ui.stacks_screen import StacksScreen

    async def select_failed_codegen(pilot: Pilot[int], app: IketApp) -> None:
        await selecting(app, failed_codegen_step)(pilot)

    async def collapse_the_finished_ranks(pilot: Pilot[int], app: IketApp) -> None:
        await pilot.press("home", "down", "enter", "down", "enter", "down", "down", "enter")

    return [
        shoot(
            "failure-codegen",
            IketApp(OneBatch(nvcc_rejected_stream()), clock=lambda: 1000.0, follow=False),
            select_failed_codegen,
        ),
        shoot(
            "ranks",
            IketApp(
                OneBatch(four_ranks(), "pid 4000: torchrun --nproc-per-node 4 train.py"),
                clock=lambda: 1000.0,
                stuck_after_s=1.0,
                follow=False,
                by_rank=True,
            ),
            collapse_the_finished_ranks,
        ),
        shoot_screen(
            "ir-diff",
            IRApp(lowered_answer()),
            lambda app: isinstance(app.screen, IRScreen) and app.screen.shown == "diff",
        ),
        shoot_screen(
            "stacks",
            StacksApp(json.loads(STACKS.read_text())),
            lambda app: isinstance(app.screen, StacksScreen) and app.screen.response is not None,
        ),
    ]


async def main() -> None:
    OUT.mkdir(exist_ok=True)
    frozen = 1000.0
    later = QuietClock(frozen)
    shots = [
        shoot("live-tree", IketApp(OneBatch(live_stream()), clock=lambda: frozen)),
        shoot("failure", IketApp(OneBatch(live_stream()), clock=lambda: frozen, follow=False), select_failing_pass),
        shoot(
            "stuck-pass",
            IketApp(OneBatch(live_stream(running_for_ns=42_000_000_000)), clock=later.time, stuck_after_s=30.0),
            later.three_quiet_seconds,
        ),
    ]
    shots += [
        shoot_kernels("flame-view", ("down", "down", "down", "down", *["right"] * 60)),
        shoot_kernels("flame-by-sm", ("m",)),
        shoot_waiting_kernel("kernel-waiting"),
    ]
    shots += snapshot_test_shots()
    for shot in shots:
        print(await shot)


if __name__ == "__main__":
    asyncio.run(main())
