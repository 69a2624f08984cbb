"""A kernel whose block stops, through a real agent: a producer process writes a traced_gemm
launch into the agent's ring file and holds one block, the agent drains it and streams it over
its socket, and a client's session sees which block and warps have not ended and their last
events while it waits; after the release the launch completes with every record accounted for."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from agent_wire import WireClient, socket_of, spawn_target

from iket_tui.model.session import Session
from iket_tui.protocol import messages as m
from iket_tui.protocol.messages import Message
from iket_tui.ring.buffer import MappedRing
from iket_tui.ring.layout import EVENT_WARP_ROW, RingGeometry
from iket_tui.ring.wire import records_from_message

pytestmark = pytest.mark.tilelang

PRODUCER = Path(__file__).resolve().parent / "targets" / "waiting_producer.py"
HELD_EVENTS, ALL_EVENTS = 41_952, 42_240
S = 1_000_000_000


def test_a_client_sees_the_waiting_block_and_its_warps_last_events_then_the_launch_completes(tmp_path: Path) -> None:
    ring = MappedRing.create(tmp_path / "ring", RingGeometry(4096, 256))
    gate, release = tmp_path / "gate", tmp_path / "release"
    env = {
        "IKET_TUI_KERNELS": "1",
        "IKET_TUI_WAIT_CLIENT": "120",
        "IKET_TEST_GATE": str(gate),
        "IKET_TUI_RING_FILE": str(ring.path),
        "IKET_TUI_DRAIN_HZ": "50",
    }
    proc = spawn_target("traced.py", env=env)
    producer: subprocess.Popen[str] | None = None
    session = Session()

    def seen(predicate: Callable[[Message], bool]) -> Callable[[Message], bool]:
        """``predicate``, applying each message read to the client's session on the way."""

        def check(msg: Message) -> bool:
            session.apply([msg])
            return predicate(msg)

        return check

    def read(msg: Message) -> int:
        return records_from_message(msg).counters.events_read if msg["type"] == m.KERNEL_RECORDS else -1

    try:
        client = WireClient(socket_of(proc))
        module = client.read_until(seen(lambda msg: msg["type"] == m.KERNEL_MODULE))
        # Without a GPU the module is built for no ring, yet its table names the ring file its
        # launches are written into, so the session pairs the records with it as sent.
        assert module["ring_id"] == ring.view.ring_id
        producer = subprocess.Popen(
            [sys.executable, str(PRODUCER), str(ring.path), str(module["module"]), str(release)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert producer.stdout is not None
        assert producer.stdout.readline().split() == ["held", str(HELD_EVENTS)]
        client.read_until(seen(lambda msg: read(msg) == HELD_EVENTS))
        (launch,) = session.kernels.launches.values()
        assert launch.kernel == "traced_gemm_kernel" and launch.module is not None  # paired with its table
        assert launch.running and launch.progress.unfinished == 4
        time.sleep(2.5)  # the block waits; nothing more is written
        now = time.monotonic_ns()  # the agent's clock: the same monotonic clock, on the same machine
        assert session.kernels.running_past(launch, now)
        found = session.kernels.unfinished(launch, now)
        (group,) = found.groups
        assert (group.block, group.warps, group.last) == ((3, 0, 0), (4, 5, 6, 7), "`mma` (k_step 17)")
        assert 2.5 * S <= group.ago_ns < 60 * S
        assert found.summary(launch.blocks()).startswith(
            "1 of 64 blocks not finished: block (3,0), warps 4-7 last at `mma` (k_step 17), "
        )

        release.touch()
        assert producer.stdout.readline().split() == ["done", str(ALL_EVENTS)]
        last = client.read_until(seen(lambda msg: read(msg) == ALL_EVENTS))
        assert not launch.running and launch.progress.ended == 512
        # A warp whose end record came in a later drain pass than its last event ends with a warp row.
        rows = (launch.events()["kind"] & EVENT_WARP_ROW) != 0
        assert int((~rows).sum()) == launch.records == ALL_EVENTS  # warp rows are not events
        assert launch.rows == len(rows)
        assert not launch.spans().marks["event"].tolist().count(0)  # no warp row drawn as a mark
        counters = records_from_message(last).counters
        assert counters.balanced and counters.events_written == counters.events_read == ALL_EVENTS
        assert counters.events_lost == 0 and counters.torn == 0
        assert not session.kernels.running_past(launch, time.monotonic_ns() + 60 * S)
        gate.touch()
        client.read_to_end()
        assert proc.wait(timeout=120) == 0
    finally:
        proc.kill()
        if producer is not None:
            producer.kill()
            producer.wait()
        ring.close()
