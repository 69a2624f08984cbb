"""Malformed messages are counted, not remembered: applying any number of them keeps nothing."""

from __future__ import annotations

import tracemalloc
from typing import Any

from iket_tui.model.session import Session
from iket_tui.protocol import messages as m

MALFORMED = 200_000
BATCH = 1_000


def _malformed_heartbeats(count: int) -> list[dict[str, Any]]:
    return [{"type": m.HEARTBEAT, "t_ns": "not a time", "produced": i, "dropped": 0} for i in range(count)]


def test_200k_malformed_heartbeats_leave_memory_flat() -> None:
    session = Session()
    batch = _malformed_heartbeats(BATCH)
    session.apply(batch)  # the first one may allocate what every later one reuses
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for _ in range(MALFORMED // BATCH - 1):
            session.apply(batch)
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert session.counters.malformed == MALFORMED
    assert session.counters.heartbeats == 0
    grown = after - before
    assert grown < 64 * 1024, f"{MALFORMED} malformed heartbeats kept {grown:,} bytes"


def test_a_malformed_kernel_message_keeps_nothing_either() -> None:
    session = Session()
    bad = [{"type": m.KERNEL_TRACING, "enabled": "yes"}] * BATCH
    session.apply(bad)
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for _ in range(20):
            session.apply(bad)
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert session.counters.malformed == 21 * BATCH
    assert after - before < 64 * 1024
