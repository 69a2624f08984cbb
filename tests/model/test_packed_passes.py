"""Passes kept packed until read: the tree they make is the tree the nodes would have made,
whatever order, repeats or values a stream brings; what the packed form cannot hold goes to
the nodes first."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from iket_tui.model.nodes import DONE, FAILED, PassNode
from iket_tui.model.session import Session
from iket_tui.model.synthetic import Lowering, agent_hello
from iket_tui.protocol import messages as m
from iket_tui.sources.reading import RecordingReader
from tests.model.test_model_pass_rows import _shape

EXAMPLES = Path(__file__).parents[2] / "examples"


def _packed_and_nodes(items: list[Any]) -> tuple[Session, Session]:
    """``items`` applied in one batch to a session that packs (runs of rows in one loop), and
    one at a time to a session whose contexts are made into nodes after every message (so that
    each pass after a context's first takes the nodes' own path)."""
    packed, nodes = Session(), Session()
    packed.apply(items)
    for item in items:
        nodes.apply([item])
        nodes.tree.packing.unpack_all()
    return packed, nodes


def _same(packed: Session, nodes: Session) -> None:
    assert _shape(packed.tree) == _shape(nodes.tree)
    assert (packed.counters.events, packed.counters.malformed) == (nodes.counters.events, nodes.counters.malformed)
    assert packed.tree.pass_count == nodes.tree.pass_count == len(packed.tree.passes)
    names = {node.name for node in packed.tree.passes}
    assert {name: packed.tree.typical.median(name) for name in names} == {
        name: nodes.tree.typical.median(name) for name in names
    }


def test_a_recorded_session_stays_packed_until_read_then_reads_as_the_nodes_would() -> None:
    items = [item for chunk in RecordingReader(EXAMPLES / "h200-demo.msgpack", rows=True).chunks() for item in chunk]
    packed, nodes = _packed_and_nodes(items)
    tree = packed.tree
    done = [comp for comp in tree.compiles if comp.status is DONE]
    assert len(done) == 7 and all(ctx.packed is not None for comp in done for ctx in comp.context_order)
    made = {obj.compile for obj in gc.get_objects() if isinstance(obj, PassNode) and obj.compile in tree.compiles}
    assert made and all(comp.status is FAILED for comp in made)  # a failure is looked at: its passes are nodes
    _same(packed, nodes)  # reads every pass: made into nodes now
    assert not tree.packing.contexts
    assert any(comp.failing is not None for comp in tree.compiles)


def test_a_running_pass_is_seen_running_then_fails_as_the_nodes_say() -> None:
    lowering = Lowering(compile=1, kernel="gemm", start_ns=1_000, fail_in="tl.LayoutInference")
    stream = [m.row_of(msg) or msg for msg in [agent_hello(), *lowering.messages()]]
    failed_at = next(i for i, item in enumerate(stream) if type(item) is list and item[0] == m.PASS_INCOMPLETE)
    packed, nodes = _packed_and_nodes(stream[:failed_at])
    assert [node.name for node in packed.tree.running_passes()] == [node.name for node in nodes.tree.running_passes()]
    assert packed.tree.running_passes()[-1].name == "tl.LayoutInference"
    for item in stream[failed_at:]:
        packed.apply([item])
        nodes.apply([item])
    _same(packed, nodes)
    assert packed.tree.compiles[0].failing is not None
    assert packed.tree.compiles[0].failing.name == "tl.LayoutInference"


def _row(kind: str, seq: int, parent: int | None, t: int, extra: Any = None, *, context: int = 1) -> list[Any]:
    return [kind, 1, context, f"p{seq % 5}", seq, 0 if parent is None else 1, parent, "lower", t, extra]


_HUGE = st.sampled_from([2**62 - 1, 2**62, 2**63 - 1, 2**63, 2**70, -(2**63), -(2**62 - 1), -(2**62), -(2**70)])
_SEQ = st.one_of(st.integers(0, 12), _HUGE, st.just(True))
_TIME = st.one_of(st.integers(0, 10**6), _HUGE)


@st.composite
def _streams(draw: st.DrawFn) -> list[Any]:
    """Passes that start and end as a pass manager reports them, nested, in two contexts, with
    what a stream may also bring drawn in among them: an end out of order or repeated, a start
    repeated, a parent that is not the innermost open pass or is not there, a pass left
    incomplete, values past 64 bits (durations whose sums leave them too), a bool for a number."""
    rows: list[Any] = [agent_hello()]
    open_passes: dict[int, list[int]] = {1: [], 2: []}
    next_seq = {1: 0, 2: 0}
    t = 0
    for _ in range(draw(st.integers(1, 60))):
        context = draw(st.sampled_from([1, 1, 1, 2]))
        running = open_passes[context]
        t += draw(st.integers(0, 1000))
        action = draw(st.sampled_from(["start", "start", "end", "end", "end", "odd"]))
        if action == "start" or (action == "end" and not running):
            seq = next_seq[context]
            next_seq[context] += 1
            rows.append(_row(m.PASS_START, seq, running[-1] if running else None, t, context=context))
            running.append(seq)
        elif action == "end":
            seq = running.pop()
            duration = draw(st.one_of(st.integers(0, 1000), _HUGE))
            rows.append(_row(m.PASS_END, seq, running[-1] if running else None, t, duration, context=context))
        else:
            kind = draw(st.sampled_from([m.PASS_START, m.PASS_END, m.PASS_INCOMPLETE]))
            extra = {m.PASS_START: None, m.PASS_END: draw(_TIME), m.PASS_INCOMPLETE: "boom"}[kind]
            seq, parent = draw(_SEQ), draw(st.one_of(st.none(), _SEQ))
            rows.append(_row(kind, seq, parent, draw(_TIME), extra, context=context))
            if draw(st.booleans()) and len(rows) > 2:
                rows.append(list(rows[draw(st.integers(1, len(rows) - 1))]))  # told again
    return rows


@settings(max_examples=300, deadline=None)
@given(_streams())
def test_any_stream_makes_the_tree_the_nodes_make(stream: list[Any]) -> None:
    _same(*_packed_and_nodes(stream))


def test_in_order_passes_of_every_kind_of_nesting_stay_packed() -> None:
    stream = [
        agent_hello(),
        _row(m.PASS_START, 1, None, 10),
        _row(m.PASS_START, 2, 1, 11),
        _row(m.PASS_START, 3, 2, 12),
        _row(m.PASS_END, 3, 2, 13, 1),
        _row(m.PASS_END, 2, 1, 14, 3),
        _row(m.PASS_START, 4, 1, 15),
        _row(m.PASS_END, 4, 1, 17, 2),
        _row(m.PASS_END, 1, None, 20, 10),
        _row(m.PASS_START, 5, None, 21),
    ]
    packed, nodes = _packed_and_nodes(stream)
    assert len(packed.tree.packing.contexts) == 1
    (ctx,) = packed.tree.packing.contexts
    assert ctx.root_ns == 10 and len(ctx.packed or ()) == 5
    _same(packed, nodes)
    first = packed.tree.passes[0]
    assert (first.child_ns, [child.seq for child in first.children]) == (5, [2, 4])
    assert [node.seq for node in packed.tree.running_passes()] == [5]


def test_durations_whose_sum_leaves_64_bits_are_summed_exactly() -> None:
    big = 2**62 - 1
    stream: list[Any] = [agent_hello(), _row(m.PASS_START, 0, None, 1)]
    for seq in (1, 2, 3):
        stream += [_row(m.PASS_START, seq, 0, 2), _row(m.PASS_END, seq, 0, 3, big)]
    packed, nodes = _packed_and_nodes(stream)
    _same(packed, nodes)
    assert packed.tree.passes[0].child_ns == 3 * big


def test_durations_whose_sum_falls_below_64_bits_are_summed_exactly() -> None:
    low = -(2**62 - 1)
    stream: list[Any] = [agent_hello(), _row(m.PASS_START, 0, None, 1)]
    for seq in (1, 2, 3):
        stream += [_row(m.PASS_START, seq, 0, 2), _row(m.PASS_END, seq, 0, 3, low)]
    packed, nodes = _packed_and_nodes(stream)
    _same(packed, nodes)
    assert packed.tree.passes[0].child_ns == 3 * low


def test_late_passes_of_a_summarised_compile_leave_the_count_when_let_go() -> None:
    """A catch-up backlog repeats passes of a compile summarised since: they are counted as they
    come, and no longer once the bound lets them go, so the bound summarises no more than it must."""
    session = Session(max_passes=300)
    session.apply([agent_hello()])
    first: list[Any] = []
    t = 1_000
    for compile_id in range(1, 9):
        lowering = Lowering(compile=compile_id, kernel=f"k{compile_id}", start_ns=t)
        rows = [m.row_of(msg) or msg for msg in lowering.messages()]
        first = first or [row for row in rows if type(row) is list][:50]
        session.apply(rows)
        t = lowering.end_ns() + 1
        if session.tree.summarised:
            session.apply([[*row[:8], t, row[9]] for row in first])
        assert session.tree.pass_count >= len(session.tree.passes)
    tree = session.tree
    assert tree.pass_count == len(tree.passes) <= 300
    assert tree.summarised < len(tree.compiles) - 1  # the newest compiles keep their passes


def test_passes_that_come_after_those_read_are_appended_to_the_list_not_sorted_into_it() -> None:
    """A search scans the list of every pass once, then only what was appended: passes packed
    after it was read come after it in tree order, so the list grows without being rebuilt."""
    session = Session()
    session.apply([agent_hello()])
    t = 1_000
    for compile_id in (1, 2, 3):
        lowering = Lowering(compile=compile_id, kernel=f"k{compile_id}", start_ns=t)
        session.apply([m.row_of(msg) or msg for msg in lowering.messages()])
        t = lowering.end_ns() + 1
        if compile_id == 1:
            read = len(session.tree.passes)
            version = session.tree.pass_list_version
    passes = session.tree.passes
    assert len(passes) == 3 * read and session.tree.pass_list_version == version
    assert [node.order for node in passes] == sorted(node.order for node in passes)
