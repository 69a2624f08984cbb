"""What a client may send the agent: a hello and small requests, read with a client's limits.

Clients that break them are hung up on, counted, and named in one line; the agent's other
clients are served on. The agent runs in this very process.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
from collections.abc import Iterator

import pytest
from agent_wire import WireClient

import iket_tui.agent
from iket_tui.agent.client_session import MAX_CLIENT_FRAME
from iket_tui.agent.server import MAX_CLIENTS
from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import encode_message
from iket_tui.protocol.frames import HEADER, encode_frame


@pytest.fixture
def agent() -> Iterator[iket_tui.agent.Agent]:
    agent = iket_tui.agent.start(heartbeat_s=0.05)
    yield agent
    iket_tui.agent.stop()


def _greeted(agent: iket_tui.agent.Agent) -> WireClient:
    return WireClient(agent.socket_path)


def _hung_up(sock: socket.socket) -> bool:
    sock.settimeout(30)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass
    sock.close()
    return True


def test_clients_that_break_a_clients_limits_are_refused_counted_and_named(
    agent: iket_tui.agent.Agent, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="iket_tui.agent")
    garbage = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    garbage.connect(str(agent.socket_path))
    garbage.sendall(b"GET / HTTP/1.1\r\n\r\n")
    assert _hung_up(garbage)

    deep = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    deep.connect(str(agent.socket_path))
    deep.sendall(encode_frame(b"\x91" * 60_000 + b"\x90"))  # 60,000 arrays deep, within the size limit
    assert _hung_up(deep)

    huge = _greeted(agent)
    huge.sock.sendall(HEADER.pack(16 * 1024 * 1024, 0) + b"\x90" * 4096)  # a 16 MiB frame, announced
    assert _hung_up(huge.sock)

    assert agent.refused_clients == 3
    me = f"client pid {os.getpid()}: "
    assert list(agent.refusals) == [
        me
        + f"sent a frame beyond a client's limits (frame length 1195725856 exceeds the {MAX_CLIENT_FRAME} byte limit)",
        me + "sent undecodable message body (StackError)",
        me + f"sent a frame beyond a client's limits (frame length 16777216 exceeds the {MAX_CLIENT_FRAME} byte limit)",
    ]
    assert [record.getMessage() for record in caplog.records] == [f"refused {why}" for why in agent.refusals]

    client = _greeted(agent)
    _, sync = client.catch_up()
    assert sync["type"] == m.SYNC


def test_requests_sent_faster_than_answers_are_read_all_get_answered_in_order(agent: iket_tui.agent.Agent) -> None:
    client = _greeted(agent)
    client.catch_up()
    asked = 200
    client.sock.sendall(b"".join(encode_message(m.request(id=n, what=m.WHAT_STACKS)) for n in range(asked)))
    answers = [client.read_until(lambda msg: msg["type"] == m.RESPONSE) for _ in range(asked)]
    assert [(answer["id"], answer["ok"]) for answer in answers] == [(n, True) for n in range(asked)]
    assert agent.refused_clients == 0


def test_one_client_more_than_the_agent_serves_is_refused(agent: iket_tui.agent.Agent) -> None:
    waiting = []
    for _ in range(MAX_CLIENTS):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(agent.socket_path))
        waiting.append(sock)
    for sock in waiting:  # each is served: its hello arrives
        sock.settimeout(30)
        head = sock.recv(HEADER.size, socket.MSG_WAITALL)
        assert struct.unpack(">I", head[:4])[0] > 0
    extra = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    extra.connect(str(agent.socket_path))
    assert _hung_up(extra)
    assert list(agent.refusals) == [f"client pid {os.getpid()}: {MAX_CLIENTS} clients are served already"]
    for sock in waiting:
        sock.close()
