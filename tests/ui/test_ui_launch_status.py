"""The kernels screen says whether each launch arrived whole: a status in the launch table, and for
a selected launch that is not complete, a title above its flame view saying how much arrived and
why, with the blocks that did not; at 80 columns."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from textual.pilot import Pilot
from textual.widgets import DataTable
from ui_driving import app_test, wait_for_batches, wait_until
from ui_fakes import FakeSource, FrozenClock, batch

from iket_tui.model.synthetic import live_stream
from iket_tui.ring.buffer import RingView
from iket_tui.ring.cpu_producer import WarpWriter, synthetic_table
from iket_tui.ring.drain import RingDrain
from iket_tui.ring.layout import DEFAULT_LAYOUT, RingGeometry
from iket_tui.ring.wire import kernel_module, kernel_records
from iket_tui.sources.base import SourceState
from iket_tui.ui.app import IketApp
from iket_tui.ui.kernels_screen import KernelsScreen

NARROW = (80, 30)
S = 1_000_000_000
AGENT_T = 5 * S  # after the passes of live_stream()
RING = 9


def _kernel_messages() -> list[dict[str, Any]]:
    """Launch 2 read whole, then launch 3, whose block 1's warp 1 wrote 40 events into a region of 16."""
    geometry = RingGeometry(64, 16)  # regions of 16 records: a warp of 40 events overwrites its oldest
    ring = RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry, RING)
    t = iter(range(1 << 40, 1 << 41, 64))

    def warp(launch: int, block: int, index: int, grid: int, block_warps: int, events: int) -> None:
        writer = WarpWriter(
            ring,
            module=1,
            launch=launch,
            block=(block, 0, 0),
            warp=index,
            grid=(grid, 1, 1),
            block_warps=block_warps,
            clock=lambda: next(t),
        )
        for _ in range(events):
            writer.event(1)
        writer.close()

    warp(2, 0, 0, 1, 1, 3)
    for block in range(2):
        for index in range(2):
            warp(3, block, index, 2, 2, 40 if (block, index) == (1, 1) else 5)
    tracing = {"type": "kernel_tracing", "enabled": True, "device": "NVIDIA H200", "reason": None, "t_ns": AGENT_T}
    table = kernel_module(synthetic_table(1), ring_id=RING, layout=DEFAULT_LAYOUT, t_ns=AGENT_T)
    return [tracing, table, kernel_records(RingDrain(ring).drain(), t_ns=AGENT_T + S)]


def _app() -> IketApp:
    source = FakeSource([batch([*live_stream(), *_kernel_messages()], state=SourceState.LIVE)], stay_open=True)
    return IketApp(source, clock=FrozenClock(), tick_s=0.05)


async def _kernels(pilot: Pilot[int], app: IketApp) -> KernelsScreen:
    await wait_for_batches(pilot, app, 1)
    await pilot.press("K")
    await wait_until(pilot, lambda: isinstance(app.screen, KernelsScreen), "the kernels screen")
    screen = app.screen
    assert isinstance(screen, KernelsScreen)
    await wait_until(pilot, lambda: screen.query_one("#launches", DataTable).row_count == 2, "both launches")
    return screen


@app_test
async def test_the_launch_table_and_the_flame_title_say_how_much_of_each_launch_arrived() -> None:
    app = _app()
    async with app.run_test(size=NARROW) as pilot:
        screen = await _kernels(pilot, app)
        # 80 columns: the title leaves out where the ring is (and follow) to keep the counts whole.
        assert str(screen.query_one("#kernels-title").render()) == (
            "kernels: 2 launches (1 partial) · 34 events read, 24 lost"
        )
        table = screen.query_one("#launches", DataTable)
        header, newest, older = (table.render_line(y).text for y in range(3))
        # 80 columns hold every column but the records (a number the title sums up), left out whole.
        assert header.split() == ["kernel", "grid", "start", "duration", "status", "unbalanced", "compile"]
        assert newest.split()[:2] == ["synthetic", "2x1x1"] and "partial 75%" in newest
        assert older.split()[:2] == ["synthetic", "1x1x1"] and " complete " in older
        status = screen.query_one("#launch-status")
        assert status.display and status.outer_size.width == 80 and status.size.height == 3  # the detail wraps
        assert str(status.render()).splitlines() == [  # wrapped at a space, a number kept with its unit
            "partial: 75% of warps whole, overwritten",
            "3 of 4 warps whole · not whole: block (1,0) · lost: 1 warp overwritten",
            "(24 events)",
        ]
        await pilot.press("a")  # the per-event statistics: the same title above them
        await pilot.pause()
        assert status.display and str(status.render()).startswith("partial: 75% of warps whole, overwritten")
        await pilot.press("a", "tab", "down")  # the launch read whole: no title
        await wait_until(pilot, lambda: screen.selected is not None and screen.selected.key[3] == 2, "launch 2")
        assert not status.display


def test_kernels_screen_with_a_partial_launch_at_80_columns(snap_compare: Callable[..., bool]) -> None:
    app = _app()

    async def shown(pilot: Pilot[int]) -> None:
        await _kernels(pilot, app)
        await pilot.pause()

    assert snap_compare(app, terminal_size=NARROW, run_before=shown)
