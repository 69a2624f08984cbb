"""Each launch complete, running, partial (how much, which blocks, why) or not traced, from the
real drain of a real ring written by the CPU producer, as the kernels screen and ``dump`` say it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from iket_tui.model.flame_layout import LANE, FlameLayout
from iket_tui.model.flame_text import describe_row
from iket_tui.model.kernels import KernelTimeline
from iket_tui.model.launch_coverage import COMPLETE, CUT, DROPPED, LAPPED, NOT_TRACED, OVERWRITTEN, PARTIAL, RUNNING
from iket_tui.model.launches import Launch
from iket_tui.model.session import Session
from iket_tui.protocol import messages as m
from iket_tui.ring.buffer import RingView
from iket_tui.ring.counters import LOSS_OVERWRITTEN
from iket_tui.ring.cpu_producer import WarpWriter, flood, synthetic_table
from iket_tui.ring.drain import RingDrain
from iket_tui.ring.layout import CLAIM_STRIPES, DEFAULT_LAYOUT, RingGeometry
from iket_tui.ring.wire import kernel_module, kernel_records
from iket_tui.sources.reading import read_recording

RING = 7
MODULE = 1
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"
T0 = 1 << 40


def _ring(regions: int, records: int) -> tuple[RingView, RingDrain]:
    """A ring holding ``regions // CLAIM_STRIPES`` warps of these tests at once (they all run on
    SM 0, so on one claim counter)."""
    geometry = RingGeometry(regions, records)
    ring = RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry, RING)
    return ring, RingDrain(ring, native=False)


def _module() -> dict[str, Any]:
    return kernel_module(synthetic_table(MODULE), ring_id=RING, layout=DEFAULT_LAYOUT, t_ns=1)


def _timeline() -> KernelTimeline:
    timeline = KernelTimeline()
    timeline.apply({"type": "kernel_tracing", "enabled": True, "device": "a ring file", "t_ns": 0})
    timeline.apply(_module())
    return timeline


class Clock:
    """Device time for the writers: 64 ns a tick (the ids' granularity)."""

    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> int:
        self.t += 64
        return self.t


def _launch(
    ring: RingView,
    clock: Clock,
    number: int,
    grid: tuple[int, int, int],
    block_warps: int,
    events: int = 3,
    *,
    close: bool = True,
) -> list[WarpWriter]:
    """Every warp of a launch of ``grid``, one after the other, each writing ``events`` marks."""
    writers = []
    for z in range(grid[2]):
        for y in range(grid[1]):
            for x in range(grid[0]):
                for warp in range(block_warps):
                    writer = WarpWriter(
                        ring,
                        module=MODULE,
                        launch=number,
                        block=(x, y, z),
                        warp=warp,
                        grid=grid,
                        block_warps=block_warps,
                        clock=clock,
                    )
                    for _ in range(events):
                        writer.event(1)
                    if close:
                        writer.close()
                    writers.append(writer)
    return writers


def _drained(drain: RingDrain, t_ns: int = 10) -> dict[str, Any]:
    return kernel_records(drain.drain(), t_ns=t_ns)


def _of(timeline: KernelTimeline, number: int) -> Launch:
    return timeline.launches[(RING, MODULE, 0, number)]


def test_a_launch_read_whole_is_complete() -> None:
    ring, drain = _ring(16 * CLAIM_STRIPES, 64)
    _launch(ring, Clock(), 3, (4, 2, 1), 2, events=5)
    timeline = _timeline()
    timeline.apply(_drained(drain))
    launch = _of(timeline, 3)
    status = launch.status()
    assert (status.state, status.short(), status.words()) == (COMPLETE, "complete", "")
    coverage = launch.coverage
    assert (coverage.grid, coverage.block_warps, coverage.expected_warps) == ((4, 2, 1), 2, 16)
    assert (coverage.warps_seen, coverage.warps_whole, coverage.blocks_whole()) == (16, 16, 8)
    assert coverage.whole_event_fraction() == 1.0 and coverage.missing_text() == ""


def test_a_launch_still_writing_is_running_until_its_last_block_arrives() -> None:
    ring, drain = _ring(64, 64)
    clock = Clock()
    first = _launch(ring, clock, 3, (2, 1, 1), 1, close=False)
    timeline = _timeline()
    timeline.apply(_drained(drain))
    assert _of(timeline, 3).status().short() == RUNNING
    first[0].close()
    timeline.apply(_drained(drain, 20))
    assert _of(timeline, 3).status().short() == RUNNING  # block 1 has not ended
    first[1].close()
    timeline.apply(_drained(drain, 30))
    assert _of(timeline, 3).status().short() == COMPLETE


def test_a_warp_that_wrote_more_than_its_region_holds_leaves_its_launch_partial_overwritten() -> None:
    ring, drain = _ring(64, 16)
    clock = Clock()
    writers = _launch(ring, clock, 3, (2, 1, 1), 2, events=5, close=False)
    for _ in range(35):  # block (1,0) warp 1: 40 events into a region of 16
        writers[3].event(1)
    for writer in writers:
        writer.close()
    timeline = _timeline()
    msg = _drained(drain)
    timeline.apply(msg)
    launch = _of(timeline, 3)
    status = launch.status()
    assert status.state == PARTIAL and status.fraction == 0.75
    assert status.short() == "partial 75%"
    assert status.words() == "partial: 75% of warps whole, overwritten"
    coverage = launch.coverage
    assert coverage.missing_text() == "block (1,0)"
    assert coverage.events_lost[OVERWRITTEN] == 24 and coverage.warps_lost[OVERWRITTEN] == 1
    assert coverage.events_kept == 3 * 5 + 16
    assert coverage.whole_event_fraction() == 15 / 31
    assert coverage.detail() == ("3 of 4 warps whole · not whole: block (1,0) · lost: 1 warp overwritten (24 events)")
    assert timeline.counters[RING].events_lost == 24  # the same loss, counted exactly by the ring
    layout = FlameLayout(launch.spans(), launch.duration_ns)
    (row,) = [i for i, at in enumerate(layout.rows) if at.kind == LANE and (at.block, at.warp) == (1, 1)]
    assert "lost       24 events (overwritten)" in describe_row(launch, layout, row)  # the warp's pane
    assert "lost       24 events (overwritten)" in describe_row(launch, layout, layout.block_row[1])
    assert not [line for line in describe_row(launch, layout, layout.block_row[0]) if line.startswith("lost")]


def test_a_warp_overwritten_across_drains_is_flagged_in_its_next_chunk() -> None:
    ring, drain = _ring(64, 16)
    (writer,) = _launch(ring, Clock(), 3, (1, 1, 1), 1, events=4, close=False)
    timeline = _timeline()
    timeline.apply(_drained(drain))
    for t in (20, 30):  # twice 40 events between two drains: 24 of them overwritten each time
        for _ in range(40):
            writer.event(1)
        timeline.apply(_drained(drain, t))
    for _ in range(3):
        writer.event(1)
    writer.close()
    timeline.apply(_drained(drain, 40))
    launch = _of(timeline, 3)
    assert launch.status().words() == "partial: 0% of warps whole, overwritten"
    assert launch.coverage.lost_of((0, 0, 0), 0) == "48 events (overwritten)"  # named twice, said once
    assert launch.coverage.events_kept == 4 + 16 + 16 + 3


def test_a_burst_of_launches_beyond_the_ring_leaves_the_older_ones_lapped() -> None:
    ring, drain = _ring(16 * CLAIM_STRIPES, 16)
    clock = Clock()
    for number in (1, 2, 3):  # 36 warps into the 16 regions of their stripe before any drain
        _launch(ring, clock, number, (12, 1, 1), 1)
    timeline = _timeline()
    timeline.apply(_drained(drain))
    assert set(timeline.launches) == {(RING, MODULE, 0, 2), (RING, MODULE, 0, 3)}  # launch 1 left no name
    older = _of(timeline, 2)
    status = older.status()
    assert (status.short(), status.words()) == ("partial 33%", "partial: 33% of warps whole, lapped")
    assert older.coverage.missing_text(shown=3) == "blocks (0,0), (1,0), (2,0) and 5 more"
    assert older.coverage.unnamed_lapped == 20
    assert _of(timeline, 3).status().short() == COMPLETE  # read whole: the same lap did not touch it
    assert timeline.counters[RING].warps_unread == 20


def test_a_launch_whose_every_warp_the_ring_went_round_is_not_traced() -> None:
    ring, drain = _ring(16 * CLAIM_STRIPES, 16)
    clock = Clock()
    _launch(ring, clock, 4, (4, 1, 1), 1, events=0, close=False)  # began, nothing written yet
    timeline = _timeline()
    timeline.apply(_drained(drain))
    assert _of(timeline, 4).status().short() == RUNNING
    flood(ring, records_per_warp=4, module=MODULE, launch=9)  # claims every region
    msg = _drained(drain, 20)
    timeline.apply(msg)
    launch = _of(timeline, 4)
    assert not launch.running  # its warps will never end: lost, not waiting
    status = launch.status()
    assert (status.state, status.short(), status.words()) == (NOT_TRACED, "not traced", "not traced: lapped")
    assert (
        launch.coverage.detail()
        == "0 of 4 warps whole · not whole: blocks (0,0), (1,0) and 2 more · lost: 4 warps lapped"
    )


def test_a_launch_running_when_the_stream_ends_is_cut() -> None:
    ring, drain = _ring(64, 64)
    writers = _launch(ring, Clock(), 3, (2, 1, 1), 2, close=False)
    for writer in writers[:3]:
        writer.close()
    session = Session()
    session.apply(
        [
            {"type": "kernel_tracing", "enabled": True, "device": "a ring file", "t_ns": 0},
            _module(),
            _drained(drain),
        ]
    )
    launch = session.kernels.launches[(RING, MODULE, 0, 3)]
    assert launch.status().short() == RUNNING
    session.end_stream("the recording ends here")
    status = launch.status()
    assert status.short() == "partial 75%"
    assert status.words() == f"partial: 75% of warps whole, {CUT}"
    assert launch.coverage.missing_text() == "block (1,0)"


def test_records_the_agent_dropped_for_this_client_are_said_dropped_at_the_source() -> None:
    ring, drain = _ring(64, 64)
    writers = _launch(ring, Clock(), 3, (2, 1, 1), 1, close=False)
    timeline = _timeline()
    timeline.apply(_drained(drain))
    for writer in writers:
        writer.event(1)
    _drained(drain, 20)  # dropped: never reaches the client
    for writer in writers:
        writer.event(1)
        writer.close()
    timeline.apply(_drained(drain, 30))
    launch = _of(timeline, 3)
    assert timeline.events_missed == 2
    assert launch.coverage.dropped_events == 2
    # Its warps began and ended, but events between were dropped: never said complete.
    assert (launch.status().short(), launch.status().words()) == ("partial", f"partial: {DROPPED}")


def test_an_old_recording_says_its_status_without_a_made_up_fraction() -> None:
    messages, _ = read_recording(EXAMPLE)
    timeline = KernelTimeline()
    for msg in messages:
        if isinstance(msg, dict) and msg.get("type", "").startswith("kernel_"):
            timeline.apply(msg)
    statuses = [launch.status() for launch in timeline.newest_first()]
    assert [status.state for status in statuses] == [COMPLETE] * 3  # every warp ended, nothing lost
    assert all(status.fraction is None and not status.shape_known for status in statuses)
    assert all(launch.coverage.grid is None for launch in timeline.launches.values())  # its words are stamps


def test_an_old_drain_that_lost_records_leaves_the_launches_then_running_partial_shape_unknown() -> None:
    ring, drain = _ring(64, 16)
    clock = Clock()
    _launch(ring, clock, 2, (1, 1, 1), 1)
    timeline = _timeline()
    first = _drained(drain)
    writers = _launch(ring, clock, 3, (2, 1, 1), 2, events=5, close=False)
    for _ in range(35):
        writers[3].event(1)
    for writer in writers:
        writer.close()
    second = _drained(drain, 20)
    for msg in (first, second):  # as a drain before shapes and losses travelled sent them
        old = {key: value for key, value in msg.items() if key != "losses"}
        chunks = np.frombuffer(msg["chunks"], dtype=DEFAULT_LAYOUT.drained_dtype).copy()
        chunks["grid_x"] = chunks["grid_yz"] = chunks["block_warps"] = 0
        old["chunks"] = chunks.tobytes()
        timeline.apply(old)
    status = _of(timeline, 3).status()
    assert (status.state, status.fraction, status.shape_known) == (PARTIAL, None, False)
    assert status.short() == "partial"
    assert status.words() == f"partial: shape unknown, {LAPPED}"
    assert _of(timeline, 2).status().state == COMPLETE


def test_a_gemm_sized_launch_of_overwritten_warps_is_followed_in_bulk() -> None:
    """1,024 blocks of 4 warps, 2,048 events each, into regions of 1,024: every warp keeps its
    newest half, and the launch says so."""
    ring, drain = _ring(4096, 1024)
    flood(ring, records_per_warp=2048, warps=4096, module=MODULE, launch=5, block_warps=4)
    timeline = _timeline()
    batch = drain.drain()
    for part in batch.split(16384):
        timeline.apply(kernel_records(part, t_ns=10))
    launch = _of(timeline, 5)
    coverage = launch.coverage
    assert coverage.expected_warps == 4096 and coverage.warps_seen == 4096
    assert coverage.events_kept == 4096 * 1024 and coverage.events_lost[OVERWRITTEN] == 4096 * 1024
    assert launch.status().words() == "partial: 0% of warps whole, overwritten"
    assert coverage.missing_text() == "blocks (0,0), (1,0) and 1,022 more"
    assert int((batch.losses["reason"] == LOSS_OVERWRITTEN).sum()) == 4096


def test_a_launch_of_a_process_whose_stream_ended_is_cut_while_the_others_go_on() -> None:
    ring, drain = _ring(64, 64)
    writers = _launch(ring, Clock(), 3, (2, 1, 1), 1, close=False)
    writers[0].close()
    session = Session()
    session.apply(
        [
            m.process(pid=101, start_time=101),
            {"type": "kernel_tracing", "enabled": True, "device": "a ring file", "t_ns": 0},
            _module(),
            _drained(drain),
            m.process(pid=102, start_time=102),
        ]
    )
    launch = session.kernel_processes.newest_first()[0]
    assert launch.status().short() == RUNNING
    session.apply([m.process(pid=101, start_time=101, state=m.PROCESS_ENDED, reason="killed")])
    assert launch.status().words() == f"partial: 50% of warps whole, {CUT}"
