"""A launch where one warp waits while another keeps writing events, on the kernels screen: the
waiting warp is shown once it has been quiet past the threshold (the launch's newest event, the
busy warp's, is never old), the busy one beside it, not stuck, and the launch's duration cell
says how long it has run, not how long its events span."""

from __future__ import annotations

from typing import Any

import numpy as np
from textual.widgets import DataTable
from ui_driving import app_test, wait_for_batches, wait_until
from ui_fakes import FakeSource, FrozenClock, batch

from iket_tui.demo.waiting_launch import K_STEP, MMA, TILE, TRACED_TABLE
from iket_tui.model.synthetic import live_stream
from iket_tui.ring.buffer import RingView
from iket_tui.ring.cpu_producer import WarpWriter
from iket_tui.ring.drain import RingDrain
from iket_tui.ring.layout import DEFAULT_LAYOUT, ID_BITS_MIN, RingGeometry
from iket_tui.ring.wire import kernel_module, kernel_records
from iket_tui.sources.base import SourceState
from iket_tui.ui.app import IketApp
from iket_tui.ui.kernels_screen import KernelsScreen
from iket_tui.ui.running_warps import RunningWarps

WIDE = (160, 48)
S = 1_000_000_000
AGENT_T = 5 * S  # after the passes of live_stream()
DEVICE_T = 1_795_976_916_032_000_000
RING = 7
TRACING = {"type": "kernel_tracing", "enabled": True, "device": "NVIDIA H200", "reason": None, "drain_hz": 20.0}


def busy_neighbour(seconds: int) -> list[dict[str, Any]]:
    """One ``kernel_records`` a second for ``seconds`` s: block (3,0)'s warp 4 stops at `mma`
    right after the launch began, block (0,0)'s warp 4 polls with a `k_step` mark each second."""
    geometry = RingGeometry(512, 256)
    ring = RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry, RING)
    drain = RingDrain(ring)

    def writer(sm: int, block: int) -> WarpWriter:
        return WarpWriter(
            ring, sm=sm, module=1, launch=6, block=(block, 0, 0), warp=4,
            id_bits=ID_BITS_MIN, clock=lambda: 0, start_ns=DEVICE_T,
        )  # fmt: skip

    stuck, busy = writer(3, 3), writer(0, 0)
    stuck.event(TILE, 3, t_ns=DEVICE_T)
    stuck.event(MMA, t_ns=DEVICE_T + 64)  # and nothing after it
    busy.event(TILE, 0, t_ns=DEVICE_T)
    out = []
    for second in range(1, seconds + 1):
        busy.event(K_STEP, second, t_ns=DEVICE_T + second * S)
        msg = kernel_records(drain.drain(), t_ns=AGENT_T + second * S)
        msg["device_now_ns"] = DEVICE_T + second * S + 1000  # the timer read at the drain
        out.append(msg)
    return out


def duration_cell(screen: KernelsScreen) -> str:
    return str(screen.query_one("#launches", DataTable).get_row_at(0)[3])


@app_test
async def test_a_warp_that_waits_is_shown_while_another_warp_of_its_launch_keeps_writing() -> None:
    first, *rest = busy_neighbour(10)
    table = kernel_module(TRACED_TABLE, ring_id=RING, layout=DEFAULT_LAYOUT, t_ns=AGENT_T)
    source = FakeSource(
        [batch([*live_stream(), {**TRACING, "t_ns": AGENT_T}, table, first], state=SourceState.LIVE)], stay_open=True
    )
    app = IketApp(source, clock=FrozenClock(), tick_s=0.05)  # the clock stands: the agent's time is the batches'
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        await pilot.press("K")
        await wait_until(pilot, lambda: isinstance(app.screen, KernelsScreen), "the kernels screen")
        screen = app.screen
        assert isinstance(screen, KernelsScreen)
        running = screen.query_one(RunningWarps)
        # 1 s in: both warps running, the waiting one quiet for 1 s, under the threshold.
        assert duration_cell(screen) == "running 1.00 s" and not running.display

        for count, msg in enumerate(rest, start=2):
            source.feed(batch([msg], state=SourceState.LIVE))
            await wait_for_batches(pilot, app, count)
        await wait_until(pilot, lambda: "warp 4 last at `mma`" in running.summary, "the waiting warp")
        assert running.summary == (
            "2 of 4 blocks not finished: block (3,0), warp 4 last at `mma` (tile 3), 10.0 s ago;"
            " block (0,0), warp 4 last at `k_step` 10, 1.00 µs ago"
        )
        assert running.rows == [
            "block (3,0)  warp 4  `mma` (tile 3)  10.0 s ago",
            "block (0,0)  warp 4  `k_step` 10     1.00 µs ago",
        ]
        await wait_until(pilot, lambda: "warp quiet" in duration_cell(screen), "the duration cell")
        assert duration_cell(screen) == "running 10.0 s, warp quiet 10.0 s"
        assert " · 1 running with a warp quiet for over 2.00 s" in str(screen.query_one("#kernels-title").render())
        await wait_until(pilot, lambda: "1 launch with a warp quiet" in app.header.text(), "the header's mark")
        assert "kernels: 13 ev, 1 launch with a warp quiet 10.0 s" in app.header.text()
