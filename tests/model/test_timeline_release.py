"""A reader that keeps a launch's events itself (an export, on disk) takes them out of the
timeline through :meth:`KernelTimeline.release`: the counts the bound works on stay true, so a
later eviction of that launch takes away only what it still holds."""

from __future__ import annotations

from pathlib import Path

from iket_tui.model.kernels import KernelTimeline
from iket_tui.protocol import messages as m
from iket_tui.sources.reading import read_recording

WAITING = Path(__file__).resolve().parents[2] / "examples" / "h200-demo-waiting.msgpack"


def _kernel_messages() -> list[m.Message]:
    """The module, then three batches: launches 3-5 whole, launch 6 running, launch 6's last rows."""
    messages, _ = read_recording(WAITING)
    return [msg for msg in messages if msg["type"] in (m.KERNEL_MODULE, m.KERNEL_RECORDS)]


def _held(timeline: KernelTimeline) -> int:
    return sum(len(part) for launch in timeline.launches.values() for part in launch.parts)


def test_a_released_launch_evicted_later_leaves_the_counts_true() -> None:
    module, first, second, _ = _kernel_messages()
    timeline = KernelTimeline(max_events=10**6)
    timeline.apply(module)
    timeline.apply(first)
    by_number = {launch.key[3]: launch for launch in timeline.launches.values()}
    released = [timeline.release(by_number[number]) for number in (3, 4)]
    assert [sum(map(len, parts)) for parts in released] == [42_240, 42_240]
    assert (by_number[3].rows, by_number[3].parts, by_number[3].records) == (0, [], 42_240)
    assert timeline.retained == _held(timeline) == 42_240
    timeline.max_events = 50_000  # launch 6's rows go past it: the oldest launches are summarised
    timeline.apply(second)
    assert [by_number[number].evicted for number in (3, 4, 5)] == [True, True, True]
    assert timeline.retained == _held(timeline) == 41_952  # launch 6's, all that is left
    assert timeline.evicted_events == 3 * 42_240


def test_a_running_launch_keeps_its_first_time_after_its_events_are_released() -> None:
    module, first, second, third = _kernel_messages()
    whole = KernelTimeline()
    released = KernelTimeline()
    for timeline in (whole, released):
        for msg in (module, first, second):
            timeline.apply(msg)
    running = max(released.launches.values(), key=lambda launch: launch.key[3])
    assert running.running
    released.release(running)
    for timeline in (whole, released):
        timeline.apply(third)
    kept = max(whole.launches.values(), key=lambda launch: launch.key[3])
    assert (running.first_ns, running.last_ns, running.records) == (kept.first_ns, kept.last_ns, kept.records)
    assert running.rows == 288 and released.retained == _held(released) == 3 * 42_240 + 288
