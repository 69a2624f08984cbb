"""SVG snapshots of the app on realistic streams (a frozen clock keeps them exact)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from textual.pilot import Pilot
from ui_driving import wait_for_batches
from ui_fakes import FakeSource, FrozenClock, batch

from iket_tui.model.synthetic import NVCC_REJECTED, Lowering, agent_hello, live_stream, lowerings
from iket_tui.sources.base import SourceState
from iket_tui.ui.app import IketApp

Compare = Callable[..., bool]


def app_over(messages: list[Any], **kwargs: Any) -> IketApp:
    source = FakeSource([batch(messages, state=SourceState.LIVE)], stay_open=True)
    return IketApp(source, clock=FrozenClock(), **kwargs)


def settled(app: IketApp, then: Callable[[Pilot[int]], Awaitable[None]] | None = None) -> Any:
    async def run_before(pilot: Pilot[int]) -> None:
        await wait_for_batches(pilot, app, 1)
        if then is not None:
            await then(pilot)
        await pilot.pause()

    return run_before


def test_live_tree(snap_compare: Compare) -> None:
    app = app_over(live_stream())
    assert snap_compare(app, terminal_size=(160, 48), run_before=settled(app))


def test_failure_with_its_detail_pane(snap_compare: Compare) -> None:
    app = app_over(live_stream(), follow=False)

    async def select_failing_pass(pilot: Pilot[int]) -> None:
        failing = next(comp.failing for comp in app.pass_tree.compiles if comp.failing is not None)
        line = app.rows.index_of(failing)
        assert line is not None
        await pilot.press("home", *["down"] * line)

    assert snap_compare(app, terminal_size=(160, 48), run_before=settled(app, select_failing_pass))


def test_stuck_pass(snap_compare: Compare) -> None:
    clock = FrozenClock()
    source = FakeSource([batch(live_stream(running_for_ns=42_000_000_000), state=SourceState.LIVE)], stay_open=True)
    app = IketApp(source, clock=clock, stuck_after_s=30.0)

    async def three_quiet_seconds(pilot: Pilot[int]) -> None:
        clock.advance(3.0)
        app.refresh_views()

    assert snap_compare(app, terminal_size=(160, 48), run_before=settled(app, three_quiet_seconds))


def test_codegen_failure_with_its_detail_pane(snap_compare: Compare) -> None:
    good = lowerings(2, fail=())
    start = good[-1].end_ns() + 30_000_000
    rejected = Lowering(
        compile=3, kernel="nvcc_error", start_ns=start, codegen_ns=2_800_000_000, codegen_error=NVCC_REJECTED
    )
    stream = [agent_hello(), *(msg for spec in good for msg in spec.messages()), *rejected.messages()]
    app = app_over(stream, follow=False)

    async def select_failed_codegen(pilot: Pilot[int]) -> None:
        step = app.pass_tree.compiles[-1].failed_codegen
        assert step is not None
        line = app.rows.index_of(step)
        assert line is not None
        await pilot.press("home", *["down"] * line)

    assert snap_compare(app, terminal_size=(160, 48), run_before=settled(app, select_failed_codegen))


def test_small_terminal(snap_compare: Compare) -> None:
    app = app_over(live_stream(dropped=12))
    assert snap_compare(app, terminal_size=(80, 24), run_before=settled(app))


def _kernels_of_the_h200_run(*keys: str) -> tuple[IketApp, Any]:
    """The kernels screen over the kernel messages of the real H200 recording, after ``keys``."""
    from pathlib import Path

    from iket_tui.sources.reading import read_recording

    recording = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"
    messages, _ = read_recording(recording)
    kernel_messages = [msg for msg in messages if msg["type"].startswith("kernel_")]
    app = app_over([*live_stream(), *kernel_messages])

    async def open_kernels(pilot: Pilot[int]) -> None:
        await pilot.press("K")
        await pilot.pause(0.3)
        await pilot.press(*keys)
        await pilot.pause(0.3)

    return app, settled(app, open_kernels)


def test_flame_view(snap_compare: Compare) -> None:
    app, run_before = _kernels_of_the_h200_run("down", "down", "down", "down", *["right"] * 60)
    assert snap_compare(app, terminal_size=(160, 48), run_before=run_before)


def test_flame_view_by_sm_at_80x24(snap_compare: Compare) -> None:
    app, run_before = _kernels_of_the_h200_run("m")
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
