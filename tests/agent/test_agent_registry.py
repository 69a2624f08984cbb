"""The registry alone: exact loss accounting, and what a client attaching late is told first."""

from __future__ import annotations

import threading

from iket_tui.agent.registry import ClientStats, Registry
from iket_tui.protocol import messages as m
from iket_tui.protocol.messages import Message


def start(seq: int, parent: int | None = None, *, depth: int = 0, compile: int = 1) -> Message:
    return m.pass_start(
        compile=compile, context=0, name=f"p{seq}", seq=seq, depth=depth, parent=parent, phase=None, t_ns=seq
    )


def end(seq: int, parent: int | None = None, *, depth: int = 0, compile: int = 1) -> Message:
    return m.pass_end(
        compile=compile,
        context=0,
        name=f"p{seq}",
        seq=seq,
        depth=depth,
        parent=parent,
        phase=None,
        t_ns=seq,
        duration_ns=1,
    )


def _row(msg: Message) -> m.PassTuple:
    """A pass event as the agent emits it."""
    row = m.row_of(msg)
    assert row is not None
    return tuple(row)


def test_every_event_is_delivered_dropped_or_still_queued() -> None:
    registry = Registry()
    client, _ = registry.attach(limit=10)
    for seq in range(25):
        registry.emit(start(seq))
    assert len(client.take(4)) == 4
    client.mark_delivered()
    assert registry.client_stats() == [ClientStats(produced=25, delivered=4, dropped=15, queued=6)]
    for seq in range(25, 30):
        registry.emit(start(seq))
    assert registry.client_stats() == [ClientStats(produced=30, delivered=4, dropped=16, queued=10)]
    assert [m.as_message(item)["seq"] for item in client.take(100)] == [*range(4, 10), *range(25, 29)]


def test_accounting_stays_exact_with_concurrent_compilers_and_a_slow_reader() -> None:
    registry = Registry(backlog=100)
    client, _ = registry.attach(limit=64)
    done = threading.Event()

    def read() -> None:
        while not done.is_set() or client.take(1):
            client.mark_delivered()
            if client.take(7):
                client.mark_delivered()

    def compile_(compile_id: int) -> None:
        for seq in range(5000):
            registry.emit(start(seq, compile=compile_id))

    reader = threading.Thread(target=read)
    reader.start()
    compilers = [threading.Thread(target=compile_, args=(c,)) for c in range(4)]
    for thread in compilers:
        thread.start()
    for thread in compilers:
        thread.join()
    done.set()
    reader.join()
    stats = registry.client_stats()[0]
    assert registry.produced == stats.produced == 20_000
    assert stats.delivered + stats.dropped + stats.queued == 20_000
    assert stats.queued == 0


def test_late_client_gets_passes_still_running_even_beyond_the_backlog() -> None:
    registry = Registry(backlog=2)
    begin = m.compile_begin(compile=1, label="lower", kernel="gemm", target=None, t_ns=0)
    enter = m.pass_context(m.PASS_CONTEXT_ENTER, compile=1, context=0, t_ns=0)
    outer = start(0)
    for msg in (begin, enter, outer, start(1, 0, depth=1), end(1, 0, depth=1), start(2, 0, depth=1)):
        registry.emit(msg)
    client, catch_up = registry.attach(limit=100)
    assert catch_up.messages == [begin, enter, outer, end(1, 0, depth=1), start(2, 0, depth=1)]
    assert (catch_up.backlog, catch_up.backlog_lost) == (2, 4)
    assert registry.open_passes == 2
    registry.emit(end(2, 0, depth=1))
    assert client.take(10) == [end(2, 0, depth=1)]


def test_pass_rows_are_open_until_their_end_row_or_incomplete_map_and_stay_rows() -> None:
    """The agent emits pass events as rows (tuples); a late client's catch-up holds the running
    ones as the same rows, and a ``pass_incomplete`` (a map) closes a row's pass like a ``pass_end``."""
    registry = Registry(backlog=1)
    rows = [_row(start(seq)) for seq in range(3)]
    for seq, row in enumerate(rows):
        registry.emit_pass_start(row, 1, seq)
    registry.emit_pass_end(_row(end(0)), 1, 0)
    registry.emit(
        m.pass_incomplete(compile=1, context=0, name="p1", seq=1, depth=0, parent=None, phase=None, t_ns=9, error=None)
    )
    assert registry.open_passes == 1
    _, catch_up = registry.attach(limit=10)
    assert catch_up.messages[0] is rows[2]
    assert m.as_message(catch_up.messages[1])["type"] == m.PASS_INCOMPLETE  # the backlog of one
    assert registry.open_messages() == [rows[2]]


def test_an_ended_compile_leaves_nothing_running() -> None:
    registry = Registry()
    registry.emit(m.compile_begin(compile=7, label="lower", kernel="k", target=None, t_ns=0))
    registry.emit(start(0, compile=7))
    registry.emit(m.codegen_begin(compile=7, t_ns=1))
    registry.emit(m.compile_begin(compile=8, label="lower", kernel="j", target=None, t_ns=2))
    registry.emit(m.compile_end(compile=7, label="lower", t_ns=3, duration_ns=3, ok=False, error="E: x"))
    assert registry.open_messages() == [m.compile_begin(compile=8, label="lower", kernel="j", target=None, t_ns=2)]
    assert registry.open_passes == 0


def test_a_detached_client_is_offered_nothing_more() -> None:
    registry = Registry()
    client, _ = registry.attach(limit=10)
    registry.emit(start(0))
    registry.detach(client)
    registry.emit(start(1))
    assert [m.as_message(item)["seq"] for item in client.take(10)] == [0]
    assert registry.client_stats() == []
    assert registry.produced == 2


def test_the_sender_is_woken_for_the_first_event_after_it_rearmed_and_hurried_at_half_full() -> None:
    registry = Registry()
    client, _ = registry.attach(limit=4)
    assert not client.wake.is_set()
    registry.emit(start(0))
    assert client.wake.is_set() and not client.hurry.is_set()
    client.rearm()
    assert not client.wake.is_set()
    registry.emit_pass_end(_row(end(0)), 1, 0)
    assert client.wake.is_set() and client.hurry.is_set()  # two of four queued
    client.rearm()
    assert [m.as_message(item)["type"] for item in client.take(10)] == [m.PASS_START, m.PASS_END]
    client.mark_delivered()
    assert not client.wake.is_set() and not client.hurry.is_set()
    registry.emit(start(1))
    assert client.wake.is_set() and not client.hurry.is_set()
