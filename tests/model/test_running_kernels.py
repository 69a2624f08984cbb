"""Stuck kernels in the model: which warps began and have not ended, their last events, grouped
per block, dated on the device's clock, and when a launch is running past the threshold."""

from __future__ import annotations

import numpy as np
import pytest

from iket_tui.demo.sample import sample_recording
from iket_tui.demo.waiting_launch import FIRST_A, K_STEP, MMA, TILE, TRACED_TABLE, WaitingLaunch
from iket_tui.model.kernels import KernelMessageError, KernelTimeline
from iket_tui.model.launches import pair_ranges
from iket_tui.model.running_kernels import NO_EVENT, WarpProgress, open_lanes, unfinished, warp_ranges
from iket_tui.model.session import Session
from iket_tui.protocol import messages as m
from iket_tui.ring.buffer import RingView
from iket_tui.ring.cpu_producer import WarpWriter
from iket_tui.ring.drain import RingDrain
from iket_tui.ring.layout import (
    DEFAULT_LAYOUT,
    EVENT_DTYPE,
    EVENT_WARP_BEGIN,
    EVENT_WARP_END,
    EVENT_WARP_ROW,
    ID_BITS_MIN,
    KIND_END,
    KIND_MARK,
    KIND_START,
    KIND_UNKNOWN,
    RingGeometry,
)
from iket_tui.ring.wire import kernel_module, kernel_records
from iket_tui.sources.reading import read_recording

END = 31
TABLE = TRACED_TABLE
PAYLOAD_TYPE = {TILE: 1, FIRST_A: 3, K_STEP: 2}
S = 1_000_000_000


def events(*rows: tuple[int, int, int, int, int, int]) -> np.ndarray:
    """(t_ns, block_x, warp, kind, event, payload) rows; the payload type is the event's."""
    out = np.zeros(len(rows), dtype=EVENT_DTYPE)
    for index, (t_ns, block_x, warp, kind, event, payload) in enumerate(rows):
        row = out[index]
        row["t_ns"], row["block_x"], row["warp"], row["kind"], row["event"] = t_ns, block_x, warp, kind, event
        row["payload"] = payload
        row["payload_type"] = PAYLOAD_TYPE.get(event, 0)
        row["launch"] = 1
    return out


def warp_steps(block: int, warp: int, t: int, steps: int, *, end: bool) -> list[tuple[int, int, int, int, int, int]]:
    """A compute warp: tile, then per step a k_step mark, an mma range; the tile's end last (ending the warp)."""
    rows = [(t, block, warp, KIND_START, TILE, block)]
    for k in range(steps):
        rows += [(t + 10 * k + 1, block, warp, KIND_MARK, K_STEP, k), (t + 10 * k + 2, block, warp, KIND_START, MMA, 0)]
        rows.append((t + 10 * k + 5, block, warp, KIND_END, END, 0))
    if end:
        rows.append((t + 10 * steps + 1, block, warp, KIND_END | EVENT_WARP_END, END, 0))
    else:
        rows.append((t + 10 * steps + 1, block, warp, KIND_MARK, K_STEP, steps))
        rows.append((t + 10 * steps + 2, block, warp, KIND_START, MMA, 0))
    return rows


def test_a_warp_that_stops_mid_way_is_unfinished_with_its_last_event_and_the_payload_before_it() -> None:
    progress = WarpProgress()
    rows = []
    for block in range(4):
        for warp in range(8):
            rows += warp_steps(block, warp, 1000 * block, 20, end=not (block == 3 and warp >= 4))
    batch = events(*rows)
    progress.add(batch[np.random.default_rng(1).permutation(len(batch))])  # any arrival order

    assert progress.unfinished == 4 and progress.ended == 28
    found = unfinished(progress, TABLE, device_now_ns=12 * S, stuck_after_ns=2 * S)
    (group,) = found.groups
    assert (group.block, group.warps) == ((3, 0, 0), (4, 5, 6, 7))
    assert group.last == "`mma` (k_step 20)" and group.stuck
    assert found.summary(total_blocks=4) == (
        "1 of 4 blocks not finished: block (3,0), warps 4-7 last at `mma` (k_step 20), 12.0 s ago"
    )


