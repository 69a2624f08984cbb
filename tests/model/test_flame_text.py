"""What the flame view says, derived without an app: the cursor's line, a row's detail, the
time axis, over a small launch with literal expected text."""

from __future__ import annotations

import struct

import numpy as np

from iket_tui.model.flame_layout import FlameLayout, SmLayout, Window
from iket_tui.model.flame_text import (
    EVICTED,
    NO_LAUNCH,
    describe_cursor,
    describe_row,
    payload_text,
    ruler,
)
from iket_tui.model.launches import Launch
from iket_tui.ring.events import EventInfo, ModuleEvents
from iket_tui.ring.layout import EVENT_DTYPE, KIND_END, KIND_MARK, KIND_START

END = 31
TILE, MMA, K_STEP = 1, 2, 3
INT32, FLOAT32 = 1, 3
MODULE = ModuleEvents(
    module=0,
    id_bits=5,
    kernels=("gemm",),
    events=(
        EventInfo(TILE, "tile", "range", "int32"),
        EventInfo(MMA, "mma", "range"),
        EventInfo(K_STEP, "k_step", "mark", "float32"),
    ),
)


def launch_of(*rows: tuple[int, int, int, int, int, int, int]) -> Launch:
    """A launch of (t_ns, block_x, warp, sm, kind, event, payload) events."""
    events = np.zeros(len(rows), dtype=EVENT_DTYPE)
    for index, (t_ns, block_x, warp, sm, kind, event, payload) in enumerate(rows):
        events[index]["t_ns"] = t_ns
        events[index]["block_x"] = block_x
        events[index]["warp"] = warp
        events[index]["sm"] = sm
        events[index]["kind"] = kind
        events[index]["event"] = event
        events[index]["payload"] = payload
        events[index]["payload_type"] = {TILE: INT32, K_STEP: FLOAT32}.get(event, 0) if kind != KIND_END else 0
    launch = Launch(key=(0, 0, 0, 1), kernel="gemm", module=MODULE, order=0)
    launch.add(events)
    return launch


def small_launch() -> Launch:
    """Block 0 on SM 3: warp 0 tiles (mma inside, a k_step mark), warp 1 ends a range it never
    started; block 1 on SM 5 starts an mma it never ends."""
    float_bits = int.from_bytes(struct.pack("<f", 1.5), "little")
    return launch_of(
        (1000, 0, 0, 3, KIND_START, TILE, (1 << 32) - 7),  # payload -7 as int32
        (1010, 0, 0, 3, KIND_START, MMA, 0),
        (1020, 0, 0, 3, KIND_END, END, 0),
        (1025, 0, 0, 3, KIND_MARK, K_STEP, float_bits),
        (1040, 0, 0, 3, KIND_END, END, 0),
        (1030, 0, 1, 3, KIND_END, END, 0),
        (1030, 1, 0, 5, KIND_START, MMA, 0),
        (1032, 1, 0, 5, KIND_MARK, K_STEP, 0),
    )


WINDOW = Window(0.0, 4.0, 12)  # column c is the time 4c + 2 ns


def test_a_payload_reads_as_its_type() -> None:
    assert payload_text(0, 5) == ""
    assert payload_text(1, (1 << 32) - 1) == " · payload -1 (int32)"
    assert payload_text(2, (1 << 32) - 1) == " · payload 4294967295 (uint32)"
    assert payload_text(3, int.from_bytes(struct.pack("<f", -0.25), "little")) == " · payload -0.25 (float32)"


def test_the_cursor_line_names_where_it_is_and_the_range_under_it() -> None:
    launch = small_launch()
    layout = FlameLayout(launch.spans(), launch.duration_ns)
    tile_row, mma_row = 1, 2  # block 0's title row, then warp 0 at depths 0 and 1
    assert describe_cursor(launch, layout, tile_row, WINDOW, 0) == (
        "block (0,0) · SM 3 · warp 0 · t+2 ns · 4 ns/col · range tile from t+0 ns, 40 ns · payload -7 (int32)"
    )
    assert describe_cursor(launch, layout, mma_row, WINDOW, 3) == (
        "block (0,0) · SM 3 · warp 0 · t+14 ns · 4 ns/col · range mma from t+10 ns, 10 ns"
    )
    assert describe_cursor(launch, layout, mma_row, WINDOW, 8) == "block (0,0) · SM 3 · warp 0 · t+34 ns · 4 ns/col"
    assert describe_cursor(launch, layout, 0, WINDOW, 0) == "block (0,0) · SM 3 · t+2 ns · 4 ns/col"


