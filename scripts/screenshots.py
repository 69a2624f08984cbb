"""Refresh the SVG screenshots in ``screenshots/``: the live tree, a failure, a stuck pass, and the
kernels screen (flame view, grouped by SM) over the recording of a real H200 run.

Each drives the real app with ``run_test`` over a realistic stream (passes as TileLang
lowers them for sm_90a) on a frozen clock, so the pictures are the same on every run.

    python scripts/screenshots.py
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

from textual.pilot import Pilot

from iket_tui.model.synthetic import live_stream
from iket_tui.protocol.messages import Message
from iket_tui.sources.base import SourceBatch, SourceState
from iket_tui.ui.app import IketApp

OUT = Path(__file__).resolve().parent.parent / "screenshots"
SIZE = (160, 48)


class OneBatch:
    """A live source that delivers one batch and then stays connected until closed."""

    description = "pid 4242"

    def __init__(self, messages: list[Message]) -> None:
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
    from iket_tui.demo.sample import sample_recording
    from iket_tui.sources.replay import RecordingSource

    recording = sample_recording()
    if recording is None:
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
    ]
    for shot in shots:
        print(await shot)


if __name__ == "__main__":
    asyncio.run(main())
