"""What the header, the tree and the footer say as the terminal narrows: the header says what is
wrong first and drops whole items from its end, the tree's rows keep their names and drop whole
columns (a duration never loses its unit), and the footer drops whole keys."""

from __future__ import annotations

import re

from textual.pilot import Pilot
from textual.widgets._footer import FooterKey
from ui_driving import app_test, wait_for_batches, wait_until
from ui_fakes import FakeReplay, FakeSource, FrozenClock, batch

from iket_tui.model.session import Session
from iket_tui.model.synthetic import live_stream
from iket_tui.model.visible_rows import VisibleRows
from iket_tui.sources.base import SourceState
from iket_tui.ui import units
from iket_tui.ui.app import IketApp
from iket_tui.ui.header_bar import HeaderItem, fit_items, shorter_forms
from iket_tui.ui.row_painter import Columns, RowState, RowStyles, paint_row

STUCK_FOR_NS = 42_000_000_000


def stuck_and_failed() -> IketApp:
    """A live session whose sixth compile sits in ``tl.LayoutInference`` past the threshold,
    after a third that failed."""
    source = FakeSource([batch(live_stream(running_for_ns=STUCK_FOR_NS), state=SourceState.LIVE)], stay_open=True)
    return IketApp(source, clock=FrozenClock(), stuck_after_s=30.0)


async def three_quiet_seconds(pilot: Pilot[int], app: IketApp) -> None:
    """The stream applied, then three seconds with no event: the connection reads quiet."""
    await wait_for_batches(pilot, app, 1)
    clock = app.clock
    assert isinstance(clock, FrozenClock)
    clock.advance(3.0)
    app.refresh_views()
    await pilot.pause()


@app_test
async def test_the_header_says_the_stuck_pass_and_the_failed_compile_before_the_connection() -> None:
    app = stuck_and_failed()
    async with app.run_test(size=(160, 48)) as pilot:
        await three_quiet_seconds(pilot, app)
        text = app.header.shown_text()
        assert text.startswith("stuck: tl.LayoutInference 45.0 s  1 compile failed  quiet  pid 4242  "), text
        assert text.index("quiet") < text.index("pid 4242") < text.index("ev/s") < text.index("0 dropped")


@app_test
async def test_a_launch_with_a_quiet_warp_is_said_before_the_connection() -> None:
    from test_ui_kernels_busy import AGENT_T, RING, TRACING, busy_neighbour

    from iket_tui.demo.waiting_launch import TRACED_TABLE
    from iket_tui.ring.layout import DEFAULT_LAYOUT
    from iket_tui.ring.wire import kernel_module

    table = kernel_module(TRACED_TABLE, ring_id=RING, layout=DEFAULT_LAYOUT, t_ns=AGENT_T)
    stream = [*live_stream(), {**TRACING, "t_ns": AGENT_T}, table, *busy_neighbour(10)]
    app = IketApp(FakeSource([batch(stream, state=SourceState.LIVE)], stay_open=True), clock=FrozenClock())
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for_batches(pilot, app, 1)
        await wait_until(pilot, lambda: "warp quiet" in app.header.shown_text(), "the quiet launch in the header")
        text = app.header.shown_text()
        assert text.startswith("1 compile failed  kernels: 13 ev, 1 launch with a warp quiet 10.0 s  live  pid 4242")


@app_test
async def test_at_80_columns_the_header_drops_whole_items_from_its_end() -> None:
    app = stuck_and_failed()
    async with app.run_test(size=(80, 24)) as pilot:
        await three_quiet_seconds(pilot, app)
        assert app.header.shown_text() == "stuck: tl.LayoutInference 45.0 s  1 compile failed  quiet  pid 4242"
        assert "python kernels/demo.py" in app.header.text()  # said where the width holds it
        await pilot.resize_terminal(160, 48)
        await pilot.pause()
        assert "pid 4242  python kernels/demo.py" in app.header.shown_text()


