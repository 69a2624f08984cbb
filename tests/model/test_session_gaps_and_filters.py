"""What the session makes of an agent that comes back after a gap, and of a client's filter:
the process is live again and the gap counted; passes left out by the filter are counted as
asked for, never as lost."""

from __future__ import annotations

from iket_tui.model.session import Session
from iket_tui.model.synthetic import agent_hello
from iket_tui.protocol import messages as m


def _bye(t_ns: int, **fields: object) -> m.Message:
    return {"type": m.BYE, "reason": "stopped", "produced": 10, "dropped": 0, "t_ns": t_ns, **fields}


def test_an_agent_that_says_hello_again_is_live_again_and_the_gap_is_counted() -> None:
    session = Session()
    session.apply([agent_hello(pid=9), _bye(5)])
    assert session.process.exit_reason == "stopped"
    assert session.counters.reconnections == 0
    session.apply([agent_hello(pid=9)])
    assert session.process.exit_reason is None
    assert session.counters.reconnections == 1
    assert session.counters.malformed == 0


def test_passes_left_out_by_the_filter_are_counted_from_the_agents_reports() -> None:
    session = Session()
    sync = {"type": m.SYNC, "backlog": 0, "backlog_lost": 0, "t_ns": 1, "filtered": 0, "filtered_passes": 0}
    beat = {"type": m.HEARTBEAT, "produced": 40, "dropped": 0, "t_ns": 2, "filtered": 8, "filtered_passes": 4}
    late = {"type": m.HEARTBEAT, "produced": 40, "dropped": 0, "t_ns": 3, "filtered": 6, "filtered_passes": 3}
    session.apply([agent_hello(pid=9), sync, beat, late])
    assert session.counters.filtered_passes == 4  # a total that only grows, as drops are
    session.apply([_bye(4, filtered=20, filtered_passes=10)])
    assert session.counters.filtered_passes == 10
    assert session.counters.dropped == 0 and session.counters.malformed == 0


def test_counts_of_an_agent_that_came_back_add_to_those_before_the_gap() -> None:
    """A new connection's running totals start again from 0: what the first connection reported
    stays counted, and the second's adds to it (as in a recording of both)."""
    session = Session()

    def sync(t_ns: int) -> m.Message:
        return {"type": m.SYNC, "backlog": 0, "backlog_lost": 0, "t_ns": t_ns, "filtered": 0, "filtered_passes": 0}

    def beat(t_ns: int, filtered_passes: int) -> m.Message:
        return {
            "type": m.HEARTBEAT,
            "produced": 40,
            "dropped": 0,
            "t_ns": t_ns,
            "filtered": 2 * filtered_passes,
            "filtered_passes": filtered_passes,
        }

    dropped = {"type": m.DROPPED, "count": 30, "total": 30, "t_ns": 2}
    session.apply(
        [agent_hello(pid=9), sync(1), dropped, beat(2, 10), _bye(3, dropped=30, filtered=20, filtered_passes=10)]
    )
    assert (session.counters.dropped, session.counters.filtered_passes) == (30, 10)
    session.apply([agent_hello(pid=9), sync(4), beat(5, 6), {"type": m.DROPPED, "count": 20, "total": 20, "t_ns": 6}])
    assert (session.counters.dropped, session.counters.filtered_passes) == (50, 16)
    session.apply([{"type": m.CHECKPOINT, "messages": 9, "dropped": 50, "t_ns": 7}])  # the recorder's, over both
    assert session.counters.dropped == 50
    assert session.counters.reconnections == 1 and session.counters.malformed == 0
