"""Every message the session is given is counted exactly once, and a malformed one changes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from iket_tui.model.session import Session
from iket_tui.protocol import messages as m

MALFORMED: dict[str, dict[str, Any]] = {
    "hello-pid": {"type": m.HELLO, "role": "agent", "pid": "1", "argv": ["python"], "t_ns": 5},
    "hello-version": {"type": m.HELLO, "role": "agent", "pid": 1, "argv": ["python"], "version": 3, "t_ns": 5},
    "sync-backlog": {"type": m.SYNC, "t_ns": 5, "backlog": "x", "backlog_lost": 0},
    "sync-time": {"type": m.SYNC, "t_ns": None, "backlog": 7, "backlog_lost": 1},
    "dropped-count": {"type": m.DROPPED, "t_ns": 5, "count": 1.5, "total": 9},
    "dropped-time": {"type": m.DROPPED, "t_ns": "5", "count": 1, "total": 9},
    "checkpoint-dropped": {"type": m.CHECKPOINT, "messages": 1, "dropped": [9], "t_ns": 5},
    "bye-dropped": {"type": m.BYE, "t_ns": 5, "produced": 1, "dropped": None, "reason": "exit"},
    "bye-time": {"type": m.BYE, "t_ns": 5.5, "produced": 1, "dropped": 9, "reason": "exit"},
}


def _state(session: Session) -> tuple[Any, ...]:
    process, counters = session.process, session.counters
    return (
        process.pid,
        process.argv,
        process.version,
        process.seen_hello,
        process.exit_reason,
        counters.backlog,
        counters.backlog_lost,
        counters.dropped,
        session.last_t_ns,
    )


@pytest.mark.parametrize("msg", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_session_message_is_counted_once_and_changes_nothing(msg: dict[str, Any]) -> None:
    session = Session()
    untouched = _state(session)
    session.apply([msg])
    counters = session.counters
    assert (counters.malformed, counters.events, counters.heartbeats, session.session_messages) == (1, 0, 0, 0)
    assert _state(session) == untouched


def test_each_message_lands_in_one_count() -> None:
    stream: list[Any] = [
        m.hello(role="agent", pid=1, start_time=2, software_version="9", capabilities=[]),
        m.sync(t_ns=1, backlog=0, backlog_lost=0),
        m.pass_context("pass_context_enter", compile=1, context=0, t_ns=2),
        m.heartbeat(t_ns=3, produced=1, dropped=0, open_passes=0),
        {"type": "from_the_future", "t_ns": 4},
        *MALFORMED.values(),
        m.bye(t_ns=5, produced=1, dropped=0, reason="exit"),
    ]
    session = Session()
    session.apply(stream)
    counters = session.counters
    counted = counters.events + counters.heartbeats + session.session_messages + counters.malformed + counters.unknown
    assert counted == len(stream)
    assert (counters.malformed, counters.unknown, counters.heartbeats, session.session_messages) == (
        len(MALFORMED),
        1,
        1,
        3,
    )
