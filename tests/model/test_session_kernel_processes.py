"""Kernels of several processes in one session: each process's kernel messages go to its own
timeline, so two processes whose rings and modules share ids keep their launches apart, each
launch names its process, and counts and stuck launches are told per process."""

from __future__ import annotations

from kernel_processes import ALL, DEVICE_T, HELD, RING, S, two_processes, two_tables

from iket_tui.demo.waiting_launch import waiting_stream
from iket_tui.model.session import Session


def test_launches_with_the_same_ring_module_and_launch_ids_stay_apart_per_process() -> None:
    session = Session()
    session.apply(two_processes())
    assert session.counters.malformed == 0
    kernels = session.kernel_processes
    launches = kernels.newest_first()
    assert [(launch.process.pid if launch.process else None, launch.key) for launch in launches] == [
        (102, (RING, 1, 0, 6)),
        (101, (RING, 1, 0, 6)),
    ]
    by_pid = {launch.process.pid: launch for launch in launches if launch.process is not None}
    assert by_pid[101].records == ALL and not by_pid[101].running and by_pid[101].progress.ended == 512
    assert by_pid[102].records == HELD and by_pid[102].running and by_pid[102].progress.unfinished == 4
    counts = {t.process.pid: (t.events_read, t.events_lost) for t in kernels.timelines.values() if t.process}
    assert counts == {101: (ALL, 0), 102: (HELD, 0)}
    assert kernels.several and kernels.who(by_pid[102]) == "pid 102 (rank 1)"
    assert session.kernels is kernels.timelines[session.process]  # the first process's, as with one


def test_the_stuck_launch_is_named_with_its_process_and_the_title_counts_per_process() -> None:
    session = Session()
    session.kernels.stuck_after_ns = 2 * S
    session.apply(two_processes())
    kernels = session.kernel_processes
    now = 20 * S
    (quiet,) = kernels.quiet(now)
    assert quiet.process is not None and quiet.process.pid == 102
    assert (
        kernels.unfinished(quiet, now)
        .summary(quiet.blocks())
        .startswith("pid 102 (rank 1): 1 of 64 blocks not finished: block (3,0), warps 4-7 last at `mma` (k_step 17), ")
    )
    assert kernels.title(following=True, quiet=1) == (
        "kernels of 2 processes, each with its ring on NVIDIA H200"
        f" · pid 101 (rank 0): 1 launch, {ALL:,} events · pid 102 (rank 1): 1 launch, {HELD:,} events"
        " · 0 lost · 1 running with a warp quiet for over 2.00 s  follow"
    )
    assert kernels.headline(now).startswith(f"kernels of 2 processes: {ALL + HELD:,} ev, 1 launch with a warp quiet ")


def test_one_process_reads_as_before() -> None:
    done = waiting_stream(agent_t_ns=5 * S, device_t_ns=DEVICE_T, hold_ns=S, ring_id=RING)
    hello = {"type": "hello", "role": "agent", "pid": 101, "argv": ["python"], "t_ns": S}
    tracing = {"type": "kernel_tracing", "enabled": True, "device": "NVIDIA H200", "t_ns": 4 * S}
    session = Session()
    session.apply([hello, tracing, done.table, done.held])
    kernels = session.kernel_processes
    assert not kernels.several and list(kernels.timelines.values()) == [session.kernels]
    (launch,) = kernels.newest_first()
    assert kernels.who(launch) == "" and kernels.title(following=False) == session.kernels.title(following=False)
    assert kernels.unfinished(launch, 20 * S).summary(launch.blocks()).startswith("1 of 64 blocks not finished")


def test_each_process_pairs_its_records_with_its_own_event_table() -> None:
    session = Session()
    session.apply(two_tables())
    named = {
        launch.process.pid: (launch.kernel, launch.module.kernels if launch.module else ())
        for launch in session.kernel_processes.newest_first()
        if launch.process is not None
    }
    assert named == {
        101: ("traced_gemm_kernel", ("traced_gemm_kernel",)),
        102: ("other_gemm_kernel", ("other_gemm_kernel",)),
    }


def test_the_events_kept_are_bounded_over_every_process_the_oldest_launch_summarised() -> None:
    session = Session()
    session.kernels.max_events = 50_000  # fewer than both processes' launches hold
    session.apply(two_processes())
    kernels = session.kernel_processes
    older, newer = (kernels.timelines[process] for process in session.tree.processes)
    assert sum(t.retained for t in (older, newer)) <= 50_000
    (summarised,) = older.launches.values()
    assert summarised.evicted and summarised.records == ALL and not summarised.running
    # let go once the other process's records came; its last 288 came after, counted in its records
    assert (older.evicted_launches, older.evicted_events, newer.evicted_launches) == (1, HELD, 0)
    assert " · 1 older launches summarised (events kept at most 50,000)" in kernels.title(following=False)