def test_warps_with_the_same_last_event_group_into_ranges_the_longest_quiet_first() -> None:
    progress = WarpProgress()
    progress.add(
        events(
            (100, 0, 0, KIND_MARK, K_STEP, 17),
            (101, 0, 1, KIND_MARK, K_STEP, 17),
            (102, 0, 4, KIND_MARK, K_STEP, 17),
            (103, 0, 5, KIND_MARK, K_STEP, 17),
            (104, 0, 6, KIND_MARK, K_STEP, 17),
            (90, 0, 2, KIND_MARK, K_STEP, 16),  # another payload: another group
            (5000, 1, 3, KIND_START, TILE, -2 & 0xFFFFFFFF),  # int32 payload, newer
            (40, 2, 0, KIND_END, END, 0),
        )
    )
    found = unfinished(progress, TABLE, device_now_ns=10_100, stuck_after_ns=9_000)
    assert [(g.block[0], g.warps_text, g.last, g.ago_ns, g.stuck) for g in found.groups] == [
        (2, "warp 0", "a range end", 10_060, True),
        (0, "warp 2", "`k_step` 16", 10_010, True),
        (0, "warps 0-1, 4-6", "`k_step` 17", 9_996, True),  # dated by the group's newest event
        (1, "warp 3", "`tile` -2", 5_100, False),
    ]
    assert (found.blocks, found.warps, found.group_count) == (3, 8, 4)
    assert found.summary(total_blocks=64, shown=1) == (
        "3 of 64 blocks not finished: block (2,0), warp 0 last at a range end, 10.1 µs ago; 3 more groups of warps"
    )
    limited = unfinished(progress, TABLE, device_now_ns=10_100, stuck_after_ns=9_000, limit=1)
    assert len(limited.groups) == 1 and limited.group_count == 4


def test_a_warp_quiet_past_the_threshold_never_shares_a_group_with_one_that_ran_its_event_just_now() -> None:
    """Warps 4 and 5 of block (3,0) both last ran `k_step` 5, warp 4 10 s ago and warp 5 just
    now: dated together by the newer, warp 4 would read "0 ns ago" and not stuck."""
    progress = WarpProgress()
    progress.add(events((100, 3, 4, KIND_MARK, K_STEP, 5), (100 + 10 * S, 3, 5, KIND_MARK, K_STEP, 5)))
    found = unfinished(progress, TABLE, device_now_ns=100 + 10 * S, stuck_after_ns=2 * S)
    assert [(g.describe(), g.stuck) for g in found.groups] == [
        ("block (3,0), warp 4 last at `k_step` 5, 10.0 s ago", True),
        ("block (3,0), warp 5 last at `k_step` 5, 0 ns ago", False),
    ]
    assert (found.blocks, found.warps, found.group_count) == (1, 2, 2)
    # Both quiet past it: one group again, dated by its newest event.
    later = unfinished(progress, TABLE, device_now_ns=100 + 13 * S, stuck_after_ns=2 * S)
    assert [(g.describe(), g.stuck) for g in later.groups] == [
        ("block (3,0), warps 4-5 last at `k_step` 5, 3.00 s ago", True)
    ]


def test_warp_ranges_read_as_a_user_writes_them() -> None:
    assert warp_ranges([7, 4, 5, 6]) == "4-7"
    assert warp_ranges([0, 2, 3, 9]) == "0, 2-3, 9"
    assert warp_ranges([]) == ""


def test_later_batches_replace_a_warps_last_event_and_keep_the_payload_seen_before() -> None:
    progress = WarpProgress()
    progress.add(events((10, 0, 4, KIND_MARK, K_STEP, 17), (11, 0, 5, KIND_MARK, K_STEP, 3)))
    progress.add(events((20, 0, 4, KIND_START, MMA, 0)))  # a batch with no payload-bearing event for warp 4
    found = unfinished(progress, TABLE, device_now_ns=30, stuck_after_ns=S)
    assert [(g.warps, g.last, g.t_ns) for g in found.groups] == [
        ((5,), "`k_step` 3", 11),
        ((4,), "`mma` (k_step 17)", 20),
    ]


