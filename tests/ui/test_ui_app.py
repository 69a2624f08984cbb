"""The app driven like a user would: keys, clicks, a source that streams, pauses, ends and fails."""

from __future__ import annotations

import pytest
from textual.geometry import Region
from textual.widgets import Static
from ui_driving import app_test, cursor_row, screen_lines, tree_text, wait_for_batches, wait_until
from ui_fakes import FakeReplay, FakeSource, FrozenClock, batch

from iket_tui.model.nodes import INCOMPLETE, CompileNode, PassNode
from iket_tui.model.synthetic import NVCC_REJECTED, Lowering, agent_hello, live_stream, lowerings
from iket_tui.protocol import messages as m
from iket_tui.sources.base import SourceState
from iket_tui.ui import units
from iket_tui.ui.app import IketApp
from iket_tui.ui.detail_pane import DetailPane
from iket_tui.ui.header_bar import HeaderBar
from iket_tui.ui.help_screen import HelpScreen
from iket_tui.ui.pass_tree_view import PassTreeView
from iket_tui.ui.search_bar import SearchBar

WIDE = (160, 48)


def live_app(*batches: list[m.Message], **kwargs: object) -> tuple[IketApp, FakeSource]:
    source = FakeSource([batch(messages, state=SourceState.LIVE) for messages in batches], stay_open=True)
    return IketApp(source, clock=FrozenClock(), **kwargs), source  # type: ignore[arg-type]


def header(app: IketApp) -> str:
    return app.query_one(HeaderBar).text()


def details(app: IketApp) -> str:
    shown = app.query_one(DetailPane).details
    return "" if shown is None else shown.text()


def compile_row(app: IketApp, kernel: str) -> CompileNode:
    return next(comp for comp in app.pass_tree.compiles if comp.kernel == kernel)


@app_test
async def test_live_tree_follows_the_running_pass_of_the_newest_compile() -> None:
    app, _ = live_app(live_stream())
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        # what is wrong first, then the connection and the target
        assert header(app).startswith("1 compile failed  live  pid 4242  python kernels/demo.py  ")
        assert "0 dropped" in header(app) and "follow" in header(app)
        assert cursor_row(app).startswith("● tl.LayoutInference")
        assert "running" in cursor_row(app) and "1.20 s" in cursor_row(app)
        assert details(app).startswith("pass tl.LayoutInference\nstatus: running")
        flash = compile_row(app, "flash_fwd")
        assert app.rows.is_expanded(flash)
        assert not app.rows.is_expanded(compile_row(app, "gemm_128x128"))
        assert app.rows.is_expanded(compile_row(app, "add_transposed"))  # failed: expanded to the failure


@app_test
async def test_a_new_compile_is_followed_and_the_previous_one_collapses() -> None:
    specs = lowerings(7)
    first = live_stream(compiles=6)
    app, source = live_app(first)
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        later = specs[5].messages()[-8:] + specs[6].messages(until_ns=specs[6].start_ns + 60_000_000)
        source.feed(batch(later))
        await wait_for_batches(pilot, app, 2)

        newest = app.pass_tree.compiles[-1]
        assert newest.kernel == "gemm_128x128" and newest.id == 7
        assert app.rows.is_expanded(newest)
        assert not app.rows.is_expanded(compile_row(app, "flash_fwd"))
        assert isinstance(app.view.cursor, PassNode) and app.view.cursor.compile is newest


@app_test
async def test_moving_the_cursor_stops_following_and_f_resumes() -> None:
    app, source = live_app(live_stream())
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        await pilot.press("up")
        assert not app.following
        assert cursor_row(app).startswith("✓ tl.Simplify")
        assert "follow" not in header(app)

        source.feed(batch(lowerings(7)[6].messages(until_ns=lowerings(7)[6].start_ns + 60_000_000)))
        await wait_for_batches(pilot, app, 2)
        assert cursor_row(app).startswith("✓ tl.Simplify")  # not dragged along

        await pilot.press("f")
        assert app.following
        assert isinstance(app.view.cursor, PassNode) and app.view.cursor.compile.id == 7


