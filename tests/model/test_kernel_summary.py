"""Kernel messages in the pass tree: summarised, never counted as pass events, bad ones counted."""

from __future__ import annotations

from iket_tui.model.pass_tree import PassTree
from iket_tui.protocol import messages as m
from iket_tui.ring.cpu_producer import synthetic_table
from iket_tui.ring.layout import DEFAULT_LAYOUT
from iket_tui.ring.wire import kernel_module


def test_kernel_messages_are_summarised_not_counted_as_pass_events() -> None:
    tree = PassTree()
    table = synthetic_table()
    tree.apply(
        [
            {"type": m.KERNEL_TRACING, "enabled": True, "device": None, "reason": "no CUDA device", "t_ns": 5},
            kernel_module(table, ring_id=7, layout=DEFAULT_LAYOUT, t_ns=9, compile=3),
        ]
    )
    assert tree.counters.events == 0
    assert tree.counters.malformed == 0
    assert tree.kernels.tracing is not None and tree.kernels.tracing.reason == "no CUDA device"
    assert tree.kernels.modules[(7, table.module)] == table
    assert tree.kernels.module_compile[(7, table.module)] == 3
    assert tree.last_t_ns == 9


def test_a_malformed_kernel_message_is_counted_and_changes_nothing() -> None:
    tree = PassTree()
    tree.apply([{"type": m.KERNEL_MODULE, "module": "x", "t_ns": 1}, {"type": m.KERNEL_TRACING, "enabled": "yes"}])
    assert tree.counters.malformed == 2
    assert tree.counters.events == 0
    assert not tree.kernels.modules and tree.kernels.tracing is None