def test_completion_clears_the_warps_and_the_launch_is_no_longer_running() -> None:
    progress = WarpProgress()
    progress.add(events(*warp_steps(0, 4, 0, 3, end=False), *warp_steps(0, 5, 0, 3, end=True)))
    assert progress.unfinished == 1
    progress.add(events((9 * S, 0, 4, KIND_END, END, 0), (9 * S + 5, 0, 4, KIND_END | EVENT_WARP_END, END, 0)))
    assert progress.unfinished == 0 and progress.ended == 2
    assert unfinished(progress, TABLE, device_now_ns=10 * S, stuck_after_ns=S).summary(1) == ""


def test_a_begin_record_without_an_event_reads_as_no_event_yet() -> None:
    progress = WarpProgress()
    begin_row = KIND_UNKNOWN | EVENT_WARP_BEGIN | EVENT_WARP_ROW  # a warp that began, with no event beside it
    progress.add(events((50, 0, 1, begin_row, 0, 0), (60, 0, 2, KIND_START | EVENT_WARP_BEGIN, TILE, 0)))
    assert list(progress.open["kind"]) == [NO_EVENT, KIND_START]
    found = unfinished(progress, TABLE, device_now_ns=3 * S, stuck_after_ns=S)
    assert [g.describe() for g in found.groups] == [
        "block (0,0), warp 1 with no event yet, 3.00 s ago",
        "block (0,0), warp 2 last at `tile` 0, 3.00 s ago",
    ]


# The timeline: messages in, the device's clock, the threshold, eviction.


def _ring(ring_id: int = 7) -> tuple[RingView, RingDrain]:
    geometry = RingGeometry(8192, 256)
    ring = RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry, ring_id)
    return ring, RingDrain(ring)


def _timeline(**kwargs: int) -> KernelTimeline:
    timeline = KernelTimeline(**kwargs)
    timeline.apply({"type": "kernel_tracing", "enabled": True, "device": "a ring file", "t_ns": 0})
    timeline.apply(kernel_module(TABLE, ring_id=7, layout=DEFAULT_LAYOUT, t_ns=1))
    return timeline


T0 = 1_795_976_916_032_000_000  # device time (%globaltimer)
AGENT = 62_000_000_000  # agent time (monotonic) of the first drain


@pytest.mark.parametrize("device_now", [None, "sent"])
def test_a_launch_runs_past_the_threshold_only_once_quiet_for_longer_than_it(device_now: str | None) -> None:
    ring, drain = _ring()
    launch_writer = WaitingLaunch(ring, module=1, launch=6, t0_ns=T0)
    newest = launch_writer.run_until_held()
    held_since = launch_writer.held_since_ns
    msg = kernel_records(drain.drain(), t_ns=AGENT)
    # Where the agent reads the device timer at the drain, it is 1 ms after the newest event;
    # where it cannot, the newest event stands in for it.
    msg["device_now_ns"] = newest + 1_000_000 if device_now else None
    timeline = _timeline(stuck_after_ns=2 * S)
    timeline.apply(msg)
    (launch,) = timeline.launches.values()
    assert launch.running and launch.progress.unfinished == 4 and launch.blocks() == 64
    lead = 1_000_000 if device_now else 0
    # The waiting warps' last event came before the launch's newest one (another block's).
    behind = newest - held_since
    assert behind > 0
    at_threshold = AGENT + 2 * S - lead - behind  # its waiting warps quiet for exactly 2 s: not past it
    assert timeline.quiet_ns(launch, at_threshold) == 2 * S
    assert not timeline.running_past(launch, at_threshold)
    assert timeline.running_past(launch, at_threshold + 1)
    assert timeline.running() == [launch] and timeline.quiet(at_threshold) == []
    assert timeline.quiet(at_threshold + 1) == [launch]
    assert timeline.headline(at_threshold + S) == "kernels: 41,952 ev, 1 launch with a warp quiet 3.00 s"
    assert timeline.headline() == "kernels: 41,952 ev"  # without a time, nothing about the clock
    found = timeline.unfinished(launch, AGENT + 12 * S)
    ago = newest + lead + 12 * S - held_since
    assert found.summary(launch.blocks()).startswith(
        "1 of 64 blocks not finished: block (3,0), warps 4-7 last at `mma` (k_step 17), "
    )
    assert found.groups[0].ago_ns == ago
    # Running 12 s, though its events span only the microseconds before the block began to wait.
    assert launch.duration_ns == newest - launch.first_ns < 100_000
    assert timeline.running_ns(launch, AGENT + 12 * S) == newest + lead + 12 * S - launch.first_ns

    launch_writer.release(newest + 5 * S)
    timeline.apply(kernel_records(drain.drain(), t_ns=AGENT + 5 * S))
    assert not launch.running and launch.progress.ended == 512
    assert not timeline.running_past(launch, AGENT + 60 * S)
    assert timeline.running_ns(launch, AGENT + 60 * S) == launch.duration_ns  # done: its first event to its last
    assert timeline.running() == [] and timeline.headline(AGENT + 60 * S) == "kernels: 42,240 ev"
    assert launch.records == 42_240 and timeline.events_read == 42_240 and timeline.events_lost == 0


