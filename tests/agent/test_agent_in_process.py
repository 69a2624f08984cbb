"""``iket_tui.agent.start()`` and ``stop()`` called in code, in this very process."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from agent_wire import WireClient, events, wait_until

import iket_tui.agent
from iket_tui import endpoints
from iket_tui.protocol import messages as m


@pytest.fixture
def agent() -> Iterator[iket_tui.agent.Agent]:
    agent = iket_tui.agent.start(heartbeat_s=0.05)
    yield agent
    iket_tui.agent.stop()


def test_start_is_idempotent_and_serves_this_process(agent: iket_tui.agent.Agent) -> None:
    assert iket_tui.agent.start() is agent
    assert iket_tui.agent.current() is agent
    start_time = endpoints.process_start_time(os.getpid())
    assert start_time is not None
    assert agent.socket_path == endpoints.socket_path_for(os.getpid(), start_time)
    assert agent.socket_path.exists()


def test_clients_see_live_events_heartbeats_and_a_goodbye_on_stop(agent: iket_tui.agent.Agent) -> None:
    client = WireClient(agent.socket_path)
    client.catch_up()
    assert agent.wait_for_client(30)
    begin = m.compile_begin(compile=1, label="lower", kernel="k", target=None, t_ns=1)
    end = m.compile_end(compile=1, label="lower", t_ns=2, duration_ns=1, ok=True)
    agent.registry.emit(begin)
    assert client.read_until(lambda msg: msg["type"] != m.HEARTBEAT) == begin
    beat = client.read_until(lambda msg: msg["type"] == m.HEARTBEAT)
    assert beat["produced"] == agent.produced
    agent.registry.emit(end)
    path = agent.socket_path

    iket_tui.agent.stop()

    received = client.read_to_end()
    assert received[-1]["type"] == m.BYE
    assert received[-1]["reason"] == "stopped"
    assert events(received) == [begin, end]
    assert not path.exists()
    assert iket_tui.agent.current() is None


def test_a_client_that_vanishes_is_forgotten_and_the_others_are_served_on(agent: iket_tui.agent.Agent) -> None:
    leaving = WireClient(agent.socket_path)
    leaving.catch_up()
    staying = WireClient(agent.socket_path)
    staying.catch_up()
    assert agent.clients == 2
    leaving.sock.close()
    mismatches = [m.callback_mismatch(compile=1, context=0, expected="a", got=f"b{n}", t_ns=n) for n in range(3000)]
    for msg in mismatches:
        agent.registry.emit(msg)
    for msg in mismatches:
        assert staying.read_until(lambda got: got["type"] != m.HEARTBEAT) == msg
    wait_until(lambda: agent.clients == 1)
    assert [stats.dropped for stats in agent.client_stats()] == [0]


def test_waiting_for_a_client_gives_up_after_the_timeout() -> None:
    agent = iket_tui.agent.start(wait_for_client_s=0.05)
    try:
        assert not agent.wait_for_client(0)
        assert agent.clients == 0
    finally:
        agent.stop()


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"queue": 0}, "queue must be at least 1, got 0"),
        ({"backlog": -1}, "backlog must be at least 0, got -1"),
        ({"heartbeat_s": 0}, "heartbeat_s must be positive, got 0"),
    ],
)
def test_bad_settings_are_refused_with_a_clear_message(options: dict[str, int], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        iket_tui.agent.start(**options)


def test_an_event_that_cannot_be_encoded_reaches_the_client_as_a_counted_drop(agent: iket_tui.agent.Agent) -> None:
    client = WireClient(agent.socket_path)
    client.catch_up()
    caught_up = len(client.received)
    assert agent.wait_for_client(30)
    before = m.compile_begin(compile=1, label="lower", kernel="k", target=None, t_ns=1)
    unencodable = {**m.codegen_begin(compile=1, t_ns=2), "name": {"a set msgpack cannot carry"}}
    after = m.compile_end(compile=1, label="lower", t_ns=3, duration_ns=2, ok=True)
    for msg in (before, unencodable, after):
        agent.registry.emit(msg)

    iket_tui.agent.stop()

    received = client.read_to_end()[caught_up:]
    assert events(received) == [before, after]
    (drop,) = [msg for msg in received if msg["type"] == m.DROPPED]
    assert (drop["count"], drop["total"]) == (1, 1)
    assert received[-1]["type"] == m.BYE and received[-1]["dropped"] == 1
