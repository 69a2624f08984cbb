"""A stream of two processes tracing kernels whose rings and modules share ids, as a merged
source tells it: for the model, dump and kernels screen tests of kernels told apart per process."""

from __future__ import annotations

import dataclasses
from typing import Any

from iket_tui.demo.waiting_launch import TRACED_TABLE, waiting_stream
from iket_tui.ring.events import ModuleEvents
from iket_tui.ring.wire import kernel_module, records_from_message

S = 1_000_000_000
DEVICE_T = 1_795_976_916_032_000_000
RING = 11  # both processes' rings have this id, and both traced modules are module 1
HELD, ALL = 41_952, 42_240


def two_processes(*, both_wait: bool = False) -> list[dict[str, Any]]:
    """A stream of pids 101 (rank 0) and 102 (rank 1), interleaved as a merged source tells
    them: each traces a launch 6 of module 1 on a ring 11; 101's completes, 102's block (3,0)
    still waits at the end. ``both_wait``: 101's launch is the same as 102's, its records
    alike, and waits too."""
    held = waiting_stream(agent_t_ns=5 * S, device_t_ns=DEVICE_T + S, hold_ns=600 * S, ring_id=RING)
    done = held if both_wait else waiting_stream(agent_t_ns=5 * S, device_t_ns=DEVICE_T, hold_ns=S, ring_id=RING)

    def process(pid: int) -> dict[str, Any]:
        return {"type": "process", "pid": pid}

    def hello(pid: int, rank: int) -> dict[str, Any]:
        return {"type": "hello", "role": "agent", "pid": pid, "argv": ["python", "train.py"], "rank": rank, "t_ns": S}

    def tracing(t: int) -> dict[str, Any]:
        return {"type": "kernel_tracing", "enabled": True, "device": "NVIDIA H200", "reason": None, "t_ns": t}

    return [
        process(101),
        hello(101, 0),
        tracing(4 * S),
        process(102),
        hello(102, 1),
        tracing(4 * S),
        process(101),
        done.table,
        done.held,
        process(102),
        held.table,
        held.held,
        *([] if both_wait else [process(101), done.released]),
        {"type": "heartbeat", "t_ns": 9 * S, "produced": 4, "dropped": 0, "open_passes": 0},
    ]


def two_tables() -> list[dict[str, Any]]:
    """Pids 101 and 102 each tell their module 1's event table before either's records: 101's
    is traced_gemm's, 102's names its kernel and its ``mma`` range otherwise."""
    stream = waiting_stream(agent_t_ns=5 * S, device_t_ns=DEVICE_T, hold_ns=600 * S, ring_id=RING)
    layout = records_from_message(stream.held).layout
    other = ModuleEvents(
        TRACED_TABLE.module,
        TRACED_TABLE.id_bits,
        ("other_gemm_kernel",),
        tuple(dataclasses.replace(info, name="wgmma") if info.name == "mma" else info for info in TRACED_TABLE.events),
    )
    return [
        {"type": "process", "pid": 101},
        stream.table,
        {"type": "process", "pid": 102},
        kernel_module(other, ring_id=RING, layout=layout, t_ns=5 * S),
        {"type": "process", "pid": 101},
        stream.held,
        {"type": "process", "pid": 102},
        stream.held,
    ]
