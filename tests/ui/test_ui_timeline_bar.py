"""The replay's timeline bar and jump keys over the bundled H200 demo recording: the bar marks
its failures and where the replay stands, the keys and a click jump, back goes back, and the
tree and the kernels screen after a jump show what a replay from the start shows there."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable, Input
from ui_driving import app_test, tree_text, wait_until
from ui_fakes import FrozenClock

from iket_tui.model.session import Session
from iket_tui.protocol import messages as m
from iket_tui.sources.checkpoints import Checkpoint, ReplayCheckpoints
from iket_tui.sources.reading import RecordingReader
from iket_tui.sources.replay import RecordingSource
from iket_tui.sources.timeline import scan_timeline
from iket_tui.ui.app import IketApp
from iket_tui.ui.kernels_screen import KernelsScreen
from iket_tui.ui.timeline_bar import TimelineBar, time_label, track_cells
from tests.sources.test_replay_seek import _state as state

DEMO = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"
WIDE = (160, 48)


def _from_start(t_ns: int) -> Session:
    """The model a replay from the start has built when its clock reaches ``t_ns``."""
    items = []
    for item in RecordingReader(DEMO, rows=True):
        t = m.t_ns_of(item)
        if t is not None and t > 0 and t > t_ns:
            break
        items.append(item)
    session = Session()
    session.apply(items)
    return session


def _compiles(session: Session) -> list[tuple[str | None, str, int]]:
    return [
        (comp.kernel, str(comp.status), sum(len(c.passes) for c in comp.context_order))
        for comp in session.tree.compiles
    ]


def test_the_track_marks_the_failures_compiles_and_where_the_replay_stands() -> None:
    timeline = scan_timeline(DEMO)
    cells = track_cells(timeline, timeline.start_ns + int(18.8e9), 59)  # a column is half a second
    text = "".join(cell.text for cell in cells)
    assert text.count("✗") == 2 and text.index("✗") == 37 and text.rindex("✗") == 41  # 18.77 s and 20.89 s
    assert text[0] == "│" and text[-1] == "│"  # the hello, the bye
    assert cells[37].style == "timeline-bar--position"  # standing on the failure: its mark, in the position's style
    assert set(text[1:10]) == {"━"} and text[45] == "─"  # played up to where it stands, not past it
    assert time_label(timeline, timeline.start_ns + int(18.8e9)) == " 18.8 / 29.5 s "
    assert time_label(None, None) == " reading the recording's timeline… "
    assert time_label(timeline, timeline.start_ns, "speed 2x") == " 0.0 / 29.5 s speed 2x "


@app_test
async def test_at_80_columns_the_bar_says_how_the_replay_plays() -> None:
    app = IketApp(RecordingSource(DEMO, seekable=True))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.jumps.timeline is not None, "the timeline")
        bar = app.query_one("#timeline")
        await wait_until(pilot, lambda: "s speed 1x " in bar.render_line(0).text, "the speed on the bar")
        await pilot.press("right_square_bracket")
        await wait_until(pilot, lambda: "s speed 2x " in bar.render_line(0).text, "the faster speed")
        await pilot.press("space")
        await wait_until(pilot, lambda: "s speed 2x  paused " in bar.render_line(0).text, "paused")


@app_test
async def test_jump_keys_and_back_show_what_a_replay_from_the_start_shows_there() -> None:
    app = IketApp(RecordingSource(DEMO, start_paused=True, seekable=True))
    async with app.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: app.jumps.timeline is not None, "the timeline")
        timeline = app.jumps.timeline
        assert timeline is not None
        bar = app.query_one("#timeline")
        assert bar.region.y == app.header.region.bottom  # right under the header
        await pilot.press("g")  # the first compile
        first = timeline.marks[1].t_ns
        await wait_until(pilot, lambda: app.seekable is not None and app.seekable.position_t_ns == first, "compile 1")
        assert _compiles(app.session) == _compiles(_from_start(first)) == [("vector_add", "running", 0)]
        await pilot.press("x")  # the first failure
        failure = next(mark.t_ns for mark in timeline.marks if mark.what == "compile layout_conflict failed")
        await wait_until(pilot, lambda: len(app.session.tree.compiles) == 5, "the failed compile")
        assert _compiles(app.session) == _compiles(_from_start(failure))
        assert _compiles(app.session)[-1][:2] == ("layout_conflict", "failed")
        assert " 18.8 / 29.5 s " in bar.render_line(0).text
        await pilot.press("backspace")  # back to the first compile: the model is built anew
        await wait_until(pilot, lambda: len(app.session.tree.compiles) == 1, "back at compile 1")
        assert _compiles(app.session) == _compiles(_from_start(first))
        assert "vector_add" in "\n".join(app.view.render_line(y).text for y in range(app.view.size.height))


@app_test
async def test_a_click_on_the_bar_jumps_there_and_the_kernels_screen_shows_the_launches_then() -> None:
    app = IketApp(RecordingSource(DEMO, start_paused=True, seekable=True))
    async with app.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: app.jumps.timeline is not None, "the timeline")
        bar = app.query_one("#timeline")
        label = len(time_label(app.jumps.timeline, None, bar.playing))
        await pilot.click("#timeline", offset=(bar.size.width - 2, 0))  # the last column: the end
        await wait_until(pilot, lambda: len(app.session.tree.compiles) == 9, "every compile")
        await pilot.click("#timeline", offset=(label + 1, 0))  # near the start: before any compile
        await wait_until(pilot, lambda: not app.session.tree.compiles, "the start")
        assert not app.session.kernels.launches
        await pilot.click("#timeline", offset=(bar.size.width - 2, 0))
        await wait_until(pilot, lambda: len(app.session.kernels.launches) == 3, "the launches")
        await pilot.press("K")
        await wait_until(pilot, lambda: isinstance(app.screen, KernelsScreen), "the kernels screen")
        table = app.screen.query_one("#launches", DataTable)
        await wait_until(pilot, lambda: table.row_count == 3, "three launches listed")


@app_test
async def test_the_jump_keys_type_into_the_search_and_jump_nowhere() -> None:
    app = IketApp(RecordingSource(DEMO, start_paused=True, seekable=True))
    async with app.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: app.jumps.timeline is not None, "the timeline")
        await pilot.press("slash", "x", "g", "o", "u", "w", "backspace")
        assert app.search_bar.query_one(Input).value == "xgou"
        await pilot.pause(0.3)
        assert app.seekable is not None and app.seekable.position_t_ns is None  # no jump was made


@app_test
async def test_jumps_from_the_replays_checkpoints_show_what_a_replay_from_the_start_shows_there() -> None:
    app = IketApp(RecordingSource(DEMO, start_paused=True, seekable=True))
    checkpoints = ReplayCheckpoints(DEMO, app._new_session, every=40, chunk_size=4096)
    app.checkpoints = checkpoints
    started_from: list[object] = []
    start_for = checkpoints.start_for

    def spied(t_ns: int, here: int | None) -> Checkpoint | None:
        point = start_for(t_ns, here)
        started_from.append(point)
        return point

    checkpoints.start_for = spied  # type: ignore[method-assign]
    async with app.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: app.jumps.timeline is not None and checkpoints.done, "the checkpoints")
        assert checkpoints.error is None and checkpoints.count > 5
        timeline = app.jumps.timeline
        assert timeline is not None
        replay = app.seekable
        assert replay is not None
        # forwards far, back, forwards past the next checkpoint, back to the start, past the failures
        for fraction in (0.9, 0.3, 0.7, 0.02, 0.75):
            t_ns = timeline.start_ns + int(timeline.length_ns * fraction)
            expected = _from_start(t_ns)
            app.post_message(TimelineBar.Jump(app.timeline_bar, t_ns))
            last = expected.last_t_ns
            await wait_until(pilot, lambda last=last: app.session.last_t_ns == last, f"the jump to {fraction}")
            await pilot.pause()
            assert state(app.session) == state(expected), fraction
        assert sum(point is not None for point in started_from) >= 3  # read on from a checkpoint
        failed = [comp for comp in app.session.tree.compiles if comp.failing is not None]
        assert failed and all(
            app.rows.index_of(comp.failing) is not None for comp in failed
        )  # shown, as from the start


async def _jumped_screen(target: int, *, checkpoints: bool) -> tuple[int, str]:
    app = IketApp(RecordingSource(DEMO, start_paused=True, seekable=True))
    app.checkpoints = ReplayCheckpoints(DEMO, app._new_session, every=40, chunk_size=4096) if checkpoints else None
    async with app.run_test(size=WIDE) as pilot:
        made = app.checkpoints
        await wait_until(pilot, lambda: app.jumps.timeline is not None and (made is None or made.done), "ready")
        app.post_message(TimelineBar.Jump(app.timeline_bar, target))
        await wait_until(pilot, lambda: app.seekable is not None and app.seekable.position_t_ns == target, "the jump")
        await pilot.pause()
        return app.now_ns(), tree_text(app)


@app_test
async def test_a_jump_to_where_a_checkpoint_stands_shows_the_running_times_a_replay_from_the_start_shows() -> None:
    made = ReplayCheckpoints(DEMO, Session, every=40, chunk_size=4096)
    made.build()
    point = made.before(1 << 62)
    assert point is not None
    target = point.t_ns  # nothing to apply after the checkpoint: the clock must come from it
    from_start = await _jumped_screen(target, checkpoints=False)
    from_checkpoint = await _jumped_screen(target, checkpoints=True)
    assert from_checkpoint == from_start and from_start[0] >= target


@app_test
async def test_a_replay_paused_for_a_minute_is_neither_live_nor_unresponsive() -> None:
    clock = FrozenClock()
    app = IketApp(RecordingSource(DEMO, start_paused=True, seekable=True), clock=clock)
    async with app.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: app.jumps.timeline is not None, "the timeline")
        await pilot.press("g")  # the first compile, then nothing more arrives while paused
        await wait_until(pilot, lambda: len(app.session.tree.compiles) == 1, "compile 1")
        clock.advance(60)
        state = app._header_state()
        assert (state.connection, state.silent_for) == ("", "")
        line = app.header.text()
        assert (
            "unresponsive" not in line
            and "live" not in line
            and line.startswith("recording h200-demo.msgpack of pid 471")
        )
