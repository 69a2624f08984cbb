"""A child made by ``fork`` starts the agent's state from nothing, leaves the parent's clients
to the parent, and serves its own agent (a DataLoader worker or a multiprocessing pool forked
from a watched program).

The target (``targets/forks.py``) forks while its agent serves a client, one compile is held
inside a pass and the IR of another is kept; both sides report what the agent holds.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

import pytest
from agent_wire import WireClient, socket_of, spawn_target

from iket_tui import endpoints
from iket_tui.protocol import messages as m

pytestmark = pytest.mark.tilelang

SLOW_PASS = "iket_test.SlowLayoutInference"


def socket_of_pid(pid: int) -> Path:
    start = endpoints.process_start_time(pid)
    assert start is not None
    return endpoints.socket_path_for(pid, start)


def test_a_forked_child_holds_nothing_of_the_parents_agent_and_its_clients_see_the_parent_end(
    tmp_path: Path,
) -> None:
    hold, fork, leave = tmp_path / "hold", tmp_path / "fork", tmp_path / "leave"
    env = {"IKET_TUI_WAIT_CLIENT": "120", "IKET_TEST_GATE": str(hold), "IKET_TEST_FORK": str(fork)}
    proc = spawn_target("forks.py", env={**env, "IKET_TEST_EXIT": str(leave)})
    child_pid = None
    try:
        client = WireClient(socket_of(proc))
        client.catch_up()
        client.read_until(lambda msg: msg["type"] == m.PASS_START and msg["name"] == SLOW_PASS)
        fork.touch()
        assert proc.stdout is not None
        report = json.loads(proc.stdout.readline())
        parent, child = report["parent"], report["child"]
        child_pid = child["pid"]

        assert parent["agent"] and parent["clients"] == 1 and parent["notes_waiting"]
        assert parent["produced"] > 0 and parent["open_passes"] >= 1
        assert m.COMPILE_BEGIN in parent["open"] and m.PASS_START in parent["open"]
        assert parent["ir"]["1"] > 0, "the GEMM's IR is held"
        assert parent["ir"]["2"] is None, "and that of the compile held inside a pass"
        assert parent["sockets"] >= 2, "the agent's socket and its client's connection"

        assert child == {
            "pid": child_pid,
            "agent": True,
            "produced": 0,
            "open": [],
            "open_passes": 0,
            "clients": 0,
            "notes_waiting": False,
            "ir": {},
            "sockets": 1,
        }, "nothing of the parent's; one socket, its own agent's"
        own = WireClient(socket_of_pid(child_pid))
        assert own.agent_hello["pid"] == child_pid and own.agent_hello["ppid"] == proc.pid
        own.catch_up()
        own.close()

        proc.kill()
        proc.wait()
        try:
            client.read_to_end(timeout=30)
        except AssertionError:
            pytest.fail("the stream of a killed target did not end while its forked child lived on")
        os.kill(child_pid, 0)  # the child still lives
    finally:
        leave.touch()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if child_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child_pid, signal.SIGKILL)