@app_test
async def test_keys_collapse_expand_and_move_through_the_tree() -> None:
    app, _ = live_app(live_stream())
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        await pilot.press("home")
        assert cursor_row(app).startswith("▼ pid 4242")
        await pilot.press("down")
        assert cursor_row(app).startswith("▶ ✓ gemm_128x128")
        rows_before = len(app.rows)

        await pilot.press("right")
        assert cursor_row(app).startswith("▼ ✓ gemm_128x128")
        assert len(app.rows) > rows_before + 80
        await pilot.press("right")
        assert cursor_row(app).startswith("▼ ✓ pass context 1")
        await pilot.press("left")
        assert cursor_row(app).startswith("▶ ✓ pass context 1")
        await pilot.press("left")
        assert cursor_row(app).startswith("▼ ✓ gemm_128x128")
        await pilot.press("left")
        assert cursor_row(app).startswith("▶ ✓ gemm_128x128")
        assert len(app.rows) == rows_before

        await pilot.press("enter")
        assert cursor_row(app).startswith("▼ ✓ gemm_128x128")
        assert len(app.rows) == rows_before + 3  # its context stays collapsed as the user left it; two codegen steps
        await pilot.press("c")
        assert len(app.rows) == 1 + len(app.pass_tree.compiles)
        await pilot.press("e")
        assert len(app.rows) == 1 + sum(
            1 + len(c.context_order) + sum(len(x.passes) for x in c.context_order) + len(c.codegen_steps)
            for c in app.pass_tree.compiles
        )
        await pilot.press("end")
        assert app.view.cursor_line == len(app.rows) - 1
        await pilot.press("pageup")
        assert app.view.cursor_line == len(app.rows) - 1 - app.view.scrollable_content_region.height


@app_test
async def test_clicking_a_row_selects_it_and_toggles_it() -> None:
    app, _ = live_app(live_stream())
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        await pilot.press("home")
        gemm = compile_row(app, "gemm_64x256")
        line = app.rows.index_of(gemm)
        assert line is not None

        await pilot.click(PassTreeView, offset=(10, line - app.view.scroll_offset.y))
        assert app.view.cursor is gemm
        assert app.rows.is_expanded(gemm)
        assert details(app).startswith("compile gemm_64x256")
        assert not app.following


@app_test
async def test_search_finds_passes_by_name_and_n_moves_between_matches() -> None:
    app, _ = live_app(live_stream())
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        await pilot.press("home", "slash", *"layoutinf")
        bar = app.query_one(SearchBar)
        assert bar.display
        cursor = app.view.cursor
        assert isinstance(cursor, PassNode) and cursor.name == "tl.LayoutInference"
        assert cursor.compile.kernel == "gemm_128x128"
        assert app.rows.is_expanded(cursor.compile)  # revealed
        assert str(app.query_one("#search-count").render()) == "1 of 6"

        await pilot.press("enter")
        assert not bar.display and app.view.has_focus
        await pilot.press("n")
        assert isinstance(app.view.cursor, PassNode) and app.view.cursor.compile.kernel == "gemm_64x256"
        await pilot.press("N", "N")
        assert isinstance(app.view.cursor, PassNode) and app.view.cursor.compile.kernel == "flash_fwd"
        assert "tl.LayoutInference" in cursor_row(app)

        await pilot.press("slash", "escape")
        assert app.view.search == "" and app.pass_search.term == ""


@app_test
async def test_pause_freezes_the_display_while_data_keeps_arriving() -> None:
    specs = lowerings(7)
    app, source = live_app(live_stream(compiles=6))
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        await pilot.press("p")
        before = tree_text(app)
        source.feed(batch(specs[6].messages()))
        await wait_for_batches(pilot, app, 2)

        assert tree_text(app) == before
        assert len(app.pass_tree.compiles) == 6
        assert f"paused ({len(specs[6].messages()):,} held)" in header(app)

        await pilot.press("p")
        assert len(app.pass_tree.compiles) == 7
        assert "paused" not in header(app)


