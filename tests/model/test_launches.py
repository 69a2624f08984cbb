"""Launches and their spans: ranges paired per warp stack-wise, with literal expected spans."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from iket_tui.model.kernels import KernelTimeline
from iket_tui.model.launches import SPAN_NO_END, SPAN_NO_START, pair_ranges
from iket_tui.protocol import messages as m
from iket_tui.ring.layout import EVENT_DTYPE, KIND_END, KIND_MARK, KIND_START
from iket_tui.sources.reading import read_recording

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"
END = 31


def events(*rows: tuple[int, int, int, int, int]) -> np.ndarray:
    """(t_ns, block_x, warp, kind, event) rows, in the order a drain could deliver them."""
    out = np.zeros(len(rows), dtype=EVENT_DTYPE)
    for index, (t_ns, block_x, warp, kind, event) in enumerate(rows):
        out[index]["t_ns"] = t_ns
        out[index]["block_x"] = block_x
        out[index]["warp"] = warp
        out[index]["kind"] = kind
        out[index]["event"] = event
        out[index]["payload"] = 100 + event if kind == KIND_START else 0
    return out


def as_tuples(spans: np.ndarray) -> list[tuple[int, ...]]:
    fields = ("block", "warp", "depth", "event", "start_ns", "end_ns", "flags")
    return [tuple(int(span[name]) for name in fields) for span in spans]


def test_nested_ranges_pair_innermost_first_per_warp() -> None:
    found = pair_ranges(
        events(
            (1000, 0, 0, KIND_START, 1),  # outer
            (1010, 0, 0, KIND_START, 2),  # inner
            (1020, 0, 0, KIND_MARK, 3),
            (1030, 0, 0, KIND_END, END),  # closes inner
            (1040, 0, 0, KIND_START, 2),  # inner again
            (1050, 0, 0, KIND_END, END),
            (1060, 0, 0, KIND_END, END),  # closes outer
            (1005, 0, 1, KIND_START, 1),  # another warp, interleaved in time
            (1015, 0, 1, KIND_END, END),
        ),
        origin_ns=1000,
    )
    assert as_tuples(found.spans) == [
        (0, 0, 0, 1, 0, 60, 0),
        (0, 0, 1, 2, 10, 30, 0),
        (0, 0, 1, 2, 40, 50, 0),
        (0, 1, 0, 1, 5, 15, 0),
    ]
    assert [int(p) for p in found.spans["payload"]] == [101, 102, 102, 101]
    assert [(int(mark["t_ns"]), int(mark["event"])) for mark in found.marks] == [(20, 3)]
    assert found.unbalanced == 0
    assert list(found.depth[: found.max_warps]) == [2, 1]


def test_unbalanced_ranges_are_kept_and_flagged() -> None:
    found = pair_ranges(
        events(
            (0, 0, 0, KIND_END, END),  # an end whose start came before tracing saw this warp
            (10, 0, 0, KIND_START, 1),
            (20, 0, 0, KIND_END, END),
            (30, 0, 0, KIND_START, 2),  # never ends
            (5, 1, 0, KIND_START, 1),  # block 1: a start only
        ),
        origin_ns=0,
    )
    assert as_tuples(found.spans) == [
        (0, 0, 0, 1, 10, 20, 0),
        (0, 0, 0, 2, 30, -1, SPAN_NO_END),
        (0, 0, 0, 0, -1, 0, SPAN_NO_START),
        (1, 0, 0, 1, 5, -1, SPAN_NO_END),
    ]
    assert found.unbalanced == 3
    assert found.blocks.tolist() == [[0, 0, 0], [1, 0, 0]]


def test_the_h200_recording_gives_three_launches_of_64_blocks() -> None:
    messages, _ = read_recording(EXAMPLE)
    timeline = KernelTimeline()
    for msg in messages:
        if msg["type"] in (m.KERNEL_MODULE, m.KERNEL_RECORDS):
            timeline.apply(msg)
    launches = timeline.newest_first()
    assert [launch.records for launch in launches] == [42_240] * 3
    assert {launch.kernel for launch in launches} == {"traced_gemm_kernel"}
    assert all(launch.grid() == (8, 8, 1) for launch in launches)
    spans = launches[0].spans()
    assert len(spans.blocks) == 64 and spans.max_warps == 8
    names = [launches[0].event_name(int(event)) for event in spans.spans["event"]]
    closed = spans.spans["flags"] == 0
    # Per compute warp: one tile range, and a load and an mma range per k-step; loaders leave tile open.
    assert sorted({(name, bool(ok)) for name, ok in zip(names, closed, strict=True)}) == [
        ("load", True),
        ("mma", True),
        ("tile", False),
        ("tile", True),
    ]
    assert int(np.count_nonzero(closed)) == 64 * 4 * (1 + 2 * 32)
    assert spans.unbalanced == 64 * 4
    assert (spans.spans["end_ns"][closed] >= spans.spans["start_ns"][closed]).all()


def test_flame_rows_and_painted_columns_of_a_small_launch() -> None:
    from iket_tui.model.flame_layout import BLOCK, LANE, FlameLayout, FlameRow, Window

    spans = pair_ranges(
        events(
            (0, 0, 0, KIND_START, 1),
            (10, 0, 0, KIND_START, 2),
            (20, 0, 0, KIND_END, END),
            (25, 0, 0, KIND_MARK, 3),
            (40, 0, 0, KIND_END, END),
            (30, 1, 0, KIND_START, 2),  # block 1 never ends its range
        ),
        origin_ns=0,
    )
    layout = FlameLayout(spans, duration_ns=40)
    assert layout.rows == [
        FlameRow(BLOCK, 0, level=-1),
        FlameRow(LANE, 0, 0, 0),
        FlameRow(LANE, 0, 0, 1),
        FlameRow(BLOCK, 1, level=-1),
        FlameRow(LANE, 1, 0, 0),
    ]
    names = {1: "tile", 2: "mma", 3: "k"}.get
    window = Window(0.0, 5.0, 10)  # 5 ns a column, 50 ns in all
    painted = [(run.start, run.end, run.text) for run in layout.paint(layout.rows[1], window, names)]
    assert painted == [(0, 5, "▏tile"), (5, 6, "│"), (6, 8, "  "), (8, 10, "  ")]
    painted = [(run.start, run.end, run.text) for run in layout.paint(layout.rows[2], window, names)]
    assert painted == [(0, 2, "  "), (2, 4, "mm"), (4, 10, "      ")]
    painted = [(run.start, run.end, run.text) for run in layout.paint(layout.rows[4], window, names)]
    assert painted == [(0, 6, "      "), (6, 8, "mm"), (8, 10, "  ")]  # open range drawn to the launch end
    assert layout.at(layout.rows[2], 15.0, 2.0) == ("span", 1)
    assert layout.at(layout.rows[1], 26.0, 2.0) == ("mark", 0)
    assert layout.block_title(1) == "block (1,0) · SM 0"


def test_event_statistics_of_a_real_launch() -> None:
    from iket_tui.model.launches import event_stats

    messages, _ = read_recording(EXAMPLE)
    timeline = KernelTimeline()
    for msg in messages:
        if msg["type"] in (m.KERNEL_MODULE, m.KERNEL_RECORDS):
            timeline.apply(msg)
    launch = timeline.newest_first()[0]
    stats = {(row.name, row.kind): row for row in event_stats(launch)}
    assert sorted(stats) == [
        ("first_a", "mark"),
        ("k_step", "mark"),
        ("load", "range"),
        ("mma", "range"),
        ("tile", "range"),
    ]
    k_step = stats[("k_step", "mark")]
    assert (k_step.count, k_step.payload_min, k_step.payload_max) == (64 * 4 * 32, 0.0, 31.0)
    tile = stats[("tile", "range")]
    assert (tile.count, tile.unbalanced, tile.payload_min, tile.payload_max) == (64 * 8, 64 * 4, 0.0, 7.0)
    mma = stats[("mma", "range")]
    assert mma.count == 64 * 4 * 32 and mma.unbalanced == 0
    assert mma.p50_ns is not None and mma.p99_ns is not None and mma.max_ns is not None
    assert 0 < mma.p50_ns <= mma.p99_ns <= mma.max_ns < launch.duration_ns


def test_the_oldest_launches_beyond_the_bound_keep_only_their_summary() -> None:
    messages, _ = read_recording(EXAMPLE)
    timeline = KernelTimeline(max_events=50_000)  # room for one launch of 42,240 events
    for msg in messages:
        if msg["type"] in (m.KERNEL_MODULE, m.KERNEL_RECORDS):
            timeline.apply(msg)
    newest, middle, oldest = timeline.newest_first()
    assert (newest.evicted, middle.evicted, oldest.evicted) == (False, True, True)
    assert (timeline.retained, timeline.evicted_launches, timeline.evicted_events) == (42_240, 2, 84_480)
    assert oldest.records == 42_240 and oldest.grid() == (8, 8, 1) and oldest.duration_ns > 0
    assert len(oldest.events()) == 0 and len(oldest.spans().spans) == 0
    assert len(newest.spans().blocks) == 64


def test_records_before_their_event_table_are_counted_then_shown_when_it_comes() -> None:
    messages, _ = read_recording(EXAMPLE)
    (module,) = [msg for msg in messages if msg["type"] == m.KERNEL_MODULE]
    (records,) = [msg for msg in messages if msg["type"] == m.KERNEL_RECORDS]
    timeline = KernelTimeline()
    timeline.apply(records)
    assert timeline.waiting_events == 126_720 and not timeline.launches
    timeline.apply(module)
    assert timeline.waiting_events == 0
    assert sorted(launch.records for launch in timeline.launches.values()) == [42_240] * 3