def test_an_item_is_shown_in_its_longest_form_that_fits_or_not_at_all() -> None:
    target = "recording my.msgpack of pid 19907  ·  pid 19907  python train.py --steps 10"
    assert shorter_forms(target) == (
        target,
        "recording my.msgpack of pid 19907  pid 19907",
        "recording my.msgpack of pid 19907",
    )
    items = [HeaderItem("connection", ("live",)), HeaderItem("target", shorter_forms(target))]
    items.append(HeaderItem("rate", ("12 ev/s  512 events", "12 ev/s")))
    assert fit_items(items, 100) == [("connection", "live"), ("target", target), ("rate", "12 ev/s")]
    assert fit_items(items, 48) == [("connection", "live"), ("target", "recording my.msgpack of pid 19907")]
    assert fit_items(items, 30) == [("connection", "live")]  # never `recording my.msgpack of pid 1…`
    assert fit_items(items[1:], 10) == [("target", "recording my.msgpack of pid 19907")]  # the first, cut on screen


BARE_NUMBER_AT_END = re.compile(r"\d[\d.,]*$")


def test_below_80_columns_no_row_loses_a_unit_and_names_keep_their_room() -> None:
    from test_ui_compiler_processes import stuck_in_ptxas

    session = Session(stuck_after_ns=30_000_000_000)
    session.apply(live_stream(running_for_ns=STUCK_FOR_NS))
    session.apply(stuck_in_ptxas()[1:])  # a codegen step with nvcc and, below it, ptxas stuck
    tree = session.tree
    rows = VisibleRows(tree)
    rows.expand_all()
    rows.refresh()
    now = session.last_t_ns
    painted = [row for index in range(len(rows)) if (row := rows.row(index)) is not None]
    assert max(row.level for row in painted) >= 4
    for width in range(30, 80):
        columns = Columns(width)
        for row in painted:
            strip = paint_row(tree, row, RowState(expanded=True, cursor=False, now_ns=now), columns, RowStyles())
            text = strip.text
            assert strip.cell_length == width, (width, text)  # nothing runs past the edge to be cut
            assert not BARE_NUMBER_AT_END.search(text.rstrip()), (width, text)
            if "total" in columns.shown and text[columns.name_width :].strip():
                from iket_tui.model import timing

                assert units.duration(timing.inclusive_ns(row.node, now)) in text, (width, text)
    assert Columns(86).shown == {"status", "phase", "total"}
    assert Columns(78).shown == {"status", "total"}
    assert Columns(68).shown == {"total"} and Columns(68).name_width >= 48
    assert Columns(48).shown == set()


def footer_keys(app: IketApp) -> list[tuple[str, int]]:
    """The footer's keys on screen: each description and where it ends."""
    return [(key.description, key.region.right) for key in app.screen.query(FooterKey)]


@app_test
async def test_the_footer_drops_whole_keys_from_its_end() -> None:
    app = stuck_and_failed()
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for_batches(pilot, app, 1)
        await pilot.pause()
        keys = footer_keys(app)
        assert [name for name, _ in keys] == [
            "Toggle",
            "Quit",
            "Help",
            "Search",
            "Follow",
            "Pause",
            "Details",
            "Kernels",
        ]
        assert all(right <= 80 for _, right in keys)
        await pilot.resize_terminal(160, 48)
        await wait_until(pilot, lambda: len(footer_keys(app)) > len(keys), "the keys the width holds again")
        assert [name for name, _ in footer_keys(app)][-2:] == ["Stacks", "Timing"]


@app_test
async def test_a_replays_footer_at_120_columns_ends_with_a_whole_key() -> None:
    app = IketApp(FakeReplay([batch(live_stream(), state=SourceState.LIVE)], stay_open=True), clock=FrozenClock())
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for_batches(pilot, app, 1)
        await pilot.pause()
        keys = footer_keys(app)
        assert keys and all(right <= 120 for _, right in keys), keys
        assert "Faster" not in [name for name, _ in keys]  # dropped whole, not `] Fa`


@app_test
async def test_the_timing_title_leaves_out_what_does_not_fit_whole() -> None:
    from test_ui_timing_snapshots import TimingApp
    from textual.widgets import Static

    session = Session()
    session.apply(live_stream())  # the sixth compile is running
    app = TimingApp(session)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        title = str(app.screen.query_one("#timing-title", Static).render())
        assert title == "6 compiles, 388 passes, 3.81 s: passes 53.6%, codegen 46.0%, other 0.4%"
        await pilot.resize_terminal(160, 48)
        await pilot.pause()
        title = str(app.screen.query_one("#timing-title", Static).render())
        assert title.endswith("other 0.4% · ▶ 1 running, timed so far")


