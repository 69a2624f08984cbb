"""Kernel tracing in a real target: the runtime goes into TileLang's codegen, the event table
reaches clients before any launch, and what a ring holds streams out as kernel_records.

No GPU here: without a device the agent traces without a ring (and says so once); the ring's
path from memory to clients is exercised with a ring file that the CPU producer writes from
another process, which is exactly the layout the device writes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from agent_wire import WireClient, of_type, socket_of, spawn_target

from iket_tui.demo.sample import TRACED_EVENTS
from iket_tui.protocol import messages as m
from iket_tui.protocol.messages import Message
from iket_tui.ring.buffer import MappedRing
from iket_tui.ring.cpu_producer import synthetic_table
from iket_tui.ring.decode import EventTables, decode
from iket_tui.ring.layout import EVENT_WARP_ROW, RingGeometry
from iket_tui.ring.wire import module_from_message, records_from_message

pytestmark = pytest.mark.tilelang

TRACED = {"IKET_TUI_KERNELS": "1", "IKET_TUI_WAIT_CLIENT": "120"}
PRODUCER = (sys.executable, "-m", "iket_tui.ring.cpu_producer")


def _finish(proc: subprocess.Popen[str], client: WireClient) -> tuple[list[Message], str]:
    client.read_to_end()
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    return client.received, stderr


def test_without_a_device_the_event_table_reaches_clients_and_the_user_is_told_once(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    proc = spawn_target("traced.py", env={**TRACED, "IKET_TEST_GATE": str(gate), "IKET_TUI_BACKLOG": "1"})
    try:
        path = socket_of(proc)
        first = WireClient(path)
        module = first.read_until(lambda msg: msg["type"] == m.KERNEL_MODULE)
        first.read_until(lambda msg: msg["type"] == m.COMPILE_END)
        late = WireClient(path)  # attaches after the compile, with a backlog of one event
        late_catch_up, _ = late.catch_up()
        gate.touch()
        received, stderr = _finish(proc, first)
        late.read_to_end()
    finally:
        proc.kill()

    (tracing,) = of_type(received, m.KERNEL_TRACING)
    assert tracing["enabled"] is True and tracing["device"] is None and tracing["ring_id"] is None
    assert tracing["reason"] == "no GPU here (no NVIDIA driver)"  # installing CuPy would not help here
    assert stderr.count("kernel tracing without a ring") == 1

    table = module_from_message(module)
    assert table.kernels == ("traced_gemm_kernel",)
    assert [(e.name, e.kind, e.payload_type) for e in table.events] == [
        ("tile", "range", "int32"),
        ("first_a", "mark", "float32"),
        ("k_step", "mark", "uint32"),
        ("load", "range", "none"),
        ("mma", "range", "none"),
    ]
    assert tuple(e.name for e in table.events) == TRACED_EVENTS
    (begin,) = of_type(received, m.COMPILE_BEGIN)
    (end,) = of_type(received, m.COMPILE_END, ok=True)
    assert module["compile"] == begin["compile"]
    assert received.index(begin) < received.index(module) < received.index(end)
    assert not of_type(received, m.KERNEL_RECORDS)

    # However late a client attaches, it gets the tracing state and every event table.
    assert [msg["type"] for msg in late_catch_up[:2]] == [m.KERNEL_TRACING, m.KERNEL_MODULE]
    assert module_from_message(late_catch_up[1]) == table


def test_records_of_one_ring_per_device_stream_to_the_client_exactly_and_apart(tmp_path: Path) -> None:
    rings = [MappedRing.create(tmp_path / f"ring{device}", RingGeometry(256, 512)) for device in (0, 1)]
    gate = tmp_path / "gate"
    env = {
        **TRACED,
        "IKET_TEST_GATE": str(gate),
        "IKET_TUI_RING_FILE": os.pathsep.join(str(ring.path) for ring in rings),
        "IKET_TUI_DRAIN_HZ": "50",
    }
    proc = spawn_target("traced.py", env=env)
    try:
        client = WireClient(socket_of(proc))
        tracing = [client.read_until(lambda msg: msg["type"] == m.KERNEL_TRACING) for _ in rings]
        assert [(t["ring_id"], t["device_index"], t["reason"]) for t in tracing] == [
            (ring.view.ring_id, device, None) for device, ring in enumerate(rings)
        ]
        # each ring's size, in bytes and in the events it holds at once
        assert [(t["ring_bytes"], t["ring_events"], t["regions"], t["records_per_region"]) for t in tracing] == [
            (ring.view.geometry.total_bytes, 256 * 512, 256, 512) for ring in rings
        ]
        # one producer process per device, side by side
        producers = [
            subprocess.Popen(
                [*PRODUCER, str(ring.path), "--warps", str(warps), "--events", "300", "--seed", str(device)],
                stdout=subprocess.PIPE,
                text=True,
            )
            for device, (ring, warps) in enumerate(zip(rings, (96, 40), strict=True))
        ]
        written = [int(producer.communicate(timeout=120)[0]) for producer in producers]
        assert written == [96 * 300, 40 * 300]
        read: dict[int, int] = {}

        def all_read(msg: Message) -> bool:
            if msg["type"] == m.KERNEL_RECORDS:
                records = records_from_message(msg)
                read[records.ring_id] = records.counters.events_read
            return [read.get(ring.view.ring_id) for ring in rings] == written

        client.read_until(all_read)  # every record arrives while the target still runs
        assert proc.poll() is None
        gate.touch()
        received, stderr = _finish(proc, client)
    finally:
        proc.kill()
        for ring in rings:
            ring.close()

    assert "kernel tracing without a ring" not in stderr
    # The module is compiled for no device, and names the first ring file as the ring it runs on.
    assert [module["ring_id"] for module in of_type(received, m.KERNEL_MODULE)] == [rings[0].view.ring_id]
    batches = [records_from_message(msg) for msg in of_type(received, m.KERNEL_RECORDS)]
    assert {b.ring_id for b in batches} == {ring.view.ring_id for ring in rings}
    for ring, count in zip(rings, written, strict=True):
        mine = [b for b in batches if b.ring_id == ring.view.ring_id]
        last = mine[-1].counters
        assert last.balanced and last.events_written == last.events_read == count
        assert last.events_lost == 0 and last.torn == 0 and last.chunks_lost == 0
        events = np.concatenate([decode(b.chunks, EventTables([synthetic_table()]), b.layout) for b in mine])
        assert int(((events["kind"] & EVENT_WARP_ROW) == 0).sum()) == count
        assert all(b.device_now_ns is not None for b in mine)


def test_two_processes_each_tracing_their_own_ring_work_side_by_side(tmp_path: Path) -> None:
    rings = [MappedRing.create(tmp_path / f"ring{n}", RingGeometry(128, 512)) for n in (0, 1)]
    gates = [tmp_path / f"gate{n}" for n in (0, 1)]
    procs = [
        spawn_target(
            "traced.py",
            env={
                **TRACED,
                "IKET_TEST_GATE": str(gate),
                "IKET_TUI_RING_FILE": str(ring.path),
                "IKET_TUI_DRAIN_HZ": "50",
            },
        )
        for gate, ring in zip(gates, rings, strict=True)
    ]
    try:
        clients = [WireClient(socket_of(proc)) for proc in procs]
        for client in clients:
            client.read_until(lambda msg: msg["type"] == m.KERNEL_TRACING)
        producers = [
            subprocess.Popen(
                [*PRODUCER, str(ring.path), "--warps", str(warps), "--seed", str(n)], stdout=subprocess.PIPE
            )
            for n, (ring, warps) in enumerate(zip(rings, (50, 70), strict=True))
        ]
        written = [int(producer.communicate(timeout=120)[0]) for producer in producers]
        for client, count in zip(clients, written, strict=True):
            client.read_until(
                lambda msg, count=count: (
                    msg["type"] == m.KERNEL_RECORDS and records_from_message(msg).counters.events_read == count
                )
            )
        for gate in gates:
            gate.touch()
        received = [_finish(proc, client)[0] for proc, client in zip(procs, clients, strict=True)]
    finally:
        for proc in procs:
            proc.kill()
        for ring in rings:
            ring.close()

    assert written == [50 * 200, 70 * 200]
    for messages, ring, count in zip(received, rings, written, strict=True):
        batches = [records_from_message(msg) for msg in of_type(messages, m.KERNEL_RECORDS)]
        assert {b.ring_id for b in batches} == {ring.view.ring_id}  # each process drains its own ring only
        last = batches[-1].counters
        assert last.balanced and (last.events_written, last.events_read, last.events_lost) == (count, count, 0)


def test_bad_tracing_settings_are_one_line_each_and_the_program_runs(tmp_path: Path) -> None:
    env = {
        "IKET_TUI_KERNELS": "1",
        "IKET_TUI_DRAIN_HZ": "fast",
        "IKET_TUI_RING_FILE": str(tmp_path / "missing"),
    }
    proc = spawn_target("traced.py", env=env)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    assert stdout.splitlines()[-1] == "compiled"
    lines = [line for line in stderr.splitlines() if line.startswith("iket-tui agent:")]
    assert any("IKET_TUI_DRAIN_HZ" in line for line in lines), lines
    assert any("cannot open ring file" in line for line in lines), lines
    assert "Traceback" not in stderr


def test_tilelang_kernel_cache_stays_off_while_tracing(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = {"IKET_TUI_KERNELS": "1", "IKET_TEST_ENABLE_CACHE": "1", "TILELANG_CACHE_DIR": str(cache)}
    proc = spawn_target("traced.py", env=env)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    assert "cache enabled: False" in stdout.splitlines()
    assert stderr.count("kernel cache stays off while kernels are traced") == 1
    assert not any(path.is_file() for path in cache.rglob("*")), "a kernel went into TileLang's cache"