@app_test
async def test_a_failed_compile_shows_its_failing_pass_and_error_in_the_detail_pane() -> None:
    app, _ = live_app(live_stream(), follow=False)
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        failed = compile_row(app, "add_transposed")
        assert failed.failing is not None
        line = app.rows.index_of(failed.failing)
        assert line is not None  # revealed without following
        await pilot.press("home", *["down"] * line)

        assert cursor_row(app).startswith("✗ tl.LayoutInference")
        text = details(app)
        assert "status: failed" in text
        assert "InternalError: Layout infer conflict between D_l and C_l" in text
        assert "Traceback (most recent call last):" in text
        assert 'File "/srv/kernels/demo.py", line 58, in main' in text


@app_test
async def test_dropped_events_are_counted_and_highlighted_in_the_header() -> None:
    app, source = live_app(live_stream(dropped=12))
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        assert "12 dropped" in header(app)
        assert app.query_one("#header-dropped").has_class("-nonzero")

        source.feed(batch([m.dropped(t_ns=app.session.last_t_ns + 1, count=30, total=42)]))
        await wait_for_batches(pilot, app, 2)
        assert "42 dropped" in header(app)
        source.feed(batch([m.sync(t_ns=app.session.last_t_ns + 1, backlog=500, backlog_lost=77)]))
        await wait_for_batches(pilot, app, 3)
        assert "42 dropped, 77 missed before attach" in header(app)


@app_test
async def test_filtered_passes_and_reconnections_are_said_in_the_header_but_not_as_loss() -> None:
    app, source = live_app(live_stream())
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        beat = {"type": m.HEARTBEAT, "produced": 900, "dropped": 0, "t_ns": app.session.last_t_ns + 1}
        source.feed(batch([{**beat, "filtered": 88, "filtered_passes": 44}]))
        await wait_for_batches(pilot, app, 2)
        assert "0 dropped, 44 passes filtered" in header(app)
        assert not app.query_one("#header-dropped").has_class("-nonzero")  # asked for, not lost
        source.feed(batch([agent_hello()]))  # the agent again, after a gap
        await wait_for_batches(pilot, app, 3)
        assert "0 dropped, 44 passes filtered, 1 reconnection" in header(app)


@app_test
async def test_when_the_target_exits_the_data_stays_and_open_passes_become_incomplete() -> None:
    app, source = live_app(live_stream())
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        assert "live  pid 4242  python kernels/demo.py  813 ev/s  813 events" in header(app)
        t = app.session.last_t_ns
        source.feed(batch([m.bye(t_ns=t + 1, produced=900, dropped=0, reason="exit")], state=SourceState.ENDED))
        source.finish()
        await wait_until(pilot, lambda: app.session.ended is not None, "the end of the stream")

        assert "disconnected  pid 4242  python kernels/demo.py  0 ev/s  813 events" in header(app)
        layout = app.pass_tree.passes[-1]
        assert layout.status is INCOMPLETE
        assert "◌ tl.LayoutInference" in tree_text(app)
        assert len(app.pass_tree.compiles) == 6
        assert details(app).startswith("pass tl.LayoutInference\nstatus: incomplete")


@app_test
async def test_the_event_rate_falls_while_nothing_arrives() -> None:
    clock = FrozenClock()
    source = FakeSource([batch(live_stream(), state=SourceState.LIVE)], stay_open=True)
    app = IketApp(source, clock=clock)
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        assert "live  pid 4242  python kernels/demo.py  813 ev/s" in header(app)

        clock.advance(3.0)
        app.refresh_views()
        assert "quiet  pid 4242  python kernels/demo.py  271 ev/s  813 events" in header(app)
        clock.advance(2.0)
        app.refresh_views()
        assert "quiet  pid 4242  python kernels/demo.py  0 ev/s  813 events" in header(app)
        clock.advance(40.0)  # no heartbeat either: the target does not answer
        app.refresh_views()
        assert "unresponsive for 45.0 s (since " in header(app)


