"""The kernels screen over the recording of a real H200 run: launches, the flame view, its
cursor, zoom, fit, jumping to a block, the mouse, and the way back to the pass tree."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable
from ui_driving import app_test, wait_until

from iket_tui.model.flame_text import ruler
from iket_tui.sources.base import SourceState
from iket_tui.sources.replay import RecordingSource
from iket_tui.ui.app import IketApp
from iket_tui.ui.flame_view import FlameView
from iket_tui.ui.kernels_screen import KernelsScreen
from iket_tui.ui.pass_tree_view import PassTreeView

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"
WIDE = (160, 48)


def _replayed() -> IketApp:
    return IketApp(RecordingSource(EXAMPLE, speed=0.0))


def _under_cursor(app: IketApp) -> str:
    return app.screen.query_one(FlameView).describe_under_cursor()


@app_test
async def test_the_launches_and_the_flame_view_of_a_real_run() -> None:
    app = _replayed()
    async with app.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: app.source_state is SourceState.ENDED, "the replay to end")
        assert "kernels: 126,720 ev" in app.header.text()
        await pilot.press("K")
        await wait_until(pilot, lambda: isinstance(app.screen, KernelsScreen), "the kernels screen")
        screen = app.screen
        assert isinstance(screen, KernelsScreen)
        title = str(screen.query_one("#kernels-title").render())
        assert title.startswith("kernels: ring on NVIDIA H200 · 3 launches · 126,720 events read, 0 lost")
        flame = screen.query_one(FlameView)
        assert flame.launch is not None and flame.launch.records == 42_240
        # The pass tree's own keys are not offered over this screen (its footer lists only its own).
        assert not app.check_action("toggle_details", ()) and not app.check_action("search", ())
        assert flame.flame is not None and len(flame.flame.rows) == 64 * (1 + 4 + 4 * 2)
        # The cursor starts on the first warp of the first block: a loader warp whose tile range never ends.
        assert _under_cursor(app).startswith("block (0,0) · SM 124 · warp 0 · t+")
        lines = [flame.render_line(y).text for y in range(6)]
        assert lines[0].startswith(" block (0,0) · SM 124")
        assert lines[1].startswith("   w0 ")
        await pilot.press("enter")  # the detail pane of the warp under the cursor
        detail = str(screen.query_one("#flame-detail").render())
        assert detail.splitlines() == [
            "block (0,0) · SM 124",
            "warps      8",
            detail.splitlines()[2],
            "warp       0",
            "ranges     1 (1 unbalanced)",
            "why        a producer warp (Hopper warp specialisation): it opens ranges and closes none",
            "marks      1",
            "  first_a          1",
            "  tile             1",
        ]
        assert detail.splitlines()[2].startswith("ran        t+32 ns .. t+")
        await pilot.press("enter")
        for _ in range(4):
            await pilot.press("down")
        await pilot.press(*["right"] * 40)
        assert "warp 4" in _under_cursor(app)
        assert "range tile from t+" in _under_cursor(app) and "payload 0 (int32)" in _under_cursor(app)
        before = flame.window.ns_per_column
        await pilot.press("i")
        assert flame.window.ns_per_column == before / 2
        await pilot.press("0")
        assert flame.window.ns_per_column == before and flame.fitted
        await pilot.press("g", "5", "enter")
        await pilot.pause()
        assert _under_cursor(app).startswith("block (5,0)")
        await pilot.click(FlameView, offset=(20, 3))
        assert flame.cursor_row == flame.scroll_offset.y + 3 and flame.cursor_column == 14
        await pilot.press("escape")
        assert isinstance(app.screen.focused, PassTreeView)


@app_test
async def test_grouping_by_sm_the_per_event_table_and_the_compile_of_each_launch() -> None:
    app = _replayed()
    async with app.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: app.source_state is SourceState.ENDED, "the replay to end")
        await pilot.press("K")
        await wait_until(pilot, lambda: isinstance(app.screen, KernelsScreen), "the kernels screen")
        launches = app.screen.query_one("#launches", DataTable)
        traced = next(comp for comp in app.pass_tree.compiles if comp.kernel == "traced_gemm")
        assert [launches.get_row_at(row)[7] for row in range(3)] == [f"{traced.id}: traced_gemm"] * 3

        await pilot.press("m")
        flame = app.screen.query_one(FlameView)
        assert flame.by_sm and flame.flame is not None and len(flame.flame.rows) == 64  # one block per SM here
        assert _under_cursor(app).startswith("SM 124 · t+")
        assert "block (0,0): 8 warps, t+" in _under_cursor(app)
        await pilot.press("m")
        assert not flame.by_sm and _under_cursor(app).startswith("block (0,0) · SM 124 · warp 0")

        await pilot.press("slash", *"MMA", "enter")
        assert flame.match == "mma" and "· range mma from t+" in _under_cursor(app)
        first = (flame.cursor_row, flame.cursor_column)
        await pilot.press("n")
        assert "· range mma from t+" in _under_cursor(app) and (flame.cursor_row, flame.cursor_column) != first
        shown = "".join(flame.render_line(y).text for y in range(flame.size.height))
        assert "mma" in shown and "load" not in shown and "tile" not in shown
        await pilot.press("slash", "enter")
        assert flame.match == ""

        await pilot.press("a")
        stats = app.screen.query_one("#stats", DataTable)
        rows = [stats.get_row_at(row) for row in range(stats.row_count)]
        assert [(row[0], row[1], row[2], row[3]) for row in rows] == [
            ("tile", "range", "512", "256"),
            ("first_a", "mark", "512", "0"),  # before the pipelined loop: every warp
            ("k_step", "mark", "8,192", "0"),
            ("load", "range", "8,192", "0"),
            ("mma", "range", "8,192", "0"),
        ]
        assert (rows[2][8], rows[2][9]) == ("0", "31")  # k_step payloads: the step numbers


def test_the_time_ruler_ticks_at_round_times() -> None:
    # 100 ns a column: a tick every 2 µs (20 columns), the smallest round step of at least 14 columns;
    # the tick at 4 µs has no room for its time whole: the tick alone.
    assert ruler(0.0, 100.0, 44, spacing=14) == "┊0 ns" + " " * 15 + "┊2.00 µs" + " " * 12 + "┊   "
    assert ruler(1500.0, 100.0, 16) == "     ┊2.00 µs   "  # the first tick at or after the window's start


@app_test
async def test_without_a_gpu_the_demo_shows_the_kernels_of_the_bundled_recording() -> None:
    from ui_fakes import FakeSource, batch

    from iket_tui.demo.sample import sample_recording
    from iket_tui.model.synthetic import live_stream

    sample = sample_recording()
    assert sample is not None and sample.name == "h200-demo-waiting.msgpack"
    no_ring = {"type": "kernel_tracing", "enabled": True, "device": None, "reason": "no CUDA device", "t_ns": 1}
    source = FakeSource([batch([*live_stream(), no_ring], state=SourceState.LIVE)], stay_open=True)
    app = IketApp(source, sample_kernels=sample)  # type: ignore[arg-type]
    async with app.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: app.session.kernels.tracing is not None, "the tracing state")
        assert "kernels: no ring (no CUDA device)" in app.header.text()
        await pilot.press("K")
        await wait_until(pilot, lambda: isinstance(app.screen, KernelsScreen), "the kernels screen")
        screen = app.screen
        assert isinstance(screen, KernelsScreen) and screen.showing_sample
        launches = screen.query_one("#launches", DataTable)
        await wait_until(pilot, lambda: launches.row_count == 4, "the sample's launches, read off the app's thread")
        title = str(screen.query_one("#kernels-title").render())
        assert title == "kernels: no GPU here; showing a recorded run on NVIDIA H200 (h200-demo-waiting.msgpack)"
        newest = launches.get_row_at(0)
        assert newest[-1] == "8 (recorded)"  # the recording's compile, not one of this session
        assert str(newest[3]) == "4.00 s"  # the launch whose block waited, released: no longer running
        assert [str(row[3]) for row in map(launches.get_row_at, range(1, 4))] == ["21.7 µs", "21.3 µs", "22.6 µs"]
        assert _under_cursor(app).startswith("block (0,0) · SM 0 · warp 0")
