"""A launch whose block waits, on the kernels screen: marked running, then quiet past the
threshold with its unfinished warps listed above the flame view, the times moving with the
clock alone, and the mark gone once the launch completes (or frozen where the stream ended)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from textual.widgets import DataTable
from ui_driving import app_test, wait_for_batches, wait_until
from ui_fakes import FakeSource, FrozenClock, batch

from iket_tui.demo.waiting_launch import WaitingStream, waiting_stream
from iket_tui.model.synthetic import live_stream
from iket_tui.sources.base import SourceState
from iket_tui.ui.app import IketApp
from iket_tui.ui.flame_view import FlameView
from iket_tui.ui.kernels_screen import KernelsScreen
from iket_tui.ui.running_warps import RunningWarps

WIDE = (160, 48)
S = 1_000_000_000
AGENT_T = 5 * S  # after the passes of live_stream()
DEVICE_T = 1_795_976_916_032_000_000
RING = 6_474_760_117_038_232_533
TRACING = {"type": "kernel_tracing", "enabled": True, "device": "NVIDIA H200", "reason": None, "drain_hz": 20.0}


def waiting(hold_s: float = 4.0) -> WaitingStream:
    return waiting_stream(agent_t_ns=AGENT_T, device_t_ns=DEVICE_T, hold_ns=int(hold_s * S), ring_id=RING)


def app_with_a_waiting_block(stream: WaitingStream, clock: FrozenClock, **kwargs: Any) -> tuple[IketApp, FakeSource]:
    opening = [*live_stream(), {**TRACING, "t_ns": AGENT_T}, stream.table, stream.held]
    source = FakeSource([batch(opening, state=SourceState.LIVE)], stay_open=True)
    return IketApp(source, clock=clock, tick_s=0.05, **kwargs), source


async def open_kernels(pilot: Pilot[int], app: IketApp) -> KernelsScreen:
    await wait_for_batches(pilot, app, 1)
    await pilot.press("K")
    await wait_until(pilot, lambda: isinstance(app.screen, KernelsScreen), "the kernels screen")
    screen = app.screen
    assert isinstance(screen, KernelsScreen)
    return screen


def duration_cell(screen: KernelsScreen) -> str:
    return str(screen.query_one("#launches", DataTable).get_row_at(0)[3])


def title(screen: KernelsScreen) -> str:
    return str(screen.query_one("#kernels-title").render())


async def settle(pilot: Pilot[int], condition: Callable[[], bool], what: str) -> None:
    await wait_until(pilot, condition, what)


@app_test
async def test_a_waiting_block_is_marked_then_listed_with_its_warps_last_events_and_released() -> None:
    stream = waiting()
    clock = FrozenClock()
    app, source = app_with_a_waiting_block(stream, clock)
    async with app.run_test(size=WIDE) as pilot:
        screen = await open_kernels(pilot, app)
        running = screen.query_one(RunningWarps)
        # 50 ms after the launch began (its events span 20.8 µs): running, not yet past the 2 s threshold.
        assert duration_cell(screen) == "running 50.0 ms" and not running.display
        assert "quiet" not in title(screen)

        versions = app.session.kernels.version
        clock.advance(3.0)  # nothing arrives: only the clock moves
        await settle(pilot, lambda: bool(running.summary), "the unfinished warps")
        assert app.session.kernels.version == versions
        quiet = (AGENT_T + 50_000_000 + 3 * S) - (stream.held_since_ns - DEVICE_T + AGENT_T)
        assert quiet == 3_049_988_512
        assert running.summary == (
            "1 of 64 blocks not finished: block (3,0), warps 4-7 last at `mma` (k_step 17), 3.05 s ago"
        )
        assert running.rows == ["block (3,0)  warps 4-7  `mma` (k_step 17)  3.05 s ago"]
        assert duration_cell(screen) == "running 3.05 s, warp quiet 3.05 s"
        assert " · 1 running with a warp quiet for over 2.00 s" in title(screen)
        assert "kernels: 41,952 ev, 1 launch with a warp quiet 3.05 s" in app.header.text()
        flame = screen.query_one(FlameView)
        assert flame.running == {(3, 4), (3, 5), (3, 6), (3, 7)}  # block (3,0) is the 4th block
        assert flame.jump_to_block(3)
        await pilot.pause()
        labels = [label for y in range(13) if (label := flame.render_line(y).text[:6].strip())]
        assert labels == ["block", "w0", "w1", "w2", "w3", "▸w4", "▸w5", "▸w6", "▸w7"]

        clock.advance(1.0)  # a tick repaints the times
        await settle(pilot, lambda: running.rows[0].endswith("4.05 s ago"), "the time to move on")
        assert duration_cell(screen) == "running 4.05 s, warp quiet 4.05 s"

        source.feed(batch([stream.released], state=SourceState.LIVE))
        await wait_for_batches(pilot, app, 2)
        await settle(pilot, lambda: not running.display, "the mark to go")
        (launch,) = app.session.kernels.launches.values()
        assert not launch.running and launch.records == 42_240
        assert running.summary == "" and "quiet" not in title(screen)
        assert flame.running == frozenset()
        await settle(pilot, lambda: "kernels: 42,240 ev" in app.header.text(), "the header to catch up")
        assert "launch quiet" not in app.header.text()
        assert duration_cell(screen) == "4.00 s"  # from its first event to its last


@app_test
async def test_where_the_stream_ends_while_the_block_waits_its_state_stays_as_last_known() -> None:
    stream = waiting()
    clock = FrozenClock()
    app, source = app_with_a_waiting_block(stream, clock)
    async with app.run_test(size=WIDE) as pilot:
        screen = await open_kernels(pilot, app)
        running = screen.query_one(RunningWarps)
        clock.advance(2.5)
        await settle(pilot, lambda: bool(running.summary), "the unfinished warps")
        source.feed(batch([], state=SourceState.ENDED))  # the target was killed
        source.finish()
        await wait_until(pilot, lambda: app.session.ended is not None, "the stream to end")
        shown = running.summary
        clock.advance(60.0)
        await pilot.pause(0.2)
        assert running.summary == shown and shown.endswith("warps 4-7 last at `mma` (k_step 17), 2.55 s ago")


@app_test
async def test_the_threshold_is_the_apps() -> None:
    stream = waiting()
    clock = FrozenClock()
    app, _ = app_with_a_waiting_block(stream, clock, kernel_stuck_after_s=10.0)
    async with app.run_test(size=WIDE) as pilot:
        screen = await open_kernels(pilot, app)
        running = screen.query_one(RunningWarps)
        clock.advance(9.9)
        await pilot.pause(0.2)
        assert not running.display and duration_cell(screen).startswith("running ")
        clock.advance(0.2)
        await settle(pilot, lambda: bool(running.summary), "the unfinished warps after 10 s")
        assert " · 1 running with a warp quiet for over 10.0 s" in title(screen)


def test_kernels_screen_with_a_quiet_launch(snap_compare: Callable[..., bool]) -> None:
    stream = waiting()
    clock = FrozenClock()
    app, _ = app_with_a_waiting_block(stream, clock)

    async def quiet_for_a_while(pilot: Pilot[int]) -> None:
        screen = await open_kernels(pilot, app)
        clock.advance(12.35)
        running = screen.query_one(RunningWarps)
        await settle(pilot, lambda: bool(running.summary), "the unfinished warps")
        await pilot.press("g", "3", "enter")  # the waiting block
        await pilot.pause()

    assert snap_compare(app, terminal_size=WIDE, run_before=quiet_for_a_while)


@app_test
async def test_a_replayed_h200_run_killed_while_a_block_waits_shows_the_block_as_last_known() -> None:
    from iket_tui.sources.replay import RecordingSource

    killed = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "h200-stuck-killed.msgpack"
    app = IketApp(RecordingSource(killed, speed=0.0))
    async with app.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: app.session.ended is not None, "the replay to end")
        assert "1 launch with a warp quiet 3.04 s" in app.header.text()
        await pilot.press("K")
        await wait_until(pilot, lambda: isinstance(app.screen, KernelsScreen), "the kernels screen")
        screen = app.screen
        assert isinstance(screen, KernelsScreen)
        running = screen.query_one(RunningWarps)
        await settle(pilot, lambda: bool(running.summary), "the unfinished warps")
        assert running.summary == (
            "1 of 64 blocks not finished: block (3,0), warps 0-3 last at `wait` (k_step 17), 3.04 s ago"
        )
        assert duration_cell(screen) == "running 3.04 s, warp quiet 3.04 s"
