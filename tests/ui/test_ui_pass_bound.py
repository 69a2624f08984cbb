"""A session past its bound on passes, as the user sees it: the process row says how many
earlier compiles were summarised, and a summarised compile says in one line that its passes
were let go, in its row, its pass context's row and the detail pane."""

from __future__ import annotations

from ui_driving import app_test, cursor_row, tree_text, wait_for_batches
from ui_fakes import FakeSource, FrozenClock, batch

from iket_tui.model.session import Session
from iket_tui.model.synthetic import live_stream
from iket_tui.model.visible_rows import Row
from iket_tui.sources.base import SourceState
from iket_tui.ui.app import IketApp
from iket_tui.ui.detail_pane import DetailPane
from iket_tui.ui.row_painter import SUMMARISED_PASSES, SUMMARISED_ROW, Columns, RowState, RowStyles, paint_row

WIDE = (160, 48)


def _paint(session: Session, row: Row) -> str:
    look = RowState(expanded=True, cursor=False, now_ns=session.last_t_ns, search="")
    return paint_row(session.tree, row, look, Columns(160), RowStyles()).text


def test_the_rows_of_a_summarised_session() -> None:
    session = Session(max_passes=10)
    session.apply(live_stream(compiles=6, fail=(3,)))
    tree = session.tree
    assert tree.summarised == 4  # the failed compile and the running one keep their passes
    assert "6 compiles, 1 failed, 1 running, 4 earlier summarised (passes let go)" in _paint(
        session, Row(tree.process, 0, True)
    )
    first = tree.compiles[0]
    assert "85 passes summarised" in _paint(session, Row(first, 1, True))
    context = first.context_order[0]
    assert SUMMARISED_ROW in _paint(session, Row(context, 2, False))
    failed = tree.compiles[3]
    assert "summarised" not in _paint(session, Row(failed, 1, True))


def test_a_session_within_its_bound_says_nothing_of_summaries() -> None:
    session = Session()
    session.apply(live_stream(compiles=6, fail=(3,)))
    assert "summarised" not in _paint(session, Row(session.tree.process, 0, True))


@app_test
async def test_the_tree_and_the_detail_pane_of_a_summarised_compile() -> None:
    source = FakeSource([batch(live_stream(compiles=6, fail=(3,)), state=SourceState.LIVE)], stay_open=True)
    app = IketApp(source, clock=FrozenClock(), max_passes=10)  # type: ignore[arg-type]
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        await pilot.press("home")
        assert "4 earlier summarised (passes let go)" in tree_text(app).splitlines()[0]
        await pilot.press("down")
        assert cursor_row(app).startswith("▶ ✓ gemm_128x128")
        assert "85 passes summarised" in cursor_row(app)
        shown = app.query_one(DetailPane).details
        assert shown is not None
        assert f"passes: 85 in 1 pass context, summarised: {SUMMARISED_PASSES}" in shown.text()
        await pilot.press("right")
        await pilot.press("down")
        assert cursor_row(app).startswith("✓ pass context 1")  # nothing below it to expand
        assert SUMMARISED_ROW in cursor_row(app)
        await pilot.press("down")
        assert "codegen" in cursor_row(app)  # no pass rows below it