def test_the_cursor_line_of_a_mark_and_of_unbalanced_ranges() -> None:
    launch = small_launch()
    layout = FlameLayout(launch.spans(), launch.duration_ns)
    assert describe_cursor(launch, layout, 1, WINDOW, 6) == (
        "block (0,0) · SM 3 · warp 0 · t+26 ns · 4 ns/col · mark k_step at t+25 ns · payload 1.5 (float32)"
    )
    no_start = layout.rows.index(next(row for row in layout.rows if row.block == 0 and row.warp == 1))
    assert describe_cursor(launch, layout, no_start, WINDOW, 2) == (
        "block (0,0) · SM 3 · warp 1 · t+10 ns · 4 ns/col · range (end without a start) from before tracing saw it, "
        "ended t+30 ns"
    )
    no_end = layout.block_row[1] + 1
    assert describe_cursor(launch, layout, no_end, WINDOW, 9) == (
        "block (1,0) · SM 5 · warp 0 · t+38 ns · 4 ns/col · range mma from t+30 ns, no end recorded"
    )


def test_the_cursor_line_grouped_by_sm_names_the_block_under_it() -> None:
    launch = small_launch()
    layout = SmLayout(launch.spans(), launch.duration_ns)
    assert describe_cursor(launch, layout, 0, WINDOW, 1) == (
        "SM 3 · t+6 ns · 4 ns/col · block (0,0): 2 warps, t+0 ns to t+40 ns (40 ns)"
    )


def test_without_a_launch_or_its_events_the_cursor_line_says_so() -> None:
    launch = small_launch()
    assert describe_cursor(None, None, 0, WINDOW, 0) == NO_LAUNCH == "no kernel launch selected"
    layout = FlameLayout(launch.spans(), launch.duration_ns)
    launch.evict()
    assert describe_cursor(launch, layout, 0, WINDOW, 0) == EVICTED
    assert EVICTED.startswith("this launch was summarised to keep memory bounded")
    assert describe_row(launch, layout, 0) == []
    assert describe_row(None, None, 0) == []


def test_a_warp_row_lists_its_ranges_and_marks_by_event() -> None:
    launch = small_launch()
    layout = FlameLayout(launch.spans(), launch.duration_ns)
    assert describe_row(launch, layout, 1) == [
        "block (0,0) · SM 3",
        "warps      2",
        "ran        t+0 ns .. t+40 ns (40 ns)",
        "warp       0",
        "ranges     2",
        "marks      1",
        "  k_step           1",
        "  mma              1",
        "  tile             1",
    ]
    warp_1 = layout.rows.index(next(row for row in layout.rows if row.block == 0 and row.warp == 1))
    assert describe_row(launch, layout, warp_1)[3:] == [
        "warp       1",
        "ranges     1 (1 unbalanced)",
        "why        1 end without a start (lost, or before tracing)",
        "marks      0",
        "  (end without a start) 1",
    ]


def test_a_block_title_row_counts_all_its_warps() -> None:
    launch = small_launch()
    layout = FlameLayout(launch.spans(), launch.duration_ns)
    assert describe_row(launch, layout, 0)[3:] == [
        "ranges     3 (1 unbalanced)",
        "why        1 end without a start (lost, or before tracing)",
        "marks      1",
        "  (end without a start) 1",
        "  k_step           1",
        "  mma              1",
        "  tile             1",
    ]


def test_an_sm_row_lists_the_blocks_that_ran_there() -> None:
    launch = small_launch()
    layout = SmLayout(launch.spans(), launch.duration_ns)
    assert describe_row(launch, layout, 1) == [
        "SM 5",
        "1 blocks of this launch ran here:",
        "  block (1,0)  t+30 ns .. t+32 ns",
    ]


def test_the_time_axis_ticks_at_round_times_that_never_overlap() -> None:
    assert ruler(0.0, 10.0, 40) == "┊0 ns" + " " * 15 + "┊200 ns" + " " * 13  # a round step of 14 columns or more
    assert ruler(50.0, 10.0, 30) == " " * 15 + "┊200 ns" + " " * 8  # the first tick at or after the start
    asked_for_2 = ruler(0.0, 1_000.0, 60, spacing=2)  # every 10 columns at least, so labels never meet
    assert asked_for_2 == "┊0 ns     ┊10.0 µs  ┊20.0 µs  ┊30.0 µs  ┊40.0 µs  ┊50.0 µs  "
