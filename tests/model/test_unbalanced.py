"""Why a launch has unbalanced ranges, in words: the producer warps of a warp-specialised kernel
told apart from ranges that were not closed and ends without a start; and what a fitted flame
view shows of a launch one of whose blocks ran on far longer than the rest."""

from __future__ import annotations

from pathlib import Path

from test_flame_text import END, MMA, TILE, launch_of

from iket_tui.model.flame_layout import fit_span
from iket_tui.model.kernels import KernelTimeline
from iket_tui.model.launches import Launch
from iket_tui.model.unbalanced import row_words, unbalanced_of
from iket_tui.ring.layout import KIND_END, KIND_START
from iket_tui.sources.reading import read_recording

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def recorded_launches(name: str) -> list[Launch]:
    messages, _ = read_recording(EXAMPLES / name)
    timeline = KernelTimeline()
    for msg in messages:
        if msg["type"].startswith("kernel_"):
            timeline.apply(msg)
    return timeline.newest_first()


def test_the_h200_runs_producer_warps_are_named_as_the_reason() -> None:
    newest, *older = recorded_launches("h200-demo-waiting.msgpack")
    found = unbalanced_of(newest)
    assert found.total == 256 and found.producer_ranges == 256 and found.other_open == found.no_start == 0
    assert found.words() == (
        "unbalanced 256: `tile` left open by warps 0-3 of each block,"
        " Hopper producer warps (they stop before the pipelined loop)"
    )
    assert found.producers_in(0) == [0, 1, 2, 3] and found.producers_in(0, 5) == []
    assert all(unbalanced_of(launch).words() == found.words() for launch in older)


def test_ranges_not_closed_and_ends_without_a_start_are_said_as_such() -> None:
    # Warp 0 closes a tile range and leaves an mma open; warp 1 ends a range it never started.
    launch = launch_of(
        (1000, 0, 0, 3, KIND_START, TILE, 0),
        (1010, 0, 0, 3, KIND_END, END, 0),
        (1020, 0, 0, 3, KIND_START, MMA, 0),
        (1030, 0, 1, 3, KIND_END, END, 0),
    )
    found = unbalanced_of(launch)
    assert found.producer_ranges == 0
    assert found.words() == (
        "unbalanced 2: 1 range never closed (the warp did not reach its end, or the end was lost);"
        " 1 end without a start (lost, or before tracing)"
    )
    assert found.words(running=True).startswith("unbalanced 2: 1 range not closed yet;")
    assert row_words([], whole_block=False, open_ranges=1, no_start=0) == (
        "1 range not closed (not reached, or the end lost)"
    )


def test_warps_that_close_nothing_in_a_block_where_no_warp_closes_a_range_are_not_called_producers() -> None:
    launch = launch_of((1000, 0, 0, 3, KIND_START, TILE, 0), (1000, 0, 1, 3, KIND_START, TILE, 0))
    assert unbalanced_of(launch).producer_ranges == 0
    assert unbalanced_of(launch).words() == (
        "unbalanced 2: 2 ranges never closed (the warp did not reach its end, or the end was lost)"
    )


def test_a_fit_leaves_out_the_block_that_waited_and_names_it() -> None:
    newest, previous, *_ = recorded_launches("h200-demo-waiting.msgpack")
    assert newest.duration_ns == 4_000_020_672
    span = fit_span(newest.spans(), newest.duration_ns)
    assert span.ns < 25_000 and len(span.beyond) == 1
    x, y, _ = (int(v) for v in newest.spans().blocks[span.beyond[0]])
    assert (x, y) == (3, 0)  # the block that waited 4 s
    assert fit_span(previous.spans(), previous.duration_ns).beyond == ()  # blocks alike: the whole launch
    assert fit_span(previous.spans(), previous.duration_ns).ns == previous.duration_ns