def test_a_warp_that_waits_runs_past_the_threshold_however_busy_the_launchs_other_warps_are() -> None:
    """Block (3,0)'s warp 4 stops at `mma` while block (0,0)'s warp 4 polls, a `k_step` mark
    every second: the launch's newest event is never old, its waiting warp is."""
    geometry = RingGeometry(512, 256)
    ring = RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry, 7)
    drain = RingDrain(ring)

    def writer(sm: int, block: int) -> WarpWriter:
        return WarpWriter(
            ring, sm=sm, module=1, launch=6, block=(block, 0, 0), warp=4,
            id_bits=ID_BITS_MIN, clock=lambda: 0, start_ns=T0,
        )  # fmt: skip

    stuck, busy = writer(3, 3), writer(0, 0)
    stuck.event(TILE, 3, t_ns=T0 + 64)
    stuck.event(MMA, t_ns=T0 + 128)  # and nothing after it
    busy.event(TILE, 0, t_ns=T0 + 64)
    timeline = _timeline(stuck_after_ns=2 * S)
    past = []
    for second in range(1, 11):
        busy.event(K_STEP, second, t_ns=T0 + second * S)
        msg = kernel_records(drain.drain(), t_ns=AGENT + second * S)
        msg["device_now_ns"] = T0 + second * S + 1000
        timeline.apply(msg)
        (launch,) = timeline.launches.values()
        past.append(timeline.running_past(launch, AGENT + second * S))
    assert past == [False] + [True] * 9  # past 2 s from the second drain on (quiet 2 s + 872 ns then)
    now = AGENT + 10 * S
    assert launch.last_ns == T0 + 10 * S  # the launch's newest event: the busy warp's, just now
    assert timeline.quiet_ns(launch, now) == 10 * S + 1000 - 128
    assert timeline.running_past(launch, now) and timeline.quiet(now) == [launch]
    assert timeline.headline(now) == "kernels: 13 ev, 1 launch with a warp quiet 10.0 s"
    assert timeline.title(following=False, quiet=1).endswith(" · 1 running with a warp quiet for over 2.00 s")
    found = timeline.unfinished(launch, now)
    assert [(g.describe(), g.stuck) for g in found.groups] == [
        ("block (3,0), warp 4 last at `mma` (tile 3), 10.0 s ago", True),
        ("block (0,0), warp 4 last at `k_step` 10, 1.00 µs ago", False),
    ]
    assert launch.first_ns == T0 + 64 and launch.duration_ns == 10 * S - 64  # its events span 10 s
    assert timeline.running_ns(launch, now) == 10 * S + 1000 - 64  # from its first event to the device's now


def test_a_launch_let_go_for_the_bound_still_follows_its_warps_and_completes() -> None:
    ring, drain = _ring()
    first = WaitingLaunch(ring, module=1, launch=6, t0_ns=T0)
    newest = first.run_until_held()
    timeline = _timeline(max_events=50_000)
    timeline.apply(kernel_records(drain.drain(), t_ns=AGENT))
    # Another launch while block (3,0) waits, on the SMs after it, none of its blocks held.
    second = WaitingLaunch(ring, module=1, launch=7, t0_ns=newest + S, held_block=(9, 9), first_sm=64)
    second.run_until_held()
    timeline.apply(kernel_records(drain.drain(), t_ns=AGENT + S))
    held, done = sorted(timeline.launches.values(), key=lambda launch: launch.order)
    assert held.evicted and not done.evicted and timeline.evicted_launches == 1
    assert held.running and held.progress.unfinished == 4 and not done.running
    assert len(held.progress.open) == 4  # one row per unfinished warp, whatever the events
    first.release(newest + 3 * S)
    timeline.apply(kernel_records(drain.drain(), t_ns=AGENT + 3 * S))
    assert not held.running and held.records == 42_240 and held.last_ns > newest


