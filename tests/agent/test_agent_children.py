"""Every process a watched program starts runs its own agent, whose hello names its parent:
multiprocessing with ``fork``, ``spawn`` and ``forkserver``, and ``subprocess`` running Python.

The target (``targets/children.py``) starts one child that lowers the add kernel. Under
``IKET_TUI_CHILD_WAIT`` every agent of the family waits for a client, as under ``iket-tui run``;
the test attaches to each one that appears below the target, found by its parent-pid chain.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from agent_wire import TARGETS, WAIT_S, WireClient, of_type, socket_of

from iket_tui.protocol import messages as m
from iket_tui.sources.descendants import agents_below

pytestmark = pytest.mark.tilelang


def _family(proc: subprocess.Popen[str]) -> dict[int, WireClient]:
    """A client on the target's agent and on every agent below it, attached as each appears,
    until the target exits; each client's stream then read to its end."""
    clients = {proc.pid: WireClient(socket_of(proc))}
    clients[proc.pid].catch_up()
    deadline = time.monotonic() + WAIT_S
    while proc.poll() is None:
        assert time.monotonic() < deadline, "the target did not finish"
        for endpoint in agents_below(proc.pid):
            if endpoint.pid not in clients:
                clients[endpoint.pid] = WireClient(endpoint.path)
                clients[endpoint.pid].catch_up()
        time.sleep(0.02)
    for client in clients.values():
        client.read_to_end()
    return clients


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver", "subprocess"])
def test_a_child_process_serves_its_own_agent_and_its_hello_names_its_parent(method: str) -> None:
    env = {**os.environ, "IKET_TUI": "1", "IKET_TUI_CHILD_WAIT": "60"}
    proc = subprocess.Popen(
        [sys.executable, str(TARGETS / "children.py"), method],
        cwd=TARGETS,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        clients = _family(proc)
        assert proc.stdout is not None and proc.stderr is not None
        report = json.loads(proc.stdout.readline())
        assert proc.wait() == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    child = report["child"]
    assert report["exitcode"] == 0
    assert child in clients, f"no agent of the child {child} was found; agents seen: {sorted(clients)}"
    hellos = {pid: client.agent_hello for pid, client in clients.items()}
    assert hellos[proc.pid]["ppid"] == os.getpid()
    parent = hellos[child]["ppid"]
    if method == "forkserver":
        assert parent != proc.pid and hellos[parent]["ppid"] == proc.pid, "the worker sits under the fork server"
    else:
        assert parent == proc.pid
    assert hellos[child]["start_time"] != hellos[proc.pid]["start_time"] or child != proc.pid
    assert "rank" not in hellos[child]

    received = clients[child].received
    (end,) = of_type(received, m.COMPILE_END)
    assert end["ok"] is True
    assert len(of_type(received, m.PASS_END)) > 50, "every pass of the child's compile"
    assert of_type(received, m.BYE)[0]["dropped"] == 0
    assert not of_type(clients[proc.pid].received, m.COMPILE_BEGIN), "the parent compiled nothing"
