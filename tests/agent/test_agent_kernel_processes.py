"""Two real processes tracing kernels side by side, attached together through the merged source:
their ring files have the same ring id and their agents number the traced module alike, so only
the process tells their launches apart. A producer process writes a traced_gemm launch into each
ring; one is released, the other's block (3,0) keeps waiting. The session attributes each launch
to its process with its exact count, names the waiting one with its pid, and ``dump`` of the
recording made meanwhile ends with that launch, named with its pid."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from agent_wire import socket_of, spawn_target

from iket_tui.model.kernels import KernelTimeline
from iket_tui.model.session import Session
from iket_tui.ring.buffer import MappedRing
from iket_tui.ring.layout import RingGeometry
from iket_tui.sources.base import SourceBatch
from iket_tui.sources.merged import ProcessStreams

pytestmark = pytest.mark.tilelang

PRODUCER = Path(__file__).resolve().parent / "targets" / "waiting_producer.py"
HELD_EVENTS, ALL_EVENTS = 41_952, 42_240
RING_ID = 0x1CE7_0000_0001  # both ring files
S = 1_000_000_000
WAIT_S = 120.0


def test_launches_of_two_processes_with_the_same_ring_and_module_ids_are_told_apart(tmp_path: Path) -> None:
    rings = [MappedRing.create(tmp_path / f"ring{n}", RingGeometry(4096, 256), ring_id=RING_ID) for n in (0, 1)]
    gates = [tmp_path / f"gate{n}" for n in (0, 1)]
    releases = [tmp_path / f"release{n}" for n in (0, 1)]
    procs = [
        spawn_target(
            "traced.py",
            env={
                "IKET_TUI_KERNELS": "1",
                "IKET_TUI_WAIT_CLIENT": "120",
                "IKET_TEST_GATE": str(gate),
                "IKET_TUI_RING_FILE": str(ring.path),
                "IKET_TUI_DRAIN_HZ": "50",
            },
        )
        for gate, ring in zip(gates, rings, strict=True)
    ]
    producers: list[subprocess.Popen[str]] = []
    recording = tmp_path / "two.msgpack"
    source = ProcessStreams([socket_of(proc) for proc in procs], record_to=recording, description="two")
    session = Session()
    try:
        source.connect()
        batches = iter(source.batches())
        pump = _pump(batches, session)
        kernels = session.kernel_processes

        def timeline(proc: subprocess.Popen[str]) -> KernelTimeline | None:
            return next((t for p, t in kernels.timelines.items() if p is not None and p.pid == proc.pid), None)

        def has_module(proc: subprocess.Popen[str]) -> bool:
            found = timeline(proc)
            return found is not None and bool(found.modules)

        pump(lambda: all(has_module(proc) for proc in procs), "both traced modules")
        keys = [list(found.modules) for proc in procs if (found := timeline(proc)) is not None]
        assert keys[0] == keys[1] and len(keys[0]) == 1 and keys[0][0][0] == RING_ID  # the same (ring, module)
        module = keys[0][0][1]
        for ring, release in zip(rings, releases, strict=True):
            producer = subprocess.Popen(
                [sys.executable, str(PRODUCER), str(ring.path), str(module), str(release)],
                stdout=subprocess.PIPE,
                text=True,
            )
            producers.append(producer)
            assert producer.stdout is not None
            assert producer.stdout.readline().split() == ["held", str(HELD_EVENTS)]
        releases[0].touch()
        assert producers[0].stdout is not None
        assert producers[0].stdout.readline().split() == ["done", str(ALL_EVENTS)]

        def read(proc: subprocess.Popen[str]) -> int:
            found = timeline(proc)
            return found.events_read if found is not None else -1

        pump(lambda: (read(procs[0]), read(procs[1])) == (ALL_EVENTS, HELD_EVENTS), "every record of both")

        launches = kernels.newest_first()
        assert sorted(
            (launch.process.pid, launch.key, launch.records) for launch in launches if launch.process
        ) == sorted(
            [(procs[0].pid, (RING_ID, module, 0, 6), ALL_EVENTS), (procs[1].pid, (RING_ID, module, 0, 6), HELD_EVENTS)]
        )
        lost = [found.events_lost for found in map(timeline, procs) if found is not None]
        assert lost == [0, 0]
        time.sleep(2.5)  # the second one's block waits; nothing more is written
        now = time.monotonic_ns()  # the agents' clock: the same monotonic clock, on the same machine
        (quiet,) = kernels.quiet(now)
        assert quiet.process is not None and quiet.process.pid == procs[1].pid
        assert (
            kernels.unfinished(quiet, now)
            .summary(quiet.blocks())
            .startswith(
                f"pid {procs[1].pid}: 1 of 64 blocks not finished: block (3,0), warps 4-7 last at `mma` (k_step 17), "
            )
        )
        assert f"pid {procs[0].pid}: 1 launch, {ALL_EVENTS:,} events" in kernels.title(following=False)
        source.close_and_wait("test done")
    finally:
        source.close("test done")
        for release, gate in zip(releases, gates, strict=True):
            release.touch()
            gate.touch()
        for producer in producers:
            producer.kill()
            producer.wait()
        for proc in procs:
            proc.kill()
            proc.wait()
        for ring in rings:
            ring.close()

    dumped = subprocess.run(
        [sys.executable, "-m", "iket_tui", "dump", str(recording), "--format", "jsonl"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dumped.returncode == 0, dumped.stderr
    (unfinished,) = [o for o in map(json.loads, dumped.stdout.splitlines()) if o["type"] == "kernel_unfinished"]
    assert (unfinished["pid"], unfinished["ring_id"], unfinished["module"], unfinished["launch"]) == (
        procs[1].pid,
        RING_ID,
        module,
        6,
    )
    assert unfinished["summary"].startswith(f"pid {procs[1].pid}: 1 of 64 blocks not finished: block (3,0)")


def _pump(batches: Iterator[SourceBatch], session: Session) -> Callable[[Callable[[], bool], str], None]:
    """Apply batches to ``session`` until ``done`` says so, or fail naming ``what`` after a while."""

    def pump(done: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + WAIT_S
        for batch in batches:
            session.apply(batch.messages)
            if done():
                return
            assert time.monotonic() < deadline, f"never saw {what}"
        raise AssertionError(f"the stream ended before {what}")

    return pump