def test_records_of_a_module_without_its_table_yet_are_followed_once_it_arrives() -> None:
    ring, drain = _ring()
    WaitingLaunch(ring, module=1, launch=6, t0_ns=T0).run_until_held()
    timeline = KernelTimeline()
    timeline.apply({**kernel_records(drain.drain(), t_ns=AGENT), "device_now_ns": None})
    assert not timeline.launches
    timeline.apply(kernel_module(TABLE, ring_id=7, layout=DEFAULT_LAYOUT, t_ns=AGENT + 1))
    (launch,) = timeline.launches.values()
    assert timeline.running_past(launch, AGENT + 3 * S)


def test_without_a_device_now_the_newest_event_stands_in_and_an_impossible_one_is_refused() -> None:
    ring, drain = _ring()
    newest = WaitingLaunch(ring, module=1, launch=6, t0_ns=T0).run_until_held()
    msg = kernel_records(drain.drain(), t_ns=AGENT)
    timeline = _timeline()
    with pytest.raises(KernelMessageError, match="impossible device_now_ns 'soon'"):
        timeline.apply({**msg, "device_now_ns": "soon"})
    assert not timeline.launches and not timeline.clocks
    timeline.apply({**msg, "device_now_ns": None})
    assert timeline.device_now_ns(7, AGENT + 5) == newest + 5
    assert timeline.device_now_ns(8, AGENT) is None  # a ring nothing came from


def test_the_demo_recording_holds_a_launch_whose_block_waits_then_is_released() -> None:
    sample = sample_recording()
    assert sample is not None
    messages, info = read_recording(sample)
    assert info.ended and not (info.undecodable or info.unknown)
    records = [index for index, msg in enumerate(messages) if msg["type"] == m.KERNEL_RECORDS]
    held, released = records[-2:]
    session = Session()
    session.apply(messages[: held + 1])
    launch = session.kernels.newest_first()[0]
    assert launch.key[3] == 6 and launch.running and len(session.kernels.launches) == 4
    t = messages[held]["t_ns"]
    assert not session.kernels.running_past(launch, t + S)
    assert session.kernels.running_past(launch, t + 3 * S)
    found = session.kernels.unfinished(launch, t + 3 * S)
    assert found.summary(launch.blocks()) == (
        "1 of 64 blocks not finished: block (3,0), warps 4-7 last at `mma` (k_step 17), 3.05 s ago"
    )
    # Heartbeats while it waits, then its release: every launch done, every event read.
    assert {msg["type"] for msg in messages[held + 1 : released]} == {m.HEARTBEAT}
    session.apply(messages[held + 1 :])
    assert not launch.running and launch.records == 42_240
    assert session.kernels.events_read == 4 * 42_240 and session.kernels.events_lost == 0


def test_a_warp_row_is_no_mark_in_the_flame_view() -> None:
    begin_row = KIND_UNKNOWN | EVENT_WARP_BEGIN | EVENT_WARP_ROW
    end_row = KIND_UNKNOWN | EVENT_WARP_END | EVENT_WARP_ROW
    found = pair_ranges(
        events((10, 0, 1, begin_row, 0, 0), (20, 0, 0, KIND_MARK, K_STEP, 3), (30, 0, 0, end_row, 0, 0)), origin_ns=0
    )
    assert [(int(mark["t_ns"]), int(mark["event"])) for mark in found.marks] == [(20, K_STEP)]


def test_the_open_warps_are_found_among_a_launchs_blocks() -> None:
    progress = WarpProgress()
    progress.add(
        events((10, 5, 2, KIND_MARK, K_STEP, 1), (11, 7, 0, KIND_MARK, K_STEP, 1), (12, 9, 1, KIND_MARK, 3, 0))
    )
    blocks = np.array([[5, 0, 0], [6, 0, 0], [7, 0, 0]], dtype=np.uint32)  # block 9 has no row yet
    assert open_lanes(progress, blocks) == {(0, 2), (2, 0)}
    assert open_lanes(WarpProgress(), blocks) == frozenset()