@app_test
async def test_a_compile_busy_in_nvcc_is_followed_to_its_running_codegen_step() -> None:
    spec = Lowering(compile=1, kernel="gemm", start_ns=1_000_000_000, codegen_ns=2_900_000_000)
    began = next(msg["t_ns"] for msg in spec.messages() if msg["type"] == m.CODEGEN_BEGIN)
    stream = [
        agent_hello(),
        *spec.messages(until_ns=began),
        m.heartbeat(t_ns=began + 1_500_000_000, produced=0, dropped=0, open_passes=0),
    ]
    app, _ = live_app(stream)
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)

        assert cursor_row(app).startswith("● codegen tilelang_cuda")
        assert cursor_row(app).split()[-3:] == ["running", "1.50", "s"]
        assert details(app).startswith("codegen tilelang_cuda\nstatus: running")
        assert "duration: 1.50 s so far" in details(app)


@app_test
async def test_a_compile_rejected_by_nvcc_shows_its_failed_codegen_step() -> None:
    good = Lowering(compile=1, kernel="gemm", start_ns=1_000_000_000, codegen_ns=2_900_000_000)
    bad = Lowering(
        compile=2, kernel="k", start_ns=good.end_ns() + 1, codegen_ns=300_000_000, codegen_error=NVCC_REJECTED
    )
    app, _ = live_app([agent_hello(), *good.messages(), *bad.messages()], follow=False)
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        [nvcc] = compile_row(app, "k").codegen_steps
        line = app.rows.index_of(nvcc)
        assert line is not None  # revealed without following
        await pilot.press("home", *["down"] * line)

        assert cursor_row(app).startswith("✗ codegen tilelang_cuda RuntimeError: nvcc fai… failed")
        assert cursor_row(app).endswith("300 ms")
        assert details(app).startswith("codegen tilelang_cuda\nstatus: failed")
        assert NVCC_REJECTED in details(app)


@app_test
async def test_a_failing_source_shows_its_error_line_and_keeps_the_tree() -> None:
    app, source = live_app(live_stream())
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        source.feed(batch([], state=SourceState.FAILED, error="connection reset by the target"))
        source.finish()
        await wait_until(pilot, lambda: app.session.ended is not None, "the end of the stream")

        assert "failed" in header(app)
        assert header(app).endswith("connection reset by the target")
        assert app.query_one("#header-message").has_class("-error")
        assert len(app.pass_tree.compiles) == 6


@app_test
async def test_a_source_that_raises_is_reported_in_one_line() -> None:
    class Broken(FakeSource):
        def batches(self):  # type: ignore[no-untyped-def]
            yield batch(live_stream())
            raise OSError("socket closed unexpectedly\nwith details")

    source = Broken()
    app = IketApp(source, clock=FrozenClock())
    async with app.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: app.session.ended is not None, "the source to fail")
        assert header(app).endswith("OSError: socket closed unexpectedly")
        assert len(app.pass_tree.compiles) == 6


@app_test
async def test_malformed_messages_are_counted_not_fatal() -> None:
    app, _ = live_app([*live_stream(), {"type": "pass_start", "seq": "x"}, {"nonsense": True}, {"type": "new_in_v2"}])
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        await pilot.press("home")
        text = details(app)
        assert "malformed messages: 2" in text and "unknown messages: 1" in text
        assert "0 dropped, 3 bad messages" in header(app)
        assert len(app.pass_tree.compiles) == 6


@app_test
async def test_replay_keys_pause_step_and_change_speed() -> None:
    source = FakeReplay([batch(live_stream(), state=SourceState.LIVE)], stay_open=True)
    app = IketApp(source, clock=FrozenClock())
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        assert header(app).startswith("1 compile failed  replay demo.msgpack  ·  pid 4242")  # no connection to tell
        assert "speed 1x" in header(app)
        rows = len(app.rows)

        await pilot.press("space")
        assert source.paused and "paused" in header(app)
        assert len(app.rows) == rows  # space pauses a replay rather than toggling a row
        await pilot.press("s", "full_stop")
        assert source.steps == 2
        await pilot.press("right_square_bracket", "right_square_bracket")
        assert source.speed == 4.0 and "speed 4x" in header(app)
        await pilot.press("left_square_bracket", "minus", "minus")
        assert source.speed == 0.5
        await pilot.press("p")
        assert not source.paused


