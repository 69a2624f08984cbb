"""A recording that lies is not believed: a count no agent could have reached, or a hello of
another process or protocol in the middle of a process's stream, is counted as malformed and
changes nothing the views show; what an honest agent sends (its counts, its hello again after
a reconnection) is still shown."""

from __future__ import annotations

from typing import Any

import pytest

from iket_tui.model.fields import MAX_COUNT
from iket_tui.model.session import Session
from iket_tui.protocol import messages as m

PID, START = 4242, 99


def _hello(
    pid: int = PID, start_time: int = START, proto: tuple[int, int] = m.PROTOCOL_VERSION, **more: Any
) -> m.Message:
    msg = m.hello(
        role="agent",
        pid=pid,
        start_time=start_time,
        software_version="0.1",
        capabilities=["passes"],
        argv=more.pop("argv", ["python", "honest.py"]),
        t_ns=more.pop("t_ns", 1),
    )
    msg["proto"] = list(proto)
    return msg


def _shown(session: Session) -> tuple[Any, ...]:
    """What the header and the process row show."""
    process, counters = session.process, session.counters
    return (
        process.pid,
        process.argv,
        process.start_time,
        process.version,
        counters.reconnections,
        counters.dropped,
        counters.produced,
        counters.backlog,
        counters.backlog_lost,
        counters.open_passes,
        counters.observer_errors,
        counters.filtered_passes,
        session.last_t_ns,
    )


def _honest_session() -> Session:
    session = Session()
    session.apply(
        [
            _hello(),
            m.sync(t_ns=2, backlog=3, backlog_lost=1),
            m.heartbeat(t_ns=3, produced=10, dropped=2, open_passes=1),
        ]
    )
    return session


TOO_MANY = MAX_COUNT + 1
LIES: dict[str, dict[str, Any]] = {
    "heartbeat dropped 2**63": {**m.heartbeat(t_ns=4, produced=10, dropped=2**63, open_passes=0)},
    "heartbeat dropped past 2**53": {**m.heartbeat(t_ns=4, produced=10, dropped=TOO_MANY, open_passes=0)},
    "heartbeat dropped negative": {**m.heartbeat(t_ns=4, produced=10, dropped=-5, open_passes=0)},
    "heartbeat produced 2**63": {**m.heartbeat(t_ns=4, produced=2**63, dropped=2, open_passes=0)},
    "heartbeat open passes negative": {**m.heartbeat(t_ns=4, produced=10, dropped=2, open_passes=-1)},
    "heartbeat observer errors 2**63": {
        **m.heartbeat(t_ns=4, produced=10, dropped=2, open_passes=0, observer_errors=2**63)
    },
    "heartbeat filtered negative": {
        **m.heartbeat(t_ns=4, produced=10, dropped=2, open_passes=0),
        "filtered_passes": -3,
    },
    "dropped total 2**63": m.dropped(t_ns=4, count=1, total=2**63),
    "dropped count negative": m.dropped(t_ns=4, count=-1, total=3),
    "sync backlog negative": m.sync(t_ns=4, backlog=-100, backlog_lost=0),
    "sync backlog lost 2**63": m.sync(t_ns=4, backlog=0, backlog_lost=2**63),
    "checkpoint dropped 2**63": m.checkpoint(messages=5, dropped=2**63, t_ns=4),
    "bye dropped 2**63": m.bye(t_ns=4, produced=10, dropped=2**63, reason="exit"),
    "hello of another pid": _hello(pid=666, start_time=7, argv=["python", "liar.py"], t_ns=4),
    "hello of another start time": _hello(start_time=START + 1, argv=["python", "liar.py"], t_ns=4),
    "hello of another major protocol": _hello(proto=(2, 0), argv=["python", "liar.py"], t_ns=4),
}


@pytest.mark.parametrize("lie", LIES.values(), ids=LIES.keys())
def test_a_lie_in_mid_stream_is_counted_as_malformed_and_shown_as_nothing(lie: dict[str, Any]) -> None:
    session = _honest_session()
    before = _shown(session)
    session.apply([lie])
    assert session.counters.malformed == 1
    assert _shown(session) == before


def test_the_largest_possible_count_is_still_believed() -> None:
    session = _honest_session()
    session.apply([m.heartbeat(t_ns=4, produced=MAX_COUNT, dropped=MAX_COUNT, open_passes=0)])
    assert session.counters.malformed == 0
    assert (session.counters.produced, session.counters.dropped) == (MAX_COUNT, MAX_COUNT)


def test_the_same_agent_again_is_a_reconnection_and_its_drops_add_up() -> None:
    session = _honest_session()
    session.apply([_hello(t_ns=10, proto=(1, 0)), m.heartbeat(t_ns=11, produced=12, dropped=3, open_passes=0)])
    counters = session.counters
    assert (counters.malformed, counters.reconnections, counters.dropped) == (0, 1, 5)
    assert (session.process.pid, session.process.argv) == (PID, ["python", "honest.py"])


def test_in_a_stream_of_several_processes_a_hello_must_name_the_process_whose_stream_it_is_in() -> None:
    session = Session()
    session.apply(
        [
            m.process(pid=101, start_time=1),
            _hello(pid=101, start_time=1, argv=["python", "worker-a.py"]),
            m.process(pid=102, start_time=2),
            _hello(pid=103, start_time=3, argv=["python", "liar.py"]),  # names another process
            _hello(pid=102, start_time=2, argv=["python", "worker-b.py"]),
        ]
    )
    assert session.counters.malformed == 1
    assert [(p.pid, p.argv) for p in session.tree.processes] == [
        (101, ["python", "worker-a.py"]),
        (102, ["python", "worker-b.py"]),
    ]
