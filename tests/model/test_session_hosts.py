"""A session of the ranks of a job across machines: pids of different hosts are often the same,
so a process is told apart by its host and pid, named ``host/rank N``, and placed under a parent
of its own machine only."""

from __future__ import annotations

from typing import Any

from iket_tui.model.behind import passes_behind
from iket_tui.model.nodes import RUNNING
from iket_tui.model.session import Session
from iket_tui.model.synthetic import Lowering, agent_hello
from iket_tui.protocol import messages as m
from iket_tui.sources.merged import process_message

PID = 4242  # the same pid on every host, as a container's ranks often have


def on(host: str, pid: int, *messages: dict[str, Any]) -> list[dict[str, Any]]:
    return [process_message(pid=pid, start_time=1, host=host), *messages]


def hello(pid: int, rank: int, ppid: int = 1) -> dict[str, Any]:
    msg = agent_hello(pid=pid)
    msg["rank"], msg["ppid"] = rank, ppid
    return msg


def test_the_same_pid_on_two_hosts_is_two_processes_named_by_host_and_rank() -> None:
    session = Session(by_rank=True)
    session.apply(on("node1", PID, hello(PID, 0), *Lowering(1, "gemm", 1_000_000).messages()))
    session.apply(on("node2", PID, hello(PID, 8), *Lowering(1, "gemm", 1_000_000).messages()))
    session.apply(on("node1", PID, *Lowering(2, "add", 5_000_000_000).messages()))
    tree = session.tree
    assert [tree.process_label(process) for process in tree.processes] == ["node1/rank 0", "node2/rank 8"]
    assert [process.name for process in tree.processes] == [f"node1/pid {PID}", f"node2/pid {PID}"]
    assert [len(process.compiles) for process in tree.processes] == [2, 1]  # each its own compiles
    assert session.counters.malformed == 0  # the second host's hello is not taken for a lie


def test_a_parent_is_looked_for_on_the_same_host_only() -> None:
    session = Session()
    session.apply(on("node1", 100, hello(100, 0)))
    session.apply(on("node2", 200, hello(200, 1, ppid=100)))  # pid 100 of node2 is not watched
    session.apply(on("node2", 100, hello(100, 2)))
    node1, node2_child, node2_parent = session.tree.processes
    assert node2_child.parent is node2_parent
    assert node2_child.parent is not node1


def test_the_rank_behind_is_named_with_its_host() -> None:
    slow = "tl.LayoutInference"
    session = Session(stuck_after_ns=1_000_000_000, by_rank=True)
    for host, rank in (("node1", 0), ("node2", 8), ("node5", 37)):
        spec = Lowering(1, "gemm", 1_000_000, slow={slow: 10**12} if rank == 37 else None)
        messages = spec.messages(until_ns=50_000_000_000) if rank == 37 else spec.messages()
        session.apply(on(host, PID, hello(PID, rank), *messages))
    (behind,) = passes_behind(session.tree, 41_000_000_000)
    assert behind.text.startswith(f"node5/rank 37 has been in `{slow}` 4")
    assert "; the other ranks finished it in " in behind.text
    assert session.tree.processes[2].compiles[0].status is RUNNING


def test_a_process_message_without_a_host_is_a_process_of_this_machine() -> None:
    session = Session()
    session.apply([m.process(pid=PID, start_time=1), hello(PID, 0)])
    session.apply(on("node1", PID, hello(PID, 1)))
    assert [process.name for process in session.tree.processes] == [f"pid {PID}", f"node1/pid {PID}"]
