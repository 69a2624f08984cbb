"""SVG snapshots of the main screens at 80x24, 100x30 and 160x48: the live tree with a stuck pass
and a failed compile, the detail pane of the failure, the timing, stacks, IR and help screens.
Each must read right at every size: names before numbers, durations with their units, header and
footer items whole."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from test_ui_snapshots import settled
from test_ui_stacks_snapshots import STACKS, StacksApp, answered
from test_ui_timing_snapshots import TimingApp
from textual.pilot import Pilot
from ui_fakes import FakeSource, FrozenClock, batch

from iket_tui.model.session import Session
from iket_tui.model.synthetic import live_stream
from iket_tui.sources.base import SourceState
from iket_tui.ui.app import IketApp

Compare = Callable[..., bool]
SIZES = pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 48)], ids=["80x24", "100x30", "160x48"])


def stuck_and_failed(*, follow: bool = True) -> tuple[IketApp, FrozenClock]:
    """A live session three quiet seconds after its sixth compile got stuck in
    ``tl.LayoutInference`` (42 s in), with the third compile failed."""
    clock = FrozenClock()
    source = FakeSource([batch(live_stream(running_for_ns=42_000_000_000), state=SourceState.LIVE)], stay_open=True)
    return IketApp(source, clock=clock, stuck_after_s=30.0, follow=follow), clock


@SIZES
def test_main_screen_with_a_stuck_pass_and_a_failed_compile(snap_compare: Compare, size: tuple[int, int]) -> None:
    app, clock = stuck_and_failed()

    async def three_quiet_seconds(pilot: Pilot[int]) -> None:
        clock.advance(3.0)
        app.refresh_views()

    assert snap_compare(app, terminal_size=size, run_before=settled(app, three_quiet_seconds))


@SIZES
def test_detail_pane_of_the_failed_pass(snap_compare: Compare, size: tuple[int, int]) -> None:
    app, _ = stuck_and_failed(follow=False)

    async def select_failing_pass(pilot: Pilot[int]) -> None:
        failing = next(comp.failing for comp in app.pass_tree.compiles if comp.failing is not None)
        line = app.rows.index_of(failing)
        assert line is not None
        await pilot.press("home", *["down"] * line)

    assert snap_compare(app, terminal_size=size, run_before=settled(app, select_failing_pass))


@SIZES
def test_help_screen(snap_compare: Compare, size: tuple[int, int]) -> None:
    app, _ = stuck_and_failed()

    async def open_help(pilot: Pilot[int]) -> None:
        await pilot.press("question_mark")
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=size, run_before=settled(app, open_help))


@SIZES
def test_timing_screen(snap_compare: Compare, size: tuple[int, int]) -> None:
    session = Session()
    session.apply(live_stream())  # the sixth compile is running tl.LayoutInference

    async def run_before(pilot: Pilot[None]) -> None:
        await pilot.press("down", "down")

    assert snap_compare(TimingApp(session), terminal_size=size, run_before=run_before)


@SIZES
def test_stacks_screen(snap_compare: Compare, size: tuple[int, int]) -> None:
    answer = json.loads(STACKS.read_text(encoding="utf-8"))
    assert snap_compare(StacksApp(answer), terminal_size=size, run_before=answered())


@pytest.mark.tilelang
@SIZES
def test_ir_screen(snap_compare: Compare, size: tuple[int, int]) -> None:
    pytest.importorskip("tilelang")
    from test_ui_ir_snapshots import IRApp, lowered_answer, shown

    answer: Any = lowered_answer()
    assert snap_compare(IRApp(answer), terminal_size=size, run_before=shown("diff"))
