"""A session of several processes: a row per process under its parent, each process's compiles
under its row (they number their compiles each their own way), counts per process summed over the
session, and one process's stream ending while the others go on."""

from __future__ import annotations

from typing import Any

from test_model_visible_rows import shown

from iket_tui.model.nodes import DONE, FAILED, INCOMPLETE, RUNNING
from iket_tui.model.pass_tree import MAX_PROCESS_DEPTH
from iket_tui.model.session import Session
from iket_tui.model.synthetic import Lowering, agent_hello
from iket_tui.model.visible_rows import VisibleRows
from iket_tui.protocol import messages as m

PARENT, WORKER_A, WORKER_B = 100, 201, 202


def hello(pid: int, ppid: int, rank: int | None = None) -> dict[str, Any]:
    msg = agent_hello(pid=pid, argv=("python", f"worker{pid}.py"))
    msg["ppid"] = ppid
    if rank is not None:
        msg["rank"] = rank
    return msg


def heartbeat(produced: int, dropped: int) -> dict[str, Any]:
    return m.heartbeat(t_ns=5, produced=produced, dropped=dropped, open_passes=0)


def of(pid: int, *messages: dict[str, Any]) -> list[dict[str, Any]]:
    return [m.process(pid=pid, start_time=1), *messages]


def three_processes() -> Session:
    """A parent that compiles nothing and two workers, each compiling its compile 1; the
    second worker introduces itself before the first, and the parent last."""
    session = Session()
    session.apply(of(WORKER_B, hello(WORKER_B, PARENT), *Lowering(1, "add", 1_000_000).messages()))
    session.apply(
        of(WORKER_A, hello(WORKER_A, PARENT), *Lowering(1, "gemm", 2_000_000, fail_in="tl.LayoutInference").messages())
    )
    session.apply(of(PARENT, hello(PARENT, 1)))
    return session


def test_each_process_has_a_row_under_its_parent_and_its_compiles_under_it() -> None:
    session = three_processes()
    rows = VisibleRows(session.tree)
    rows.refresh()

    assert shown(rows) == [
        f"pid {PARENT}",
        f"  pid {WORKER_B}",
        "    compile add",
        f"  pid {WORKER_A}",
        "    compile gemm",
    ]
    worker_b, worker_a = session.tree.processes[0], session.tree.processes[1]
    assert [comp.id for comp in worker_b.compiles] == [1] and [comp.id for comp in worker_a.compiles] == [1]
    assert worker_a.compiles[0].status is FAILED and worker_b.compiles[0].status is DONE
    assert session.tree.process_status(worker_a) is FAILED
    assert session.tree.process_status(worker_b) is RUNNING, "its stream goes on"


def test_a_compile_row_sits_one_level_below_its_process() -> None:
    session = three_processes()
    rows = VisibleRows(session.tree)
    rows.set_expanded(session.tree.compiles[0], True)
    rows.refresh()

    lines = shown(rows)
    assert lines[2] == "    compile add"
    assert lines[3] == "      context 1"


def test_collapsing_a_process_hides_its_compiles_and_its_children() -> None:
    session = three_processes()
    rows = VisibleRows(session.tree)
    rows.refresh()
    parent = next(process for process in session.tree.processes if process.pid == PARENT)
    rows.set_expanded(parent, False)
    rows.refresh()

    assert shown(rows) == [f"pid {PARENT}"]
    assert rows.nearest_shown(session.tree.compiles[1]) is parent


def test_a_failure_in_a_collapsed_process_is_revealed() -> None:
    session = three_processes()
    rows = VisibleRows(session.tree)
    parent = next(process for process in session.tree.processes if process.pid == PARENT)
    rows.set_expanded(parent, False)
    failing = session.tree.compiles[1].failing
    assert failing is not None
    rows.reveal(failing)
    rows.refresh()

    assert rows.index_of(failing) is not None
    assert all(rows.is_expanded(process) for process in session.tree.processes)


def test_counts_are_kept_per_process_and_summed_for_the_session() -> None:
    session = Session()
    session.apply(of(WORKER_A, hello(WORKER_A, PARENT), heartbeat(40, 3)))
    assert session.counters.dropped == 3 and session.counters.produced == 40, "one process: its counts"
    session.apply(of(WORKER_B, hello(WORKER_B, PARENT), heartbeat(10, 2)))
    session.apply(of(WORKER_A, heartbeat(50, 4)))

    worker_a, worker_b = session.tree.processes
    assert (worker_a.counters.produced, worker_a.counters.dropped) == (50, 4)
    assert (worker_b.counters.produced, worker_b.counters.dropped) == (10, 2)
    assert (session.counters.produced, session.counters.dropped) == (60, 6)


