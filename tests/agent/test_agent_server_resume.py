"""A client that names the events it already has (``resume``) gets a catch-up of only what came
after them, and a ``sync`` that counts what the backlog no longer held. The agent runs in this
very process."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from agent_wire import WireClient, events

import iket_tui.agent
from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import encode_message

BACKLOG = 8


@pytest.fixture
def agent() -> Iterator[iket_tui.agent.Agent]:
    agent = iket_tui.agent.start(heartbeat_s=0.05, backlog=BACKLOG)
    yield agent
    iket_tui.agent.stop()
    agent.registry.configure(backlog=0)  # the events emitted here are no other test's backlog


def _client(agent: iket_tui.agent.Agent, resume: object) -> tuple[list[m.Message], m.Message]:
    """The catch-up and sync of a client whose hello names ``resume``."""
    client = WireClient(agent.socket_path, hello=False)
    client.next()
    hello = m.hello(role="client", pid=os.getpid(), start_time=0, software_version="test", capabilities=[])
    client.sock.sendall(encode_message({**hello, "resume": resume}))
    catch_up, sync = client.catch_up()
    client.close()
    return events(catch_up), sync


def _emit(agent: iket_tui.agent.Agent, count: int) -> list[m.Message]:
    sent = [m.callback_mismatch(compile=1, context=0, expected=None, got=f"e{n}", t_ns=n + 1) for n in range(count)]
    for msg in sent:
        agent.registry.emit(msg)
    return sent


def test_the_agent_announces_that_it_takes_streams_up_again(agent: iket_tui.agent.Agent) -> None:
    client = WireClient(agent.socket_path)
    assert "resume" in client.agent_hello["caps"]
    _, sync = client.catch_up()
    assert sync["produced"] == agent.produced
    assert "resumed" not in sync


def test_a_client_that_has_some_events_gets_only_the_later_ones(agent: iket_tui.agent.Agent) -> None:
    sent = _emit(agent, 6)
    produced = agent.produced
    catch_up, sync = _client(agent, produced - 2)
    assert catch_up == sent[-2:]
    assert (sync["backlog"], sync["backlog_lost"], sync["produced"], sync["resumed"]) == (2, 0, produced, produced - 2)

    catch_up, sync = _client(agent, produced)
    assert catch_up == []
    assert (sync["backlog"], sync["backlog_lost"]) == (0, 0)


def test_events_of_the_gap_the_backlog_no_longer_holds_are_counted_lost(agent: iket_tui.agent.Agent) -> None:
    produced = agent.produced
    sent = _emit(agent, BACKLOG + 5)
    catch_up, sync = _client(agent, produced)
    assert catch_up == sent[-BACKLOG:]
    assert (sync["backlog"], sync["backlog_lost"], sync["resumed"]) == (BACKLOG, 5, produced)


@pytest.mark.parametrize("resume", [10**9, -1, "3", None])
def test_a_resume_that_cannot_be_this_processs_is_ignored(agent: iket_tui.agent.Agent, resume: object) -> None:
    sent = _emit(agent, 3)
    catch_up, sync = _client(agent, resume)
    assert catch_up[-3:] == sent
    assert "resumed" not in sync
    assert sync["backlog"] + sync["backlog_lost"] == sync["produced"] == agent.produced
