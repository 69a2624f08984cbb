"""What the detail pane says in a session of several processes: a process with its own
compiles, parent, children and counts; a stuck pass with how the other ranks did (described
without an app)."""

from __future__ import annotations

from typing import Any

from iket_tui.model.session import Session
from iket_tui.model.synthetic import Lowering, agent_hello
from iket_tui.protocol import messages as m
from iket_tui.ui.details import describe

LAUNCHER = 10
SLOW = "tl.LayoutInference"


def hello(pid: int, ppid: int, rank: int | None = None) -> dict[str, Any]:
    msg = agent_hello(pid=pid, argv=("python", "train.py"))
    msg["ppid"] = ppid
    if rank is not None:
        msg["rank"] = rank
    return msg


def three_ranks() -> Session:
    session = Session(stuck_after_ns=1_000_000_000, by_rank=True)
    session.apply([m.process(pid=LAUNCHER, start_time=1), hello(LAUNCHER, 1)])
    for rank in range(3):
        pid = 20 + rank
        slow = {SLOW: 10**12} if rank == 2 else None
        lowering = Lowering(1, "gemm", 1_000_000, slow=slow)
        messages = lowering.messages(until_ns=30_000_000_000) if slow else lowering.messages()
        heartbeat = m.heartbeat(t_ns=2, produced=100 + rank, dropped=rank, open_passes=0)
        session.apply([m.process(pid=pid, start_time=1), hello(pid, LAUNCHER, rank), heartbeat, *messages])
    return session


def test_a_process_of_several_shows_its_own_compiles_family_and_counts() -> None:
    session = three_ranks()
    launcher, _rank0, rank1, _rank2 = session.tree.processes

    fields = dict(describe(session, rank1, 0).fields)
    assert describe(session, rank1, 0).title == "process 21, rank 1"
    assert fields["parent"] == f"pid {LAUNCHER}"
    assert fields["compiles"] == "1 (0 failed)"
    assert fields["dropped"] == "1"
    assert fields["status"] == "running"
    launcher_fields = dict(describe(session, launcher, 0).fields)
    assert launcher_fields["children"] == "rank 0, rank 1, rank 2"
    assert launcher_fields["parent"] == "pid 1 (not watched)"


def test_a_stuck_pass_says_how_far_behind_the_other_ranks_it_is() -> None:
    session = three_ranks()
    now = 41_000_000_000
    (stuck,) = session.tree.stuck_passes(now)
    fields = dict(describe(session, stuck, now).fields)
    assert fields["status"].startswith("STUCK")
    assert fields["behind"].startswith(f"rank 2 has been in `{SLOW}` 4")
    assert "; the other ranks finished it in " in fields["behind"]
