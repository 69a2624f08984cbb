"""The pass tree fed pass rows (protocol 1.1): the same tree as from maps, bad rows counted."""

from __future__ import annotations

from typing import Any

from iket_tui.model.nodes import CompileNode
from iket_tui.model.pass_tree import PassTree
from iket_tui.model.session import Session
from iket_tui.model.synthetic import Lowering, agent_hello
from iket_tui.protocol import messages as m


def _as_rows(msgs: list[m.Message]) -> list[Any]:
    """The stream as a reader that keeps rows hands it out."""
    return [m.row_of(msg) or msg for msg in msgs]


def _shape(tree: PassTree) -> list[tuple[Any, ...]]:
    """Everything a user sees of the tree's compiles and passes."""
    out: list[tuple[Any, ...]] = []
    for comp in tree.compiles:
        out.append((comp.id, comp.kernel, comp.status, comp.begin_ns, comp.end_ns, comp.error, _failing(comp)))
        for ctx in comp.context_order:
            out.append((ctx.id, ctx.status, ctx.begin_ns, ctx.end_ns, ctx.root_ns, [n.seq for n in ctx.roots]))
    for node in tree.passes:
        parent = None if node.parent is None else node.parent.seq
        timing = (node.start_ns, node.end_ns, node.duration_ns, node.child_ns)
        out.append((node.name, node.seq, node.depth, node.phase, *timing, node.status, node.error, parent, node.order))
        out.append([child.seq for child in node.children])
    return out


def _failing(comp: CompileNode) -> str | None:
    return None if comp.failing is None else comp.failing.name


def _stream() -> list[m.Message]:
    good = Lowering(compile=1, kernel="gemm", start_ns=1_000)
    bad = Lowering(compile=2, kernel="add_transposed", start_ns=good.end_ns() + 1, fail_in="tl.LayoutInference")
    return [agent_hello(), *good.messages(), *bad.messages()]


def test_rows_build_the_same_tree_as_maps() -> None:
    stream = _stream()
    rows = _as_rows(stream)
    assert sum(isinstance(item, list) for item in rows) > 100
    maps, rows_session = Session(), Session()
    maps.apply(stream)
    rows_session.apply(rows)
    from_maps, from_rows = maps.tree, rows_session.tree
    assert _shape(from_rows) == _shape(from_maps)
    assert from_rows.compiles[1].failing is not None
    assert from_rows.compiles[1].failing.name == "tl.LayoutInference"
    assert (rows_session.counters.events, rows_session.counters.malformed) == (maps.counters.events, 0)
    assert rows_session.last_t_ns == maps.last_t_ns == stream[-1]["t_ns"]
    assert from_rows.typical.median("tl.Simplify") == from_maps.typical.median("tl.Simplify")


def test_maps_and_rows_mix_in_one_apply() -> None:
    stream = _stream()
    mixed = [m.row_of(msg) or msg if index % 2 else msg for index, msg in enumerate(stream)]
    from_maps, from_mixed = Session(), Session()
    from_maps.apply(stream)
    from_mixed.apply(mixed)
    assert _shape(from_mixed.tree) == _shape(from_maps.tree)


def test_a_row_ending_a_batch_moves_the_clock() -> None:
    spec = Lowering(compile=1, kernel="gemm", start_ns=5_000)
    rows = _as_rows(spec.messages())[:10]
    assert isinstance(rows[-1], list)
    session = Session()
    session.apply(rows)
    assert session.last_t_ns == rows[-1][8]


def test_a_pass_whose_start_was_missed_is_built_from_its_end_row() -> None:
    start = m.pass_start(compile=1, context=1, name="tl.Simplify", seq=4, depth=1, parent=None, phase="p", t_ns=10)
    end = {**start, "type": m.PASS_END, "t_ns": 30, "duration_ns": 20}
    row = m.row_of(end)
    assert row is not None
    session = Session()
    tree = session.tree
    session.apply([row])
    [node] = tree.passes
    assert (node.name, node.seq, node.depth, node.phase, node.start_ns, node.duration_ns) == (
        "tl.Simplify",
        4,
        1,
        "p",
        10,
        20,
    )


def test_malformed_rows_are_counted_and_change_nothing() -> None:
    start = m.row_of(m.pass_start(compile=1, context=1, name="tl.X", seq=0, depth=0, parent=None, phase=None, t_ns=10))
    assert start is not None
    end = ["pass_end", *start[1:9], 5]
    incomplete = ["pass_incomplete", *start[1:9], "Error: boom"]
    bad: list[Any] = [
        [],
        start[:9],
        [*start, "more"],
        ["frobnicate", *start[1:]],
        [None, *start[1:]],
        [["pass_start"], *start[1:]],
        ["pass_start", "1", *start[2:]],
        ["pass_start", *start[1:3], None, *start[4:]],
        ["pass_start", *start[1:6], "zero", *start[7:]],
        ["pass_start", *start[1:7], 3, *start[8:]],
        ["pass_start", *start[1:8], 10.5, None],
        [*end[:9], None],
        [*end[:4], True, *end[5:]],
        [*end[:3], 7, *end[4:]],  # start unseen, and no name to build it from
        [*incomplete[:9], 404],
        ("pass_start", *start[1:]),
    ]
    session = Session()
    tree = session.tree
    session.apply(bad)
    assert session.counters.malformed == len(bad)
    assert session.counters.unknown == 0
    assert tree.compiles == [] and tree.passes == []
    assert session.counters.events == 0
    session.apply([start, end])
    [node] = tree.passes
    assert (node.name, node.duration_ns, session.counters.events) == ("tl.X", 5, 2)


def test_malformed_pass_maps_are_counted_as_before() -> None:
    start = m.pass_start(compile=1, context=1, name="tl.X", seq=0, depth=0, parent=None, phase=None, t_ns=10)
    missing_parent = {key: value for key, value in start.items() if key != "parent"}
    end_without_duration = {**start, "type": m.PASS_END}
    incomplete_bad_error = {**start, "type": m.PASS_INCOMPLETE, "error": 3}
    session = Session()
    tree = session.tree
    session.apply([missing_parent, end_without_duration, incomplete_bad_error])
    assert session.counters.malformed == 3
    assert tree.passes == []
    incomplete_without_error = {**start, "type": m.PASS_INCOMPLETE}
    session.apply([start, incomplete_without_error])
    [node] = tree.passes
    assert (node.end_ns, node.error, session.counters.malformed) == (10, None, 3)


def test_heartbeats_carry_the_agents_observer_errors() -> None:
    session = Session()
    session.apply([m.heartbeat(t_ns=1, produced=5, dropped=0, open_passes=0, observer_errors=2)])
    assert session.counters.observer_errors == 2
    session.apply([m.heartbeat(t_ns=2, produced=6, dropped=0, open_passes=0, observer_errors=1)])
    assert session.counters.observer_errors == 2  # a total: the largest seen stands
    old_agent = {"type": m.HEARTBEAT, "t_ns": 3, "produced": 7, "dropped": 0, "open_passes": 0}
    session.apply([old_agent])
    assert (session.counters.observer_errors, session.counters.heartbeats, session.counters.malformed) == (2, 3, 0)
