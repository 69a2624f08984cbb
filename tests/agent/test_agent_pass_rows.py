"""What the agent keeps of a real compile's passes costs Python's garbage collector nothing.

The agent holds thousands of pass events (its backlog, the open passes, every client's queue).
Objects the collector tracks and that live long make its full collections come sooner, and a
full collection in a process that imported TileLang, with its many objects, is long: so the agent
builds each pass event as a tuple of plain values (TVM hands pass names out as its own
``String``, which the collector tracks, so they are copied to ``str``), which the collector stops
tracking at the first collection it survives. A pass end that says whether its pass changed the
module (while a client is attached) is a map of plain values, which the collector drops as well.
"""

from __future__ import annotations

import gc

import pytest

from iket_tui.agent.registry import Registry
from iket_tui.protocol import messages as m

pytestmark = pytest.mark.tilelang
pytest.importorskip("tilelang")

from iket_tui.agent import tilelang_tool  # noqa: E402
from iket_tui.demo import kernels  # noqa: E402


def test_pass_events_of_a_real_compile_are_rows_the_collector_stops_tracking() -> None:
    registry = Registry()
    client, _ = registry.attach(limit=100_000)
    tilelang_tool.register(registry)
    try:
        kernels.lower("gemm")
    finally:
        tilelang_tool.unregister()
    sent = client.take(100_000)
    rows = [item for item in sent if isinstance(item, tuple)]
    assert len(rows) > 50
    assert {row[0] for row in rows} == {m.PASS_START}
    assert all(type(row[3]) is str for row in rows)
    assert [m.as_message(item)["type"] for item in sent].count(m.PASS_START) == len(rows)
    # with a client attached each end says whether its pass changed the module: a map of plain values
    ends = [item for item in sent if isinstance(item, dict) and item["type"] == m.PASS_END]
    assert len(ends) == len(rows)
    assert all(type(end["changed"]) is bool and type(end["name"]) is str for end in ends)
    gc.collect()
    assert not any(gc.is_tracked(item) for item in (*rows, *ends))
