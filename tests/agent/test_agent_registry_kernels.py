"""The registry's two ways for kernel traffic: state every late client gets (event tables), and
bulk record batches bounded in bytes per client, every dropped one counted."""

from __future__ import annotations

from iket_tui.agent.registry import ClientStats, Registry
from iket_tui.protocol import messages as m
from iket_tui.protocol.messages import Message


def _table(module: int, t_ns: int) -> Message:
    return {"type": m.KERNEL_MODULE, "module": module, "t_ns": t_ns}


def _records(size: int) -> Message:
    return {"type": m.KERNEL_RECORDS, "chunks": b"\0" * size, "t_ns": 0}


def test_kept_messages_reach_a_late_client_after_the_backlog_forgot_them() -> None:
    registry = Registry(backlog=2)
    registry.emit_kept({"type": m.KERNEL_TRACING, "enabled": True, "t_ns": 0}, key=(m.KERNEL_TRACING,))
    registry.emit_kept(_table(1, 1), key=(m.KERNEL_MODULE, 1))
    for t in range(2, 7):
        registry.emit({"type": m.CALLBACK_MISMATCH, "compile": 1, "t_ns": t})
    registry.emit_kept(_table(2, 7), key=(m.KERNEL_MODULE, 2))
    registry.emit_kept(_table(1, 8), key=(m.KERNEL_MODULE, 1))  # module 1 again: the newer table counts
    _, catch_up = registry.attach(limit=10)
    assert [(msg["type"], msg["t_ns"]) for msg in catch_up.messages] == [
        (m.KERNEL_TRACING, 0),  # older than the backlog, kept
        (m.KERNEL_MODULE, 7),  # the backlog
        (m.KERNEL_MODULE, 8),
    ]
    assert (catch_up.backlog, catch_up.backlog_lost) == (2, 7)


def test_bulk_messages_are_bounded_in_bytes_and_every_drop_is_counted() -> None:
    registry = Registry()
    client, _ = registry.attach(limit=10)
    client.bulk_limit = 100
    registry.emit_bulk(_records(60), 60)
    registry.emit_bulk(_records(60), 60)  # 120 bytes would be queued: dropped
    registry.emit_bulk(_records(30), 30)
    assert client.bulk_queued == 90
    assert [len(msg["chunks"]) for msg in client.take(1)] == [60]
    client.mark_delivered()
    assert client.bulk_queued == 30
    registry.emit_bulk(_records(60), 60)
    assert registry.client_stats() == [ClientStats(produced=4, delivered=1, dropped=1, queued=2)]
    assert registry.produced == 4


def test_a_bulk_message_larger_than_the_bound_still_goes_to_an_empty_queue() -> None:
    registry = Registry()
    client, _ = registry.attach(limit=10)
    client.bulk_limit = 100
    registry.emit_bulk(_records(500), 500)
    assert registry.client_stats() == [ClientStats(produced=1, delivered=0, dropped=0, queued=1)]


def test_bulk_messages_are_live_only() -> None:
    registry = Registry()
    registry.emit_bulk(_records(10), 10)
    _, catch_up = registry.attach(limit=10)
    assert catch_up.messages == []
    assert catch_up.backlog_lost == 1  # produced before this client, and not replayed
