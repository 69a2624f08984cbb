"""The same pass compared across processes: a rank still in a pass the other ranks finished
long ago is named with both times, in the live tree and in a stream read once (dump)."""

from __future__ import annotations

from typing import Any

from test_session_processes import hello, of

from iket_tui.model.behind import BehindInStream, node_behind, passes_behind
from iket_tui.model.session import Session
from iket_tui.model.synthetic import Lowering
from iket_tui.protocol import messages as m

LAUNCHER = 50
SLOW = "tl.LayoutInference"


def ranks_session(slow_rank: int, *, ranks: int = 4, by_rank: bool = True) -> tuple[Session, int]:
    """``ranks`` processes lowering the same kernel; ``slow_rank`` is still in ``SLOW`` when the
    others are done. Returns the session and the agent time then."""
    session = Session(stuck_after_ns=1_000_000_000, by_rank=by_rank)
    session.apply(of(LAUNCHER, hello(LAUNCHER, 1)))
    now = 0
    for rank in range(ranks):
        pid = 100 + rank
        spec = Lowering(1, "gemm", 1_000_000, slow={SLOW: 10**12} if rank == slow_rank else None)
        messages = spec.messages(until_ns=50_000_000_000) if rank == slow_rank else spec.messages()
        session.apply(of(pid, hello(pid, LAUNCHER, rank=rank), *messages))
        now = max(now, spec.end_ns() if rank != slow_rank else 0)
    return session, 41_000_000_000


def test_a_rank_stuck_in_a_pass_the_others_finished_is_named_with_both_times() -> None:
    session, now = ranks_session(slow_rank=3)
    tree = session.tree
    (behind,) = passes_behind(tree, now)
    (stuck,) = tree.stuck_passes(now)
    assert stuck.name == SLOW
    others = [node.duration_ns for node in tree.passes if node.name == SLOW and node.duration_ns is not None]
    assert behind.who == "rank 3" and behind.finished_by == 3 and behind.others == 3
    assert behind.text.startswith(f"rank 3 has been in `{SLOW}` 4")
    assert behind.text.endswith("the other ranks finished it in " + behind.text.rsplit(" in ", 1)[1])
    assert min(others) <= behind.others_ns <= max(others)
    assert node_behind(tree, stuck, now) == behind


def test_without_ranks_processes_are_named_by_pid_and_one_process_is_never_behind() -> None:
    session, now = ranks_session(slow_rank=0, by_rank=False)
    (behind,) = passes_behind(session.tree, now)
    assert behind.who == "pid 100" and "the other processes finished it" in behind.text

    single = Session(stuck_after_ns=1_000_000_000)
    single.apply(Lowering(1, "gemm", 1_000_000, slow={SLOW: 10**12}).messages(until_ns=50_000_000_000))
    assert single.tree.stuck_passes(now) and passes_behind(single.tree, now) == []


def test_a_stuck_pass_no_other_process_ran_is_stuck_but_not_behind() -> None:
    session = Session(stuck_after_ns=1_000_000_000)
    session.apply(
        of(
            101,
            hello(101, LAUNCHER),
            *Lowering(1, "gemm", 1_000_000, slow={SLOW: 10**12}).messages(until_ns=50_000_000_000),
        )
    )
    session.apply(of(102, hello(102, LAUNCHER)))
    now = 41_000_000_000
    assert session.tree.stuck_passes(now) and passes_behind(session.tree, now) == []


def stream(slow_rank: int, *, finished: bool) -> list[dict[str, Any]]:
    """Four ranks' messages as a recording holds them: the first one before any ``process``
    message, the slowed one cut while in ``SLOW`` unless ``finished`` (the others then lower
    40 s later: the stream ends with the slowed one in it that long)."""
    out: list[dict[str, Any]] = []
    for rank in range(4):
        pid = 100 + rank
        slow = {SLOW: 30_000_000_000} if rank == slow_rank else None
        start = 40_000_000_000 if rank != slow_rank and not finished else 1_000_000
        messages = Lowering(1, "gemm", start, slow=slow).messages()
        if rank == slow_rank and not finished:
            entered = next(msg["t_ns"] for msg in messages if msg.get("name") == SLOW)
            messages = [msg for msg in messages if msg["t_ns"] <= entered]
        body = [hello(pid, LAUNCHER, rank=rank), *messages]
        out += body if rank == 0 else [m.process(pid=pid, start_time=1), *body]
    return out


def test_a_stream_read_once_tells_who_was_behind_in_which_pass() -> None:
    late = BehindInStream()
    for msg in stream(slow_rank=2, finished=True):
        late.apply(msg)
    (line,) = late.at_end()
    assert line["type"] == "pass_behind" and line["process"] == "rank 2" and line["name"] == SLOW
    assert line["running"] is False and line["spent_ns"] >= 30_000_000_000
    assert line["summary"].startswith(f"rank 2 was in `{SLOW}` 30")
    assert "the other ranks finished it in" in line["summary"]

    cut = BehindInStream()
    for msg in stream(slow_rank=0, finished=False):
        cut.apply(msg)
    (line,) = cut.at_end()
    assert line["process"] == "rank 0" and line["running"] is True
    assert line["summary"].startswith(f"rank 0 has been in `{SLOW}`")


def test_a_stream_where_every_rank_took_as_long_names_nobody() -> None:
    even = BehindInStream()
    for msg in stream(slow_rank=-1, finished=True):
        even.apply(msg)
    assert even.at_end() == []


def test_a_rank_whose_stream_ended_mid_pass_was_in_it_until_then_not_to_the_end() -> None:
    """Rank 0's stream ends (killed) 5 s into ``SLOW``; the other ranks lower 40 s later. Rank 0
    was in the pass those 5 s, not up to the end of the recording."""
    messages = stream(slow_rank=0, finished=False)
    entered = next(msg["t_ns"] for msg in messages if msg.get("name") == SLOW)
    ended_at = next(index for index, msg in enumerate(messages) if msg["type"] == m.PROCESS)
    beat = m.heartbeat(t_ns=entered + 5_000_000_000, produced=100, dropped=0, open_passes=1)
    killed = m.process(pid=100, start_time=1, state=m.PROCESS_FAILED, reason="killed")
    late = BehindInStream()
    for msg in [*messages[:ended_at], beat, killed, *messages[ended_at:]]:
        late.apply(msg)
    assert late.last_t_ns > entered + 40_000_000_000

    (line,) = late.at_end()
    assert (line["process"], line["name"], line["running"], line["ended"]) == ("rank 0", SLOW, False, "killed")
    assert line["spent_ns"] == 5_000_000_000
    assert line["summary"].startswith(f"rank 0 was in `{SLOW}` 5.00 s until its stream ended; the other ranks ")


def test_a_rank_whose_stream_ended_just_after_it_entered_a_pass_is_not_behind_in_it() -> None:
    messages = stream(slow_rank=0, finished=False)
    ended_at = next(index for index, msg in enumerate(messages) if msg["type"] == m.PROCESS)
    ended = m.process(pid=100, start_time=1, state=m.PROCESS_ENDED, reason="the target said bye (exit)")
    late = BehindInStream()
    for msg in [*messages[:ended_at], ended, *messages[ended_at:]]:
        late.apply(msg)
    assert late.at_end() == []