@app_test
async def test_a_whole_recording_in_one_batch_shows_its_full_length() -> None:
    stream = live_stream()
    header_frame = m.recording(created_unix=0.0, software_version="0.1.0", source="pid 4242")
    source = FakeReplay([batch([header_frame, *stream], state=SourceState.ENDED)], stay_open=True)
    app = IketApp(source, clock=FrozenClock())
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        times = [msg["t_ns"] for msg in stream if "t_ns" in msg]
        assert f"at {units.duration(max(times) - min(times))}" in header(app)


@app_test
async def test_replay_keys_do_nothing_for_a_live_source() -> None:
    app, _ = live_app(live_stream())
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        await pilot.press("home", "down")
        await pilot.press("space")
        assert app.rows.is_expanded(compile_row(app, "gemm_128x128"))  # space toggled the row
        assert not app.paused


@app_test
async def test_help_lists_the_keys_and_closes() -> None:
    app, source = live_app(live_stream())
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        body = app.screen.query_one("#help-body Static", Static)
        shown = "\n".join(strip.text for strip in body.render_lines(Region(0, 0, body.size.width, body.size.height)))
        assert "follow the newest compile and its running pass" in shown
        assert "step one message while paused" in shown
        source.feed(batch(lowerings(7)[6].messages()))
        await wait_for_batches(pilot, app, 2)  # events keep arriving under the help
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        assert app.view.cursor is app.pass_tree.compiles[6]  # followed while the help was open


@app_test
async def test_quitting_closes_the_source() -> None:
    app, source = live_app(live_stream())
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        await pilot.press("q")
    assert source.closed.is_set()
    assert app.return_code == 0


@pytest.mark.parametrize("screen_key", [None, "K", "S", "T"])
@app_test
async def test_ctrl_c_quits_from_every_screen(screen_key: str | None) -> None:
    app, source = live_app(live_stream())
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        if screen_key is not None:
            await pilot.press(screen_key)
            await wait_until(pilot, lambda: len(app.screen_stack) > 1, f"the screen of {screen_key}")
        await pilot.press("ctrl+c")
        await wait_until(pilot, lambda: source.closed.is_set(), "the app to quit")
    assert app.return_code == 0


@app_test
async def test_at_80_by_24_the_tree_header_and_details_all_fit() -> None:
    app, _ = live_app(live_stream(dropped=3))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for_batches(pilot, app, 1)

        assert app.screen.has_class("-narrow")
        lines = screen_lines(app)
        assert lines[-1].startswith("        ● tl.LayoutInference")
        assert all(len(line) <= 80 for line in lines)
        detail = app.query_one(DetailPane)
        assert detail.region.y > app.view.region.y and detail.region.height >= 6
        assert "3 dropped" in header(app)
        await pilot.press("d")
        assert not detail.display


@app_test
async def test_compile_without_begin_is_still_shown() -> None:
    spec = Lowering(compile=12, kernel="late", start_ns=0)
    app, _ = live_app(spec.messages()[5:])
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        await pilot.press("home", "down")
        assert cursor_row(app).startswith("▼ ✓ late ")  # named from its label


@app_test
async def test_a_tick_while_the_detail_pane_is_torn_down_is_no_error() -> None:
    """The app closing removes the pane's body before its last tick may run: nothing is drawn."""
    app, _ = live_app(live_stream())
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        await app.detail.query_one(Static).remove()
        shown = app.detail.details
        app.following = False
        app.view.select(app.pass_tree.compiles[0])
        app.refresh_views()  # the cursor moved, and nothing is left to describe it in
        assert app.detail.details is shown
