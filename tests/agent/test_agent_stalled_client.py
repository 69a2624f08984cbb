"""A client that stops reading loses events, counted exactly, and never holds the compiler back.

The target (``targets/stalled.py``) starts the agent in code with a 512-event queue and a
small socket buffer, then lowers kernels while one client reads nothing and another reads
everything.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from agent_wire import WireClient, events, of_type, socket_of, spawn_target

from iket_tui.protocol import messages as m

pytestmark = pytest.mark.tilelang

LOWERINGS = 10


def test_stalled_client_loses_counted_events_while_compiles_run_to_the_end(tmp_path: Path) -> None:
    go, leave = tmp_path / "go", tmp_path / "leave"
    proc = spawn_target("stalled.py", agent=False, env={"IKET_TEST_GATE": str(go), "IKET_TEST_EXIT": str(leave)})
    try:
        path = socket_of(proc)
        stalled = WireClient(path)
        _, stalled_sync = stalled.catch_up()
        reader = WireClient(path)
        reader.catch_up()
        reading = threading.Thread(target=reader.read_to_end)
        reading.start()
        go.touch()

        # The target reports its counters after its last compile: all of them ran to the end while
        # the stalled client had not read a byte since its sync.
        assert proc.stdout is not None
        stalled_stats, reader_stats = json.loads(proc.stdout.readline())
        assert stalled_stats["dropped"] > 0
        assert stalled_stats["produced"] == (
            stalled_stats["delivered"] + stalled_stats["dropped"] + stalled_stats["queued"]
        )
        assert reader_stats["dropped"] == 0
        assert reader_stats["produced"] == stalled_stats["produced"]

        # Now it reads what it is owed, and the target exits.
        stalled.read_until(lambda msg: msg["type"] == m.DROPPED)
        leave.touch()
        stalled.read_to_end()
        reading.join()
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    bye = stalled.received[-1]
    assert bye["type"] == m.BYE
    live = events(stalled.received[stalled.received.index(stalled_sync) :])
    before = stalled_sync["backlog"] + stalled_sync["backlog_lost"]
    assert len(live) + bye["dropped"] == bye["produced"] - before
    reports = of_type(stalled.received, m.DROPPED)
    assert sum(r["count"] for r in reports) == reports[-1]["total"] == bye["dropped"] == stalled_stats["dropped"]
    assert len(of_type(reader.received, m.COMPILE_END)) == LOWERINGS
    assert reader.received[-1]["produced"] == bye["produced"]
    assert reader.received[-1]["dropped"] == 0
