"""The timing screen: per pass name over every compile of a real recording, sorted by a key or
a click on a column header, the slowest passes of the compile selected below, a live stream
refreshing under the cursor, and the way back to the pass tree."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import DataTable, Static
from ui_driving import app_test, wait_for_batches, wait_until
from ui_fakes import FakeSource, FrozenClock, batch

from iket_tui.model.synthetic import Lowering, live_stream
from iket_tui.sources.base import SourceState
from iket_tui.sources.replay import RecordingSource
from iket_tui.ui.app import IketApp
from iket_tui.ui.pass_tree_view import PassTreeView
from iket_tui.ui.timing_screen import TimingScreen

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"
WIDE = (160, 48)


def _screen(app: IketApp) -> TimingScreen:
    screen = app.screen
    assert isinstance(screen, TimingScreen)
    return screen


def _rows(app: IketApp, table_id: str) -> list[list[str]]:
    table: DataTable[Text] = _screen(app).query_one(table_id, DataTable)
    return [[cell.plain.strip() for cell in table.get_row_at(row)] for row in range(table.row_count)]


def _headers(app: IketApp, table_id: str) -> list[str]:
    table: DataTable[Text] = _screen(app).query_one(table_id, DataTable)
    return [column.label.plain.strip() for column in table.columns.values()]


def _text(app: IketApp, widget_id: str) -> str:
    return str(_screen(app).query_one(widget_id, Static).render())


def _cursor_pass(app: IketApp) -> str:
    table = _screen(app).query_one("#pass-names", DataTable)
    return _rows(app, "#pass-names")[table.cursor_row][0]


async def _replayed_with_timing(app: IketApp, pilot: Pilot[int]) -> None:
    await wait_until(pilot, lambda: app.source_state is SourceState.ENDED, "the replay to end")
    app.push_screen(TimingScreen(app.pass_tree, now_ns=app.now_ns))
    await wait_until(pilot, lambda: isinstance(app.screen, TimingScreen), "the timing screen")


@app_test
async def test_pass_names_of_a_real_run_sorted_by_keys_and_header_clicks() -> None:
    app = IketApp(RecordingSource(EXAMPLE, speed=0.0))
    async with app.run_test(size=WIDE) as pilot:
        await _replayed_with_timing(app, pilot)
        title = _text(app, "#timing-title")
        assert title == "timing: 9 compiles, 734 passes, 21.7 s: passes 25.4%, codegen 74.4%, other 0.2%"
        assert _headers(app, "#pass-names") == ["pass", "count", "total", "self ▼", "mean", "max", "share", "failed"]
        rows = _rows(app, "#pass-names")
        assert rows[0] == ["tl.InjectSoftwarePipeline", "9", "4.00 s", "4.00 s", "445 ms", "4.00 s", "18.4%", ""]
        assert rows[2][0] == "tl.LayoutInference" and rows[2][7] == "1"  # it failed in layout_conflict
        assert _text(app, "#pass-detail") == "tl.InjectSoftwarePipeline: 9 runs, longest 4.00 s in #4 slow_gemm"

        await pilot.press("down", "down")
        assert _cursor_pass(app) == "tl.LayoutInference"
        assert _text(app, "#pass-detail") == "tl.LayoutInference: 9 runs, longest 97.0 ms in #3 softmax, 1 failed"

        await pilot.press("c")  # by count, most first; the cursor stays on its pass
        assert _headers(app, "#pass-names")[1] == "count ▼"
        assert [row[:2] for row in _rows(app, "#pass-names")[:3]] == [
            ["tl.Simplify", "55"],
            ["pass_fn", "35"],
            ["tirx.Simplify", "32"],
        ]
        assert _cursor_pass(app) == "tl.LayoutInference"
        await pilot.press("c")  # the same key again: fewest first
        assert _headers(app, "#pass-names")[1] == "count ▲"
        assert int(_rows(app, "#pass-names")[0][1]) <= int(_rows(app, "#pass-names")[-1][1])
        assert _cursor_pass(app) == "tl.LayoutInference"

        await pilot.press("n")
        names = [row[0] for row in _rows(app, "#pass-names")]
        assert _headers(app, "#pass-names")[0] == "pass ▲" and names == sorted(names) and len(names) == 73

        columns = list(_screen(app).query_one("#pass-names", DataTable).columns.values())
        max_x = sum(column.width for column in columns[:5]) + 3
        await pilot.click("#pass-names", offset=(max_x, 0))  # the header of the max column
        assert _headers(app, "#pass-names")[5] == "max ▼"
        assert _rows(app, "#pass-names")[0][0] == "tl.InjectSoftwarePipeline"
        await pilot.press("o")  # the next column
        assert _headers(app, "#pass-names")[6] == "share ▼" and _rows(app, "#pass-names")[0][6] == "18.4%"
        await pilot.press("r")
        assert _headers(app, "#pass-names")[6] == "share ▲" and _rows(app, "#pass-names")[0][6] == "0.0%"

        await pilot.press("T")
        await wait_until(pilot, lambda: not isinstance(app.screen, TimingScreen), "the way back")
        assert isinstance(app.screen.focused, PassTreeView)


@app_test
async def test_the_slowest_passes_of_the_compile_selected() -> None:
    app = IketApp(RecordingSource(EXAMPLE, speed=0.0))
    async with app.run_test(size=WIDE) as pilot:
        await _replayed_with_timing(app, pilot)
        assert [row[:3] for row in _rows(app, "#compiles")][3:6] == [
            ["4", "slow_gemm", "done"],
            ["5", "layout_conflict", "failed"],
            ["6", "nvcc_error", "failed"],
        ]
        # The newest compile is selected at first.
        assert _headers(app, "#slowest") == ["slowest in #9 vector_add", "self", "total", "of compile"]
        assert _rows(app, "#slowest")[0] == ["tl.LayoutInference", "84.7 ms", "84.7 ms", "6.0%"]
        assert len(_rows(app, "#slowest")) == 10

        await pilot.press("tab")
        assert _screen(app).focused is _screen(app).query_one("#compiles")
        await pilot.press("up", "up", "up", "up", "up")
        await wait_until(pilot, lambda: _headers(app, "#slowest")[0] == "slowest in #4 slow_gemm", "compile 4")
        assert _screen(app).selected is app.pass_tree.compiles[3]
        assert _rows(app, "#slowest")[0] == ["tl.InjectSoftwarePipeline", "4.00 s", "4.00 s", "59.9%"]

        await pilot.press("down")
        await wait_until(
            pilot, lambda: _headers(app, "#slowest")[0] == "slowest in #5 layout_conflict (failed)", "compile 5"
        )
        assert _rows(app, "#slowest")[:2] == [
            ["tl.LayoutInference", "37.3 ms", "37.3 ms", "89.4%"],  # where it failed, after 37 ms
            ["tl.AddWrapperForSingleBufStore", "433 µs", "433 µs", "1.0%"],
        ]

        await pilot.click("#compiles", offset=(10, 2))  # the second compile's row, under the header
        await wait_until(pilot, lambda: _headers(app, "#slowest")[0] == "slowest in #2 gemm", "compile 2")
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, TimingScreen), "the way back")


@app_test
async def test_a_live_stream_refreshes_under_the_cursor() -> None:
    clock = FrozenClock()
    stream = live_stream()
    source = FakeSource([batch(stream, state=SourceState.LIVE)], stay_open=True)
    app = IketApp(source, clock=clock)
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        app.push_screen(TimingScreen(app.pass_tree, now_ns=app.now_ns))
        await wait_until(pilot, lambda: isinstance(app.screen, TimingScreen), "the timing screen")
        screen = _screen(app)
        assert _text(app, "#timing-title").endswith("· ▶ 1 running, timed so far")
        layout = next(row for row in _rows(app, "#pass-names") if "tl.LayoutInference" in row[0])
        assert layout[0] == "▶ tl.LayoutInference"  # running in the sixth compile for 1.2 s
        assert layout[5] == "1.20 s" and layout[7] == "1"  # the longest run is the running one; one failed
        assert _headers(app, "#slowest")[0] == "slowest in #6 flash_fwd (running)"
        assert _rows(app, "#slowest")[0][:2] == ["▶ tl.LayoutInference", "1.20 s"]

        await pilot.press("down", "down", "down")
        on = _cursor_pass(app)
        clock.advance(2.0)  # two seconds later, the running pass has run 3.2 s
        screen.sync()
        layout = next(row for row in _rows(app, "#pass-names") if "tl.LayoutInference" in row[0])
        assert layout[5] == "3.20 s"
        assert _cursor_pass(app) == on

        later = Lowering(compile=7, kernel="late_gemm", start_ns=app.session.last_t_ns + 10**9)
        source.feed(batch(later.messages(), state=SourceState.LIVE))
        await wait_for_batches(pilot, app, 2)
        screen.sync()
        assert _rows(app, "#compiles")[-1][:3] == ["7", "late_gemm", "done"]
        assert _headers(app, "#slowest")[0] == "slowest in #7 late_gemm"  # following the newest compile
        assert _cursor_pass(app) == on
        assert _text(app, "#timing-title").startswith("timing: 7 compiles, ")


@app_test
async def test_usable_at_80_by_24() -> None:
    app = IketApp(RecordingSource(EXAMPLE, speed=0.0))
    async with app.run_test(size=(80, 24)) as pilot:
        await _replayed_with_timing(app, pilot)
        assert _text(app, "#timing-title") == "9 compiles, 734 passes, 21.7 s: passes 25.4%, codegen 74.4%, other 0.2%"
        assert _headers(app, "#compiles") == ["#", "kernel", "time"]
        assert _headers(app, "#slowest") == ["slowest in #9 vector_add", "self", "share"]
        names = _screen(app).query_one("#pass-names", DataTable)
        assert names.virtual_size.width <= 80 - 2  # every column shows beside the scrollbar
        assert _rows(app, "#pass-names")[0][0] == "tl.Inject…ePipeline"  # cut in the middle ...
        assert _text(app, "#pass-detail").startswith("tl.InjectSoftwarePipeline: 9 runs")  # ... whole below
