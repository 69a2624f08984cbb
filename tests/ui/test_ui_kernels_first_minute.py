"""The kernels screen explains itself on the recordings of a real H200 run: it opens fitted on
the newest launch that has finished (one still running marked, one quiet past the threshold
shown), its footer names the keys between warps and between launches, the launch table shows
its cursor while the flame view has focus, unbalanced ranges are explained on screen, the
statistics are drawn at the top of their area, and a narrow terminal drops whole columns."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import DataTable, Static
from textual.widgets._footer import FooterKey
from ui_driving import app_test, wait_for_batches, wait_until
from ui_fakes import FakeSource, FrozenClock, batch

from iket_tui.sources.base import SourceState
from iket_tui.sources.reading import read_recording
from iket_tui.sources.replay import RecordingSource
from iket_tui.ui.app import IketApp
from iket_tui.ui.flame_view import FlameView
from iket_tui.ui.footer import KeysFooter, key_width
from iket_tui.ui.kernels_screen import KernelsScreen, fitting_columns, fitting_line, fitting_title
from iket_tui.ui.running_warps import RunningWarps
from iket_tui.ui.wrapping import wrapped

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WAITING = EXAMPLES / "h200-demo-waiting.msgpack"
WIDE = (160, 48)
SMALL = (80, 24)
PRODUCERS = (
    "unbalanced 256: `tile` left open by warps 0-3 of each block,"
    " Hopper producer warps (they stop before the pipelined loop)"
)


async def kernels_of(pilot: Pilot[int], app: IketApp) -> KernelsScreen:
    await pilot.press("K")
    await wait_until(pilot, lambda: isinstance(app.screen, KernelsScreen), "the kernels screen")
    screen = app.screen
    assert isinstance(screen, KernelsScreen)
    await wait_until(pilot, lambda: screen.query_one("#launches", DataTable).row_count > 0, "the launches")
    return screen


def notes(screen: KernelsScreen) -> list[str]:
    shown = screen.query_one("#launch-notes", Static)
    return str(shown.render()).splitlines() if shown.display else []


@app_test
async def test_it_opens_fitted_where_the_blocks_ran_and_says_what_ran_on_past_the_edge() -> None:
    app = IketApp(RecordingSource(WAITING, speed=0.0))
    async with app.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: app.source_state is SourceState.ENDED, "the replay to end")
        screen = await kernels_of(pilot, app)
        flame = screen.query_one(FlameView)
        assert flame.launch is not None and flame.launch.key[3] == 6 and flame.launch.duration_ns > 4 * 10**9
        # The 63 blocks that did not wait ran in about 21 µs: that is the width, not the 4 s of the one that did.
        assert flame.window.end_ns < 25_000
        assert flame.render_line(1).text.startswith("   w0 ▏tile…")
        assert notes(screen) == [
            PRODUCERS,
            "block (3,0) ran on to t+4.00 s, past the right edge: 0 shows the whole launch",
        ]
        await pilot.press("0")
        assert flame.window.end_ns > 4 * 10**9 and notes(screen) == [PRODUCERS]
        await pilot.press("0")
        assert flame.window.end_ns < 25_000


@app_test
async def test_a_running_launch_is_marked_and_the_finished_one_shown_until_it_is_quiet() -> None:
    messages, _ = read_recording(WAITING)
    held = [index for index, msg in enumerate(messages) if msg["type"] == "kernel_records"][-2]  # block (3,0) waits
    source = FakeSource([batch(messages[: held + 1], state=SourceState.LIVE)], stay_open=True)
    clock = FrozenClock()
    app = IketApp(source, clock=clock, tick_s=0.05)
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        screen = await kernels_of(pilot, app)
        table = screen.query_one("#launches", DataTable)
        await wait_until(pilot, lambda: table.row_count == 4, "the four launches")
        assert str(table.get_row_at(0)[4]) == "running" and str(table.get_row_at(0)[3]).startswith("running ")
        assert screen.selected is not None and screen.selected.key[3] == 5 and not screen.selected.running
        assert table.cursor_row == 1 and screen.follow
        clock.advance(3.0)  # block (3,0) has waited past the threshold: the live view is for it
        running = screen.query_one(RunningWarps)
        await wait_until(pilot, lambda: bool(running.summary), "the waiting launch to be shown")
        assert screen.selected.key[3] == 6 and table.cursor_row == 0
        assert running.summary.startswith("1 of 64 blocks not finished: block (3,0), warps 4-7 last at `mma`")


@app_test
async def test_keys_between_launches_and_warps_are_in_the_footer_and_the_table_keeps_its_cursor() -> None:
    app = IketApp(RecordingSource(EXAMPLES / "h200-demo.msgpack", speed=0.0))
    async with app.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: app.source_state is SourceState.ENDED, "the replay to end")
        screen = await kernels_of(pilot, app)
        flame = screen.query_one(FlameView)
        table = screen.query_one("#launches", DataTable)
        footer = [(key.key_display, key.description) for key in screen.query(FooterKey)]
        assert footer[:2] == [("↑↓", "Warp"), ("<>", "Launch")]
        assert flame.has_focus and screen.selected is not None and screen.selected.key[3] == 5

        def cursor_row_style(row: int) -> bool:
            strip = table.render_line(1 + row)  # under the header
            return all(segment.style is not None and segment.style.bold for segment in strip if segment.text.strip())

        assert cursor_row_style(0) and not cursor_row_style(1)  # seen without focus
        await pilot.press("down")
        assert flame.cursor_row == 2 and screen.selected.key[3] == 5  # down: the next warp row, same launch
        await pilot.press("greater_than_sign")
        assert screen.selected.key[3] == 4 and table.cursor_row == 1 and flame.launch is screen.selected
        assert flame.has_focus and cursor_row_style(1) and not screen.follow
        await pilot.press("shift+down")
        assert screen.selected.key[3] == 3 and table.cursor_row == 2
        await pilot.press("less_than_sign", "less_than_sign", "less_than_sign")
        assert screen.selected.key[3] == 5 and table.cursor_row == 0


@app_test
async def test_statistics_are_drawn_at_the_top_of_their_area_with_unbalanced_explained() -> None:
    app = IketApp(RecordingSource(EXAMPLES / "h200-demo.msgpack", speed=0.0))
    async with app.run_test(size=SMALL) as pilot:
        await wait_until(pilot, lambda: app.source_state is SourceState.ENDED, "the replay to end")
        screen = await kernels_of(pilot, app)
        assert notes(screen) == [  # wrapped at a word, on two lines
            "unbalanced 256: `tile` left open by warps 0-3 of each block, Hopper producer",
            "warps (they stop before the pipelined loop)",
        ]
        assert " ".join(notes(screen)) == PRODUCERS
        await pilot.press("a")
        await pilot.pause()
        stats = screen.query_one("#stats", DataTable)
        shown = screen.query_one("#launch-notes", Static)
        assert stats.region.y == shown.region.bottom  # right under the lines above, no blank rows between
        assert stats.get_row_at(0)[:4] == ["tile", "range", "512", "256"]
        # 80 columns: the statistics leave out whole columns (p99, mean, max), never part of a header.
        assert [str(column.label) for column in stats.columns.values()] == [
            "event", "kind", "count", "unbalanced", "p50", "payload min", "payload max",
        ]  # fmt: skip
        assert stats.virtual_size.width <= 80
        assert notes(screen)[0].startswith("unbalanced 256: `tile` left open by warps 0-3")


@app_test
async def test_at_80_columns_the_launch_table_drops_whole_columns_and_no_cell_is_cut() -> None:
    app = IketApp(RecordingSource(WAITING, speed=0.0))
    async with app.run_test(size=SMALL) as pilot:
        await wait_until(pilot, lambda: app.source_state is SourceState.ENDED, "the replay to end")
        screen = await kernels_of(pilot, app)
        table = screen.query_one("#launches", DataTable)
        header = table.render_line(0).text
        assert header.split() == ["kernel", "grid", "duration", "status", "unbalanced", "compile"]
        assert table.virtual_size.width <= 80 and "8: traced_gemm" in table.render_line(1).text
        footer = screen.query_one(KeysFooter)
        keys = [key.key_display for key in footer.query(FooterKey)]
        assert keys[:2] == ["↑↓", "<>"] and "g" not in keys  # whole keys dropped from the end, none cut
        assert sum(key_width(key.key_display, key.description) for key in footer.query(FooterKey)) <= 80
        under = str(screen.query_one("#under-cursor", Static).render())
        assert "/col" not in under and under.startswith("block (0,0) · SM 0 · warp 0 · range tile from t+")
        await pilot.resize_terminal(160, 48)
        await pilot.pause()
        assert table.render_line(0).text.split()[:8] == [
            "kernel", "grid", "start", "duration", "status", "records", "unbalanced", "compile",
        ]  # fmt: skip


def test_columns_are_dropped_whole_numbers_first() -> None:
    rows: list[dict[str, str | Text]] = [
        {"kernel": "traced_gemm_kernel", "grid": "8x8x1", "start": "+97.1 µs", "records": "42,240"},
    ]
    columns = ("kernel", "grid", "start", "records")
    assert fitting_columns(columns, rows, 80) == columns
    assert fitting_columns(columns, rows, 40) == ("kernel", "grid", "start")
    assert fitting_columns(columns, rows, 30) == ("kernel", "grid")


def test_the_line_under_the_cursor_drops_its_scale_then_its_time_never_a_unit() -> None:
    line = "block (0,0) · SM 0 · warp 4 · t+1.23 µs · 289 ns/col · range mma from t+1.10 µs, 320 ns"
    assert fitting_line(line, 200) == line
    assert fitting_line(line, 80) == "block (0,0) · SM 0 · warp 4 · t+1.23 µs · range mma from t+1.10 µs, 320 ns"
    assert fitting_line(line, 60) == "block (0,0) · SM 0 · warp 4 · range mma from t+1.10 µs, 320 ns"


@app_test
async def test_at_80_columns_a_launch_going_quiet_widens_its_cell_and_the_table_still_fits() -> None:
    messages, _ = read_recording(WAITING)
    held = [index for index, msg in enumerate(messages) if msg["type"] == "kernel_records"][-2]  # block (3,0) waits
    source = FakeSource([batch(messages[: held + 1], state=SourceState.LIVE)], stay_open=True)
    clock = FrozenClock()
    app = IketApp(source, clock=clock, tick_s=0.05)
    async with app.run_test(size=SMALL) as pilot:
        await wait_for_batches(pilot, app, 1)
        screen = await kernels_of(pilot, app)
        table = screen.query_one("#launches", DataTable)
        await wait_until(pilot, lambda: table.row_count == 4, "the four launches")
        await pilot.press("f")  # not following: the clock alone changes the running launch's cell
        clock.advance(3.0)
        await wait_until(pilot, lambda: "warp quiet" in table.render_line(1).text, "the quiet launch's cell")
        assert screen.selected is not None and screen.selected.key[3] == 5
        header = table.render_line(0).text.split()
        assert header[:3] == ["kernel", "duration", "status"] and "records" not in header
        assert table.virtual_size.width <= 80
        assert "running 3." in table.render_line(1).text and "s, warp quiet 3." in table.render_line(1).text


def test_the_title_keeps_its_counts_whole_leaving_out_follow_then_what_is_said_elsewhere_then_the_ring() -> None:
    quiet = (
        "kernels: ring on NVIDIA H200 · 4 launches · 168,672 events read, 0 lost"
        " · 1 running with a warp quiet for over 2.00 s  follow"
    )
    assert fitting_title(quiet, 158) == quiet
    assert fitting_title(quiet, 78) == "kernels: ring on NVIDIA H200 · 4 launches · 168,672 events read, 0 lost"
    partial = "kernels: ring on NVIDIA H200 · 2 launches (1 partial) · 34 events read, 24 lost  follow"
    assert fitting_title(partial, 78) == "kernels: 2 launches (1 partial) · 34 events read, 24 lost"
    assert fitting_title(partial, 40) == "kernels: 2 launches (1 partial)"


def test_lines_above_the_flame_view_wrap_at_spaces_and_keep_each_number_with_its_unit() -> None:
    lost = "3 of 4 warps whole · not whole: block (1,0) · lost: 1 warp overwritten (24 events)"
    assert wrapped(lost, 78).splitlines() == [
        "3 of 4 warps whole · not whole: block (1,0) · lost: 1 warp overwritten",
        "(24 events)",
    ]
    assert wrapped("block (3,0) ran on to t+4.00 s, past the right edge", 30).splitlines() == [
        "block (3,0) ran on to",
        "t+4.00 s, past the right edge",
    ]


@app_test
async def test_the_unfinished_warps_summary_keeps_its_time_with_its_unit_where_it_wraps() -> None:
    messages, _ = read_recording(WAITING)
    held = [index for index, msg in enumerate(messages) if msg["type"] == "kernel_records"][-2]  # block (3,0) waits
    source = FakeSource([batch(messages[: held + 1], state=SourceState.LIVE)], stay_open=True)
    clock = FrozenClock()
    app = IketApp(source, clock=clock, tick_s=0.05)
    async with app.run_test(size=(85, 24)) as pilot:  # 83 cells: the line would end between 3.05 and s
        await wait_for_batches(pilot, app, 1)
        screen = await kernels_of(pilot, app)
        clock.advance(3.0)
        running = screen.query_one(RunningWarps)
        await wait_until(pilot, lambda: bool(running.summary), "the waiting launch's warps")
        lines = [running.render_line(y).text.strip() for y in range(2)]
        assert lines == [
            "1 of 64 blocks not finished: block (3,0), warps 4-7 last at `mma` (k_step 17),",
            "3.05 s ago",
        ]


@app_test
async def test_at_80_columns_the_title_of_a_recorded_run_wraps_whole() -> None:
    from iket_tui.demo.sample import sample_recording
    from iket_tui.model.synthetic import live_stream

    no_ring = {"type": "kernel_tracing", "enabled": True, "device": None, "reason": "no CUDA device", "t_ns": 1}
    source = FakeSource([batch([*live_stream(), no_ring], state=SourceState.LIVE)], stay_open=True)
    app = IketApp(source, sample_kernels=sample_recording())  # type: ignore[arg-type]
    async with app.run_test(size=SMALL) as pilot:
        await wait_until(pilot, lambda: app.session.kernels.tracing is not None, "the tracing state")
        screen = await kernels_of(pilot, app)
        title = screen.query_one("#kernels-title", Static)
        await wait_until(pilot, lambda: "showing" in str(title.render()), "the recorded run's title")
        assert str(title.render()).splitlines() == [
            "kernels: no GPU here; showing a recorded run on NVIDIA H200",
            "(h200-demo-waiting.msgpack)",
        ]
        assert title.size.height == 2
