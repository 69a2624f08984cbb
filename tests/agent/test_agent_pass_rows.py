"""What the agent keeps of a real compile's passes costs Python's garbage collector nothing.

The agent holds thousands of pass events (its backlog, the open passes, every client's queue).
Objects the collector tracks and that live long make its full collections come sooner, and a
full collection in a process that imported TileLang, with its many objects, is long: so the agent
builds each pass event as a tuple of plain values (TVM hands pass names out as its own
``String``, which the collector tracks, so they are copied to ``str``), which the collector stops
tracking at the first collection it survives. A pass end that says whether its pass changed the
module (where ``IKET_TUI_PASS_CHANGES=1``) is a map of plain values, which the collector drops as well.
"""

from __future__ import annotations

import gc

import pytest

from iket_tui.agent.pass_notes import CHANGES_VARIABLE
from iket_tui.agent.registry import Registry
from iket_tui.protocol import messages as m

pytestmark = pytest.mark.tilelang
pytest.importorskip("tilelang")

from iket_tui.agent import tilelang_tool  # noqa: E402
from iket_tui.demo import kernels  # noqa: E402


def _lowered() -> list[object]:
    registry = Registry()
    client, _ = registry.attach(limit=100_000)
    tilelang_tool.register(registry)
    try:
        kernels.lower("gemm")
    finally:
        tilelang_tool.unregister()
    return client.take(100_000)


def test_pass_events_of_a_real_compile_are_rows_the_collector_stops_tracking() -> None:
    sent = _lowered()
    rows = [item for item in sent if isinstance(item, tuple)]
    assert len(rows) > 100
    assert {row[0] for row in rows} == {m.PASS_START, m.PASS_END}
    assert all(type(row[3]) is str for row in rows)
    assert [m.as_message(item)["type"] for item in sent].count(m.PASS_START) == len(rows) // 2
    gc.collect()
    assert not any(gc.is_tracked(row) for row in rows)


def test_pass_ends_that_say_whether_the_module_changed_are_maps_the_collector_stops_tracking(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(CHANGES_VARIABLE, "1")
    sent = _lowered()
    rows = [item for item in sent if isinstance(item, tuple)]
    assert len(rows) > 50 and {row[0] for row in rows} == {m.PASS_START}
    ends = [item for item in sent if isinstance(item, dict) and item["type"] == m.PASS_END]
    assert len(ends) == len(rows)
    assert all(type(end["changed"]) is bool and type(end["name"]) is str for end in ends)
    gc.collect()
    assert not any(gc.is_tracked(item) for item in (*rows, *ends))
