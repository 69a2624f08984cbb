"""What a cut keeps of what came before its span: in a stream of two processes, each one's
hello under its own ``process`` frame, the compile still running where the span starts with
its passes so far, and none of a finished compile; and where a span starts and ends."""

from __future__ import annotations

from typing import Any

import pytest

from iket_tui.model.session import Session
from iket_tui.protocol import messages as m
from iket_tui.sources.span import SpanContext, SpanCursor, TimeSpan, Where

S = 1_000_000_000


def _pass(kind: str, pid_compile: int, seq: int, t: int) -> m.Message:
    common: dict[str, Any] = {"compile": pid_compile, "context": 0, "seq": seq, "depth": 0, "parent": None}
    if kind == m.PASS_START:
        return m.pass_start(name=f"tl.P{seq}", phase=None, t_ns=t, **common)
    return m.pass_end(name=f"tl.P{seq}", phase=None, t_ns=t, duration_ns=1, **common)


def _hello(pid: int, t: int) -> m.Message:
    return m.hello(role="agent", pid=pid, start_time=pid * 10, software_version="x", capabilities=[], t_ns=t)


def _begin(compile_id: int, kernel: str, t: int) -> m.Message:
    return m.compile_begin(compile=compile_id, label=f"kernel={kernel}", kernel=kernel, target="cuda", t_ns=t)


def _end(compile_id: int, t: int) -> m.Message:
    return m.compile_end(
        compile=compile_id, label="", t_ns=t, duration_ns=1, ok=True, error=None, error_type=None, traceback=None
    )


STREAM: list[m.Message] = [
    m.recording(created_unix=0.0, software_version="x", source="two processes"),
    _hello(1, 1 * S),
    _begin(1, "slow", 2 * S),
    m.pass_context("pass_context_enter", compile=1, context=0, t_ns=2 * S),
    _pass(m.PASS_START, 1, 0, 3 * S),
    _pass(m.PASS_END, 1, 0, 4 * S),
    _pass(m.PASS_START, 1, 1, 5 * S),
    m.process(pid=2, start_time=20),
    _hello(2, 5 * S),
    _begin(7, "quick", 6 * S),
    _end(7, 7 * S),
    m.heartbeat(t_ns=7 * S, produced=0, dropped=0, open_passes=0),
    m.process(pid=1, start_time=10),
    m.heartbeat(t_ns=8 * S, produced=0, dropped=0, open_passes=1),
    # from here 9 s and more after the first timestamp (1 s)
    _pass(m.PASS_END, 1, 1, 10 * S),
    _end(1, 11 * S),
    m.process(pid=2, start_time=20),
    _begin(8, "later", 12 * S),
]
SPAN_AT = STREAM.index(STREAM[14])


def test_where_a_span_starts_and_ends_in_the_time_column_s_seconds() -> None:
    cursor = SpanCursor(TimeSpan(9.0, 10.5))
    where = [cursor.where(msg) for msg in STREAM]
    assert where[:SPAN_AT] == [Where.BEFORE] * SPAN_AT
    assert where[SPAN_AT:] == [Where.INSIDE, Where.INSIDE, Where.INSIDE, Where.AFTER]  # 9 s, 10 s, untimed, 11 s
    assert cursor.inside == 3 and cursor.length_said() == "it lasts 11.000 s"


def test_the_context_of_a_span_keeps_each_hello_and_the_running_compile_under_its_process() -> None:
    cursor = SpanCursor(TimeSpan(9.0))
    context = SpanContext()
    span = []
    for msg in STREAM:
        where = cursor.where(msg)
        if where is Where.BEFORE:
            context.take(msg)
        else:
            span.append(msg)
    kept = list(context.messages())
    said = [(msg["type"], msg.get("pid"), msg.get("compile"), msg.get("seq")) for msg in kept]
    assert said == [
        (m.RECORDING, None, None, None),
        (m.HELLO, 1, None, None),
        (m.COMPILE_BEGIN, None, 1, None),
        ("pass_context_enter", None, 1, None),
        (m.PASS_START, None, 1, 0),
        (m.PASS_END, None, 1, 0),
        (m.PASS_START, None, 1, 1),
        (m.PROCESS, 2, None, None),
        (m.HELLO, 2, None, None),  # its finished compile 7 and the heartbeats are left out
        (m.PROCESS, 1, None, None),  # whose the span's first message is
    ]
    session = Session()
    session.apply([*kept, *span])
    processes = {node.pid: node for node in session.tree.processes}
    assert sorted(processes) == [1, 2]
    slow = processes[1].by_id[1]
    assert (slow.kernel, str(slow.status)) == ("slow", "done")
    assert [p.name for p in slow.context_order[0].passes.values()] == ["tl.P0", "tl.P1"]
    assert [comp.kernel for comp in processes[2].compiles] == ["later"]


@pytest.mark.parametrize(
    ("start", "end", "error"), [(5.0, 1.0, "--to 1 is before --from 5"), (-1.0, None, "0 or more")]
)
def test_a_span_that_runs_backwards_or_before_the_start_is_refused(start: float, end: float | None, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        TimeSpan(start, end)


def test_processes_of_two_hosts_with_one_pid_are_told_apart() -> None:
    stream = [
        m.recording(created_unix=0.0, software_version="x", source="two hosts"),
        {**m.process(pid=5, start_time=1), "host": "node1"},
        _hello(5, 1 * S),
        _begin(1, "on_node1", 2 * S),
        {**m.process(pid=5, start_time=1), "host": "node2"},
        _hello(5, 2 * S),
        _begin(1, "on_node2", 3 * S),
        _end(1, 4 * S),  # node2's compile 1 ends; node1's runs on
        m.heartbeat(t_ns=10 * S, produced=0, dropped=0, open_passes=0),
    ]
    cursor = SpanCursor(TimeSpan(8.0))
    context = SpanContext()
    for msg in stream:
        if cursor.where(msg) is Where.BEFORE:
            context.take(msg)
    kept = [(msg["type"], msg.get("host"), msg.get("kernel")) for msg in context.messages()]
    assert (m.COMPILE_BEGIN, None, "on_node1") in kept and (m.COMPILE_BEGIN, None, "on_node2") not in kept
    assert kept[-1] == (m.PROCESS, "node2", None)  # the span goes on with node2's messages
