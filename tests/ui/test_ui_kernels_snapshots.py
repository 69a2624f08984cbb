"""SVG snapshots of the kernels screen over the bundled recording of a real H200 run (the demo's
sample: three launches of its traced GEMM and a fourth in which one block waited 4 s), as it
opens at 80x24, 100x30 and 160x48, with the statistics at 100x30, and with the detail pane of a
producer warp at 160x48."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable
from ui_driving import wait_for_batches, wait_until
from ui_fakes import FakeSource, FrozenClock, batch

from iket_tui.model.synthetic import live_stream
from iket_tui.sources.base import SourceState
from iket_tui.sources.reading import read_recording
from iket_tui.ui.app import IketApp
from iket_tui.ui.kernels_screen import KernelsScreen

Compare = Callable[..., bool]
SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-demo-waiting.msgpack"


def kernels_after(*keys: str) -> tuple[IketApp, Any]:
    """The app over the sample's kernel messages, and what opens its kernels screen, then presses ``keys``."""
    messages, _ = read_recording(SAMPLE)
    kernel_messages = [msg for msg in messages if msg["type"].startswith("kernel_")]
    source = FakeSource([batch([*live_stream(), *kernel_messages], state=SourceState.LIVE)], stay_open=True)
    app = IketApp(source, clock=FrozenClock())

    async def run_before(pilot: Pilot[int]) -> None:
        await wait_for_batches(pilot, app, 1)
        await pilot.press("K")
        await wait_until(pilot, lambda: isinstance(app.screen, KernelsScreen), "the kernels screen")
        table = app.screen.query_one("#launches", DataTable)
        await wait_until(pilot, lambda: table.row_count == 4, "the launches")
        await pilot.press(*keys)
        await pilot.pause(0.2)

    return app, run_before


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 48)], ids=["80x24", "100x30", "160x48"])
def test_kernels_screen_as_it_opens(snap_compare: Compare, size: tuple[int, int]) -> None:
    app, run_before = kernels_after()
    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_kernels_screen_statistics_at_100x30(snap_compare: Compare) -> None:
    app, run_before = kernels_after("a")
    assert snap_compare(app, terminal_size=(100, 30), run_before=run_before)


def test_kernels_screen_with_a_producer_warps_detail_at_160x48(snap_compare: Compare) -> None:
    app, run_before = kernels_after("down", "enter")
    assert snap_compare(app, terminal_size=(160, 48), run_before=run_before)
