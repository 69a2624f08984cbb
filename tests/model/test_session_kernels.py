"""Kernel messages in the session: to the kernel timeline, never counted as pass events, bad ones counted."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from iket_tui.model import kernels
from iket_tui.model.session import Session
from iket_tui.protocol import messages as m
from iket_tui.ring.cpu_producer import synthetic_table
from iket_tui.ring.layout import DEFAULT_LAYOUT
from iket_tui.ring.wire import kernel_module
from iket_tui.sources.reading import read_recording

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"


def test_kernel_messages_are_summarised_not_counted_as_pass_events() -> None:
    session = Session()
    table = synthetic_table()
    session.apply(
        [
            {"type": m.KERNEL_TRACING, "enabled": True, "device": None, "reason": "no CUDA device", "t_ns": 5},
            kernel_module(table, ring_id=7, layout=DEFAULT_LAYOUT, t_ns=9, compile=3),
        ]
    )
    assert session.counters.events == 0
    assert session.counters.malformed == 0
    assert session.kernels.tracing is not None and session.kernels.tracing.reason == "no CUDA device"
    assert session.kernels.modules[(7, table.module)] == table
    assert session.kernels.module_compile[(7, table.module)] == 3
    assert session.last_t_ns == 9


def test_a_malformed_kernel_message_is_counted_and_changes_nothing() -> None:
    session = Session()
    session.apply([{"type": m.KERNEL_MODULE, "module": "x", "t_ns": 1}, {"type": m.KERNEL_TRACING, "enabled": "yes"}])
    assert session.counters.malformed == 2
    assert session.counters.events == 0
    assert not session.kernels.modules and session.kernels.tracing is None


def _h200_kernel_messages() -> list[m.Message]:
    messages, _ = read_recording(EXAMPLE)
    return [msg for msg in messages if msg["type"] in (m.KERNEL_TRACING, m.KERNEL_MODULE, m.KERNEL_RECORDS)]


def test_each_kernel_records_message_is_read_and_decoded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = Counter[str]()

    def counted(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return real(*args, **kwargs)

        return call

    monkeypatch.setattr(kernels, "records_from_message", counted("read", kernels.records_from_message))
    monkeypatch.setattr(kernels, "decode", counted("decode", kernels.decode))
    stream = _h200_kernel_messages()
    session = Session()
    session.apply(stream)
    records = sum(msg["type"] == m.KERNEL_RECORDS for msg in stream)
    assert calls == {"read": records, "decode": records}
    assert [launch.records for launch in session.kernels.newest_first()] == [42_240] * 3


def test_modules_of_two_rings_with_one_id_are_told_apart() -> None:
    stream = _h200_kernel_messages()
    ring = stream[1]["ring_id"]
    other = [
        {**msg, "ring_id": ring + 1, **({"kernels": ["other_kernel"]} if msg["type"] == m.KERNEL_MODULE else {})}
        for msg in stream
        if msg["type"] != m.KERNEL_TRACING
    ]
    tracing, module, records = stream
    session = Session()
    session.apply([tracing, module, other[0], records, other[1]])  # both tables before any records
    kernels_by_ring = {(launch.key[0], launch.kernel) for launch in session.kernels.launches.values()}
    assert kernels_by_ring == {(ring, "traced_gemm_kernel"), (ring + 1, "other_kernel")}
    assert set(session.kernels.modules) == {(ring, 1), (ring + 1, 1)}
    assert session.kernels.events_read == 2 * 126_720 and session.kernels.waiting_events == 0


def test_records_wait_for_their_own_rings_module_table() -> None:
    stream = _h200_kernel_messages()
    module, records = stream[1], stream[2]
    session = Session()
    session.apply([module, {**records, "ring_id": module["ring_id"] + 1}])  # a table of another ring only
    assert session.kernels.waiting_events == 126_720 and not session.kernels.launches
    session.apply([{**module, "ring_id": module["ring_id"] + 1}])
    assert session.kernels.waiting_events == 0 and len(session.kernels.launches) == 3
