"""Comparing kernel launches: matched by process, kernel and grid; per event name the count and
the own time of its ranges, the largest change first, the markedly slower flagged (never the
range around a slowed one); the blocks that changed most; payload ranges that changed."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from iket_tui.export import recording_session
from iket_tui.export.common import launches_of
from iket_tui.model.compare_kernels import (
    LaunchSummary,
    block_words,
    compare_launch,
    compare_launches,
    summarize_launch,
)
from iket_tui.model.session import Session
from iket_tui.sources.reading import read_recording
from tests.cli.kernel_runs import GEMM_GRID, K_STEPS, RANGE_NS, kernel_messages

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _summaries(messages: Iterable[Mapping[str, Any]], process: str = "process 1") -> list[LaunchSummary]:
    """Real model launches, from the kernel messages of a run through the CPU producer and the drain."""
    session = Session()
    session.apply(list(messages))
    return [summarize_launch(launch, process) for launch in launches_of(session)]


def test_a_launch_is_summarised_per_event_name_with_the_own_time_of_its_ranges() -> None:
    gemm, softmax = _summaries(kernel_messages(seed=1))
    assert (gemm.kernel, gemm.launch, gemm.grid, gemm.status) == ("gemm", 3, GEMM_GRID, "complete")
    events = {event.name: event for event in gemm.events}
    blocks_warps = GEMM_GRID[0] * GEMM_GRID[1] * 2
    assert events["mma"].count == events["load"].count == events["k_step"].count == K_STEPS * blocks_warps
    assert abs(events["mma"].p50_ns - RANGE_NS["mma"]) <= 32  # type: ignore[operator]
    # The tile range holds the k-steps: its own time is only the gaps between them.
    assert events["tile"].p50_ns == (K_STEPS + 1) * 64
    assert events["tile"].payload == (0.0, 7.0) and events["k_step"].payload == (0.0, K_STEPS - 1)
    assert events["load"].payload is None
    assert [block_words(int(key)) for key in gemm.blocks[:3]] == ["(0,0,0)", "(1,0,0)", "(2,0,0)"]
    assert softmax.kernel == "softmax" and [event.name for event in softmax.events] == ["row"]


def test_a_slowed_range_is_named_first_and_flagged_and_the_range_around_it_is_not() -> None:
    before = _summaries(kernel_messages(seed=1))
    after = _summaries(kernel_messages(seed=2, slower={"mma": 320}))
    comparison = compare_launches(before, after)
    gemm, softmax = comparison.pairs
    assert [event.name for event in gemm.events][:1] == ["mma"]
    assert [event.name for event in gemm.events if event.slower] == ["mma"]
    assert gemm.events[0].change_ns >= 320 * K_STEPS * 16 - 32 * K_STEPS * 16
    assert gemm.flags() == ("range-slower",)
    assert softmax.flags() == ()
    # Every block of the GEMM took longer by its eight slower k-steps (less the timer-step jitter).
    assert len(gemm.blocks) == 8 and all(block.change_ns >= 8 * (320 - 2 * 32) for block in gemm.blocks)
    assert (comparison.only_a, comparison.only_b) == ((), ())


def test_thresholds_are_settable() -> None:
    before = _summaries(kernel_messages(seed=1))
    after = _summaries(kernel_messages(seed=2, slower={"mma": 320}))
    assert compare_launches(before, after, min_ns=400).pairs[0].flags() == ()
    assert compare_launches(before, after, slower_pct=60).pairs[0].flags() == ()
    assert compare_launches(before, after, slower_pct=40, min_ns=300).pairs[0].flags() == ("range-slower",)


def test_two_runs_alike_flag_nothing() -> None:
    """Timer-step jitter (32 ns either way) is below the default thresholds."""
    comparison = compare_launches(_summaries(kernel_messages(seed=1)), _summaries(kernel_messages(seed=7)))
    assert [pair.flags() for pair in comparison.pairs] == [(), ()]


def test_an_event_run_another_number_of_times_is_flagged_as_a_count_change() -> None:
    before = _summaries(kernel_messages(seed=1))
    after = _summaries(kernel_messages(seed=1, k_steps=K_STEPS - 2))
    gemm = compare_launches(before, after).pairs[0]
    assert gemm.flags() == ("count-changed", "payload-changed")
    assert [event.name for event in gemm.counts] == ["mma", "load", "k_step"]
    assert [(event.name, event.before.payload, event.after.payload) for event in gemm.payloads] == [  # type: ignore[union-attr]
        ("k_step", (0.0, 7.0), (0.0, 5.0))
    ]


def test_launches_are_matched_by_process_kernel_and_grid_in_order() -> None:
    a = _summaries(kernel_messages(seed=1, launches=(3, 4)))
    b = _summaries(kernel_messages(seed=1, launches=(7, 8)), process="rank 1")
    comparison = compare_launches(a, b)
    assert comparison.pairs == ()
    assert [s.title for s in comparison.only_a] == [
        "process 1 launch 3 gemm grid 4x2x1",
        "process 1 launch 4 softmax grid 8x1x1",
    ]
    assert [s.launch for s in comparison.only_b] == [7, 8]
    again = compare_launches(a, _summaries(kernel_messages(seed=1, launches=(7, 8))))
    assert [(p.a.launch, p.b.launch, p.a.kernel) for p in again.pairs] == [(3, 7, "gemm"), (4, 8, "softmax")]


def test_a_real_launch_with_a_block_that_waited_names_that_block_first() -> None:
    """The H200 recording's launch 5 against the launch whose block (3,0) waited 4 s inside ``mma``."""
    messages, _ = read_recording(EXAMPLES / "h200-demo-waiting.msgpack")
    launches = {launch.key[3]: launch for launch in launches_of(recording_session(messages))}
    five, six = (summarize_launch(launches[n], "process 1") for n in (5, 6))
    change = compare_launch(five, six)
    assert change.events[0].name == "mma" and change.events[0].change_ns > 4 * 4_000_000_000
    assert block_words(change.blocks[0].block) == "(3,0,0)" and change.blocks[0].after_ns > 4_000_000_000
    assert [event.name for event in change.payloads] == ["tile", "first_a"]
    assert change.flags() == ("range-slower", "payload-changed")
    # Two launches of the real run, a few timer steps apart: nothing flagged.
    three, four = (summarize_launch(launches[n], "process 1") for n in (3, 4))
    assert compare_launch(three, four).flags() == ()
