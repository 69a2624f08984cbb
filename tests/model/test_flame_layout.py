"""The flame layout's choice of colour: a palette index per bar, by event (or by block when
grouped by SM), and which bars are unbalanced ranges."""

from __future__ import annotations

import numpy as np
from test_flame_text import END, MMA, TILE, launch_of, small_launch

from iket_tui.model.flame_layout import PALETTE_SIZE, FlameLayout, Run, SmLayout, Window, event_of, event_tones
from iket_tui.ring.layout import KIND_END, KIND_MARK, KIND_START


def bars(runs: list[Run]) -> list[tuple[str, int, bool]]:
    return [(run.text.strip(), run.tone, run.unbalanced) for run in runs if run.what is not None]


def test_consecutive_events_get_different_colours_that_wrap_around_the_palette() -> None:
    tones = event_tones(np.array([1, 2, 3, PALETTE_SIZE, PALETTE_SIZE + 1, 0], dtype=np.uint8))
    assert tones.tolist() == [0, 1, 2, PALETTE_SIZE - 1, 0, PALETTE_SIZE - 1]


def test_each_bar_carries_its_event_colour_and_whether_it_is_unbalanced() -> None:
    launch = small_launch()
    layout = FlameLayout(launch.spans(), launch.duration_ns)
    window = Window(0.0, 4.0, 12)
    tile, mma = layout.rows[1], layout.rows[2]
    assert bars(layout.paint(tile, window, launch.event_name)) == [
        ("▏tile", TILE - 1, False),
        ("│", -1, False),  # a mark has no bar colour
        ("", TILE - 1, False),
    ]
    assert bars(layout.paint(mma, window, launch.event_name)) == [("▏mm", MMA - 1, False)]
    no_end = layout.rows[layout.block_row[1] + 1]
    assert bars(layout.paint(no_end, window, launch.event_name)) == [  # a range without an end, cut by a mark
        ("▏", MMA - 1, True),
        ("│", -1, False),
        ("m", MMA - 1, True),
    ]


def test_grouped_by_sm_each_block_has_its_own_colour() -> None:
    launch = launch_of(
        *[(1000 + 10 * x, x, 0, 7, KIND_START, TILE, 0) for x in range(PALETTE_SIZE + 1)],
        *[(1005 + 10 * x, x, 0, 7, KIND_END, END, 0) for x in range(PALETTE_SIZE + 1)],
    )
    layout = SmLayout(launch.spans(), launch.duration_ns)
    runs = layout.paint(layout.rows[0], Window(0.0, 1.0, 10 * (PALETTE_SIZE + 1)), launch.event_name)
    assert [(run.what, run.tone) for run in runs if run.what is not None] == [
        (("block", block), block % PALETTE_SIZE) for block in range(PALETTE_SIZE + 1)
    ]


def test_the_event_of_a_span_or_mark_and_none_for_a_block() -> None:
    spans = small_launch().spans()
    assert event_of(spans, ("span", 0)) == int(spans.spans["event"][0])
    assert event_of(spans, ("mark", 0)) == int(spans.marks["event"][0])
    assert event_of(spans, ("block", 0)) is None


def test_a_name_cut_by_a_mark_near_its_start_is_drawn_whole_after_the_mark() -> None:
    # A tile range over 0..1000 ns with a mark at 20 ns: at 10 ns a column the mark falls on the
    # name's third column; the name is drawn whole after it, where there is room, the bar's begin kept.
    launch = launch_of(
        (1000, 0, 0, 3, KIND_START, TILE, 0), (1020, 0, 0, 3, KIND_MARK, 3, 0), (2000, 0, 0, 3, KIND_END, END, 0)
    )
    layout = FlameLayout(launch.spans(), launch.duration_ns)
    runs = layout.paint(layout.rows[1], Window(0.0, 10.0, 20), launch.event_name)
    assert "".join(run.text for run in runs) == "▏ │tile" + " " * 13
    narrow = layout.paint(layout.rows[1], Window(0.0, 10.0, 5), launch.event_name)
    assert "".join(run.text for run in narrow) == "▏t│il"  # no room for it whole: it goes on where it stopped