@app_test
async def test_the_detail_pane_goes_below_the_tree_or_beside_it_as_the_terminal_is_resized() -> None:
    app = stuck_and_failed()
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for_batches(pilot, app, 1)

        def below() -> bool:
            return app.detail.region.y > app.view.region.y and app.detail.region.x == app.view.region.x

        assert below()
        await pilot.resize_terminal(160, 48)
        await wait_until(pilot, lambda: not below(), "the pane beside the tree")
        assert app.detail.region.x > app.view.region.right - 1
        await pilot.resize_terminal(80, 24)
        await wait_until(pilot, below, "the pane below the tree again")


@app_test
async def test_a_replays_header_shortens_the_target_before_it_drops_the_counts() -> None:
    from pathlib import Path

    from iket_tui.sources.replay import RecordingSource

    recording = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"
    app = IketApp(RecordingSource(recording, speed=0.0))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.source_state is SourceState.ENDED, "the replay to end")
        await pilot.pause()
        assert (
            app.header.shown_text() == "2 compiles failed  ended  recording h200-demo.msgpack of pid 471  1,534 events"
        )
        await pilot.resize_terminal(150, 40)
        await wait_until(pilot, lambda: "1,534 events" in app.header.shown_text(), "the counts the width holds")
        assert app.header.shown_text().startswith(
            "2 compiles failed  ended  recording h200-demo.msgpack of pid 471  0 ev/s  1,534 events  0 dropped"
        )
        assert "pid 471: /opt/torch/.venv/bin/python3 -m iket_tui.demo.program" in app.header.text()


@app_test
async def test_at_80_columns_a_long_help_line_goes_on_under_its_own_description() -> None:
    from textual.geometry import Region
    from textual.widgets import Static

    from iket_tui.ui.help_screen import HelpScreen

    app = stuck_and_failed()
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for_batches(pilot, app, 1)
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        await pilot.pause()
        body = app.screen.query_one(Static)
        lines = [strip.text for strip in body.render_lines(Region(0, 0, body.size.width, body.size.height))]
        first = next(i for i, line in enumerate(lines) if "collapse or go to the parent" in line)
        assert "the first child" not in lines[first]  # wrapped at this width
        assert lines[first + 1].index("the first child") == lines[first].index("collapse or go to the parent")


@app_test
async def test_below_80_columns_every_item_the_header_shows_is_whole() -> None:
    from rich.cells import cell_len
    from textual.widgets import Static

    app = stuck_and_failed()
    async with app.run_test(size=(79, 24)) as pilot:
        await three_quiet_seconds(pilot, app)
        for width in (79, 70, 60, 50, 40):
            await pilot.resize_terminal(width, 24)
            await pilot.pause()
            items = [widget for widget in app.query("#header-status > Static") if widget.display]
            assert items and str(items[0].render()).startswith("stuck: tl.LayoutInference 45.0 s"), width
            for item in items:
                assert isinstance(item, Static)
                text = str(item.render())
                assert item.region.right <= width and item.content_size.width >= cell_len(text), (width, text)
            assert "  ".join(str(item.render()) for item in items) == app.header.shown_text()


@app_test
async def test_below_the_tree_the_detail_pane_shows_a_failure_s_error_first() -> None:
    from textual.geometry import Region
    from textual.widgets import Static

    source = FakeSource([batch(live_stream(), state=SourceState.LIVE)], stay_open=True)
    app = IketApp(source, clock=FrozenClock(), follow=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for_batches(pilot, app, 1)
        failing = next(comp.failing for comp in app.pass_tree.compiles if comp.failing is not None)
        app.view.select(failing, by_user=True)
        await wait_until(pilot, lambda: "failed" in (app.detail.details.text() if app.detail.details else ""), "it")
        await pilot.pause()

        def pane_lines() -> list[str]:
            pane = app.detail
            body = pane.query_one(Static)
            top = int(pane.scroll_offset.y)
            lines = body.render_lines(Region(0, top, body.size.width, pane.scrollable_content_region.height))
            return [strip.text.strip() for strip in lines]

        shown = pane_lines()
        assert shown[0] == "pass tl.LayoutInference"
        assert shown[1].startswith("InternalError: Layout infer conflict"), shown  # on screen, not below it
        await pilot.resize_terminal(160, 48)
        await wait_until(pilot, lambda: pane_lines()[1].startswith("status"), "the fields first beside the tree")