def test_one_process_ending_marks_only_what_it_ran_incomplete() -> None:
    session = Session()
    slow_a = Lowering(1, "gemm", 1_000_000, slow={"tl.LayoutInference": 10**12}).messages(until_ns=5_000_000)
    slow_b = Lowering(1, "add", 1_000_000, slow={"tl.LayoutInference": 10**12}).messages(until_ns=5_000_000)
    session.apply(of(WORKER_A, hello(WORKER_A, PARENT), *slow_a))
    session.apply(of(WORKER_B, hello(WORKER_B, PARENT), *slow_b))
    session.apply([m.process(pid=WORKER_A, start_time=1, state=m.PROCESS_FAILED, reason="lost the connection")])

    comp_a, comp_b = session.tree.compiles
    assert comp_a.status is INCOMPLETE and comp_b.status is RUNNING
    worker_a, worker_b = session.tree.processes
    assert worker_a.stream_end == "lost the connection" and session.tree.process_status(worker_a) is FAILED
    assert session.tree.process_status(worker_b) is RUNNING
    running = session.tree.running_passes()
    assert running and all(node.compile is comp_b for node in running), "only the other process runs passes"


def test_ranks_and_a_single_process_session_stays_as_it_was() -> None:
    single = Session()
    single.apply([agent_hello(pid=7), *Lowering(1, "add", 1_000_000).messages()])
    assert not single.tree.several and single.tree.process.pid == 7
    assert single.tree.process.counters is single.counters

    ranked = Session(by_rank=True)
    ranked.apply(of(PARENT, hello(PARENT, 1)))
    ranked.apply(of(302, hello(302, PARENT, rank=1)))
    ranked.apply(of(301, hello(301, PARENT, rank=0)))
    tree = ranked.tree
    assert [tree.process_label(process) for process in tree.processes] == [f"pid {PARENT}", "rank 1", "rank 0"]
    rows = VisibleRows(tree)
    rows.refresh()
    assert shown(rows) == [f"pid {PARENT}", "  pid 301", "  pid 302"], "ranks in rank order under the launcher"


def test_processes_naming_each_other_as_parents_make_no_loop() -> None:
    session = Session()
    session.apply(of(1001, hello(1001, 1002)))
    session.apply(of(1002, hello(1002, 1001)))
    first, second = session.tree.processes
    assert first.parent is None or second.parent is None, "one of them stays at the top"
    rows = VisibleRows(session.tree)
    rows.refresh()
    assert sorted(shown(rows)) == sorted(["pid 1001", "  pid 1002"]) or sorted(shown(rows)) == sorted(
        ["pid 1002", "  pid 1001"]
    )


def test_a_chain_of_thousands_of_processes_is_drawn_at_most_so_deep() -> None:
    """Each process the child of the one before, announced from the deepest up: the tree keeps
    every one of them, in order, without the views walking the whole chain for each."""
    count = 3000
    session = Session()
    session.apply(
        [msg for pid in range(count, 0, -1) for msg in of(10_000 + pid, hello(10_000 + pid, 10_000 + pid - 1))]
    )
    rows = VisibleRows(session.tree)
    rows.refresh()
    assert len(rows) == count
    levels = [row.level for index in range(len(rows)) if (row := rows.row(index)) is not None]
    assert levels[:3] == [0, 1, 2] and max(levels) == MAX_PROCESS_DEPTH
    assert [rows.row(index).node.pid for index in (0, count - 1)] == [10_001, 10_000 + count]  # type: ignore[union-attr]


def test_a_recording_whose_first_process_comes_before_any_process_message_keeps_it_once() -> None:
    """As a recording of several processes starts: the first process's messages with no
    ``process`` message before them, then the second's, then the first's again."""
    session = Session()
    session.apply([hello(WORKER_A, PARENT), *Lowering(1, "gemm", 1_000_000).messages()])
    session.apply(of(WORKER_B, hello(WORKER_B, PARENT), *Lowering(1, "add", 1_000_000).messages()))
    session.apply(of(WORKER_A, heartbeat(10, 0)))
    assert [process.pid for process in session.tree.processes] == [WORKER_A, WORKER_B]
    assert [len(process.compiles) for process in session.tree.processes] == [1, 1]
