"""The flame view's look comes from its stylesheet: bar colours, marks and unbalanced ranges
are component classes an app can restyle, and a change of CSS or theme repaints cached rows."""

from __future__ import annotations

import numpy as np
from rich.color import Color
from rich.segment import Segment
from textual.app import App, ComposeResult
from ui_driving import app_test

from iket_tui.model.flame_layout import PALETTE_SIZE
from iket_tui.model.launches import Launch
from iket_tui.ring.events import EventInfo, ModuleEvents
from iket_tui.ring.layout import EVENT_DTYPE, KIND_END, KIND_MARK, KIND_START
from iket_tui.ui.flame_view import FlameView

END = 31
MODULE = ModuleEvents(
    module=0,
    id_bits=5,
    kernels=("gemm",),
    events=(EventInfo(1, "tile", "range"), EventInfo(2, "mma", "range"), EventInfo(3, "k_step", "mark")),
)


def gemm_launch() -> Launch:
    """One block on SM 3, one warp: a tile range over 0..400 ns holding an mma over 100..300 ns
    and a k_step mark at 350 ns; then an mma that never ends, and a last mark."""
    rows = [
        (1000, KIND_START, 1),
        (1100, KIND_START, 2),
        (1300, KIND_END, END),
        (1350, KIND_MARK, 3),
        (1400, KIND_END, END),
        (1450, KIND_START, 2),
        (1500, KIND_MARK, 3),
    ]
    events = np.zeros(len(rows), dtype=EVENT_DTYPE)
    for index, (t_ns, kind, event) in enumerate(rows):
        events[index]["t_ns"], events[index]["kind"], events[index]["event"] = t_ns, kind, event
        events[index]["sm"] = 3
    launch = Launch(key=(0, 0, 0, 1), kernel="gemm", module=MODULE, order=0)
    launch.add(events)
    return launch


class FlameApp(App[None]):
    CSS = """
    FlameView.-mono > .flame-view--bar-0 { background: red; }
    FlameView.-mono > .flame-view--bar-1 { background: blue; }
    """

    def compose(self) -> ComposeResult:
        yield FlameView()


def segment_of(view: FlameView, y: int, text: str) -> Segment:
    return next(segment for segment in view.render_line(y) if text in segment.text)


def background(view: FlameView, y: int, text: str) -> str | None:
    style = segment_of(view, y, text).style
    assert style is not None and style.bgcolor is not None
    return style.bgcolor.name


@app_test
async def test_bars_marks_and_unbalanced_ranges_are_styled_by_the_stylesheet() -> None:
    app = FlameApp()
    async with app.run_test(size=(60, 8)) as pilot:
        view = app.query_one(FlameView)
        view.show_launch(gemm_launch())
        await pilot.pause()
        lines = [view.render_line(y).text for y in range(3)]
        assert lines[0].startswith(" block (0,0) · SM 3")
        assert "tile" in lines[1] and "mma" in lines[2] and "│" in lines[1]
        assert background(view, 1, "tile") == "#1f77b4"
        assert background(view, 2, "mma") == "#ff7f0e"
        mark = segment_of(view, 1, "│").style
        assert mark is not None and mark.bold and mark.color == Color.parse("color(7)")
        open_mma = segment_of(view, 1, "mma…").style
        assert open_mma is not None and open_mma.italic and open_mma.underline
        assert background(view, 1, "mma…") == "#ff7f0e"
        title = segment_of(view, 0, "block").style
        assert title is not None and title.bold and title.dim
        backgrounds = {
            view.get_component_rich_style(f"flame-view--bar-{tone}", partial=True).bgcolor
            for tone in range(PALETTE_SIZE)
        }
        assert None not in backgrounds and len(backgrounds) == PALETTE_SIZE


@app_test
async def test_a_change_of_css_or_theme_repaints_the_rows_already_painted() -> None:
    app = FlameApp()
    async with app.run_test(size=(60, 8)) as pilot:
        view = app.query_one(FlameView)
        view.show_launch(gemm_launch())
        await pilot.pause()
        assert background(view, 1, "tile") == "#1f77b4"
        view.add_class("-mono")
        await pilot.pause()
        assert background(view, 1, "tile") == "#ff0000" and background(view, 2, "mma") == "#0000ff"
        empty = view.render_line(3).text
        assert not empty.strip()
        dark = background(view, 3, " ")
        app.theme = "textual-light"
        await pilot.pause()
        assert background(view, 3, " ") != dark
        assert background(view, 1, "tile") == "#ff0000"


@app_test
async def test_the_view_describes_the_cursor_and_its_row_in_words() -> None:
    app = FlameApp()
    async with app.run_test(size=(60, 8)) as pilot:
        view = app.query_one(FlameView)
        assert view.describe_under_cursor() == "no kernel launch selected" and view.describe_row() == []
        view.show_launch(gemm_launch())
        await pilot.pause()
        assert view.describe_under_cursor().startswith("block (0,0) · SM 3 · warp 0 · t+")
        assert " · range tile from t+0 ns, 400 ns" in view.describe_under_cursor()
        assert view.describe_row()[3:7] == [
            "warp       0",
            "ranges     3 (1 unbalanced)",
            "why        1 range not closed (not reached, or the end lost)",
            "marks      2",
        ]
