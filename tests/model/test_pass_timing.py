"""Per pass name timing across compiles: counts, inclusive and self totals, shares of compile
time, failures, running passes, and the slowest passes of one compile; kept incrementally."""

from __future__ import annotations

from pathlib import Path

import pytest

from iket_tui.model.pass_timing import PassStats, PassTiming, TimingSummary, slowest_passes
from iket_tui.model.pass_tree import PassTree
from iket_tui.model.session import Session
from iket_tui.model.synthetic import DEVICE_BUILD, Lowering, agent_hello, lowerings
from iket_tui.protocol import messages as m
from iket_tui.sources.reading import read_recording

MS = 1_000_000
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"
T1, T2, T3 = 1000 * MS, 2000 * MS, 3000 * MS
NOW = T3 + 10 * MS


def _run(compile: int, name: str, seq: int, start: int, end: int, *, parent: int | None = None) -> list[m.Message]:
    where = {"compile": compile, "context": 1, "name": name, "seq": seq, "parent": parent, "phase": None}
    depth = 0 if parent is None else 1
    return [
        m.pass_start(**where, depth=depth, t_ns=start),
        m.pass_end(**where, depth=depth, t_ns=end, duration_ns=end - start),
    ]


def _begin(compile: int, kernel: str, t: int) -> list[m.Message]:
    return [
        m.compile_begin(compile=compile, label=f"kernel={kernel}", kernel=kernel, target="cuda", t_ns=t),
        m.pass_context(m.PASS_CONTEXT_ENTER, compile=compile, context=1, t_ns=t + 1 * MS),
    ]


def three_compiles() -> list[m.Message]:
    """Compile 1 (add, 40 ms) succeeds: tl.LowerTileOp 10 ms around tl.Simplify 4 ms, then
    tl.Simplify 2 ms, then 20 ms of codegen. Compile 2 (mul, 12 ms) fails in
    tl.LayoutInference, nested in tl.LowerTileOp after a 2 ms tl.Simplify. Compile 3 (relu)
    is still running tl.LowerTileOp, started 6 ms before ``NOW``."""
    inner = m.pass_start(compile=2, context=1, name="tl.LayoutInference", seq=2, depth=1, parent=0, phase=None, t_ns=0)
    outer = m.pass_start(compile=2, context=1, name="tl.LowerTileOp", seq=0, depth=0, parent=None, phase=None, t_ns=0)
    return [
        *_begin(1, "add", T1),
        m.pass_start(
            compile=1, context=1, name="tl.LowerTileOp", seq=0, depth=0, parent=None, phase=None, t_ns=T1 + 2 * MS
        ),
        *_run(1, "tl.Simplify", 1, T1 + 3 * MS, T1 + 7 * MS, parent=0),
        m.pass_end(
            compile=1,
            context=1,
            name="tl.LowerTileOp",
            seq=0,
            depth=0,
            parent=None,
            phase=None,
            t_ns=T1 + 12 * MS,
            duration_ns=10 * MS,
        ),
        *_run(1, "tl.Simplify", 2, T1 + 13 * MS, T1 + 15 * MS),
        m.pass_context(m.PASS_CONTEXT_EXIT, compile=1, context=1, t_ns=T1 + 16 * MS),
        m.codegen_begin(compile=1, t_ns=T1 + 17 * MS, name=DEVICE_BUILD),
        m.codegen_end(compile=1, t_ns=T1 + 37 * MS, duration_ns=20 * MS, ok=True, name=DEVICE_BUILD),
        m.compile_end(compile=1, label="kernel=add", t_ns=T1 + 40 * MS, duration_ns=40 * MS, ok=True),
        *_begin(2, "mul", T2),
        {**outer, "t_ns": T2 + 2 * MS},
        *_run(2, "tl.Simplify", 1, T2 + 3 * MS, T2 + 5 * MS, parent=0),
        {**inner, "t_ns": T2 + 6 * MS},
        {**outer, "type": m.PASS_INCOMPLETE, "t_ns": T2 + 9 * MS, "error": None},
        {**inner, "type": m.PASS_INCOMPLETE, "t_ns": T2 + 9 * MS, "error": None},
        m.pass_context(m.PASS_CONTEXT_EXIT, compile=2, context=1, t_ns=T2 + 10 * MS),
        m.compile_end(
            compile=2,
            label="kernel=mul",
            t_ns=T2 + 12 * MS,
            duration_ns=12 * MS,
            ok=False,
            error="InternalError: Layout infer conflict",
            stage="pass",
        ),
        *_begin(3, "relu", T3),
        *_run(3, "tl.Simplify", 0, T3 + 2 * MS, T3 + 3 * MS),
        m.pass_start(
            compile=3, context=1, name="tl.LowerTileOp", seq=1, depth=0, parent=None, phase=None, t_ns=T3 + 4 * MS
        ),
    ]


def _session(messages: list[m.Message]) -> Session:
    session = Session()
    session.apply(messages)
    return session


def _tree(messages: list[m.Message]) -> PassTree:
    return _session(messages).tree


def _fields(stats: PassStats) -> tuple[object, ...]:
    where = stats.max_compile.id if stats.max_compile is not None else None
    return (
        stats.count,
        stats.total_ns,
        stats.self_ns,
        stats.mean_ns,
        stats.max_ns,
        where,
        stats.failed,
        stats.incomplete,
        stats.running,
    )


def _picture(summary: TimingSummary) -> tuple[object, ...]:
    by_name = {name: _fields(stats) for name, stats in sorted(summary.by_name.items())}
    totals = (summary.compiles, summary.runs, summary.running, summary.compile_ns, summary.pass_ns, summary.codegen_ns)
    return by_name, totals


def test_per_name_counts_times_failures_and_running_runs() -> None:
    summary = PassTiming(_tree(three_compiles())).summary(NOW)
    by_name = summary.by_name
    # count, total, self, mean, max, compile of the max, failed, incomplete, running
    assert _fields(by_name["tl.LowerTileOp"]) == (3, 23 * MS, 14 * MS, 7_666_666, 10 * MS, 1, 0, 1, 1)
    assert _fields(by_name["tl.Simplify"]) == (4, 9 * MS, 9 * MS, 2_250_000, 4 * MS, 1, 0, 0, 0)
    assert _fields(by_name["tl.LayoutInference"]) == (1, 3 * MS, 3 * MS, 3 * MS, 3 * MS, 2, 1, 0, 0)
    assert by_name["tl.LowerTileOp"].unfinished == 1 and by_name["tl.LayoutInference"].unfinished == 1
    assert (summary.compiles, summary.runs, summary.running) == (3, 8, 1)
    assert (summary.compile_ns, summary.pass_ns, summary.codegen_ns, summary.other_ns) == (
        62 * MS,
        26 * MS,
        20 * MS,
        16 * MS,
    )


def test_shares_are_self_time_over_compile_time_and_add_up() -> None:
    summary = PassTiming(_tree(three_compiles())).summary(NOW)
    shares = {name: summary.share(stats.self_ns) for name, stats in summary.by_name.items()}
    assert shares == pytest.approx({"tl.LowerTileOp": 14 / 62, "tl.Simplify": 9 / 62, "tl.LayoutInference": 3 / 62})
    assert sum(shares.values()) == pytest.approx(summary.share(summary.pass_ns))
    parts = summary.pass_ns + summary.codegen_ns + summary.other_ns
    assert parts == summary.compile_ns


def test_running_passes_and_open_compiles_count_their_time_so_far() -> None:
    timing = PassTiming(_tree(three_compiles()))
    before = timing.summary(NOW)
    later = timing.summary(NOW + 5 * MS)
    assert later.by_name["tl.LowerTileOp"].total_ns == before.by_name["tl.LowerTileOp"].total_ns + 5 * MS
    assert later.compile_ns == 67 * MS and later.pass_ns == 31 * MS
    assert timing.summary(NOW + 5 * MS) is later  # the same tree at the same time: nothing is recomputed


def test_rows_sort_by_any_column_with_ties_in_name_order() -> None:
    summary = PassTiming(_tree(three_compiles())).summary(NOW)

    def names(by: str, *, descending: bool = True) -> list[str]:
        return [stats.name for stats in summary.rows(by, descending=descending)]

    assert names("self") == ["tl.LowerTileOp", "tl.Simplify", "tl.LayoutInference"]
    assert names("count") == ["tl.Simplify", "tl.LowerTileOp", "tl.LayoutInference"]
    assert names("max", descending=False) == ["tl.LayoutInference", "tl.Simplify", "tl.LowerTileOp"]
    assert names("name", descending=False) == ["tl.LayoutInference", "tl.LowerTileOp", "tl.Simplify"]
    assert names("mean") == ["tl.LowerTileOp", "tl.LayoutInference", "tl.Simplify"]
    assert names("unfinished") == ["tl.LayoutInference", "tl.LowerTileOp", "tl.Simplify"]  # one each, then by name
    assert names("share") == names("self")


def test_slowest_passes_of_one_compile_by_self_time() -> None:
    tree = _tree(three_compiles())
    first, failed, running = tree.compiles
    assert [(run.node.name, run.self_ns, run.inclusive_ns) for run in slowest_passes(first, NOW)] == [
        ("tl.LowerTileOp", 6 * MS, 10 * MS),
        ("tl.Simplify", 4 * MS, 4 * MS),
        ("tl.Simplify", 2 * MS, 2 * MS),
    ]
    assert [(run.node.name, run.self_ns) for run in slowest_passes(failed, NOW, limit=2)] == [
        ("tl.LayoutInference", 3 * MS),
        ("tl.LowerTileOp", 2 * MS),
    ]
    assert [(run.node.name, run.running) for run in slowest_passes(running, NOW)] == [
        ("tl.LowerTileOp", True),
        ("tl.Simplify", False),
    ]


def test_compile_times_say_where_one_compile_went() -> None:
    tree = _tree(three_compiles())
    timing = PassTiming(tree)
    first, failed, running = tree.compiles
    times = timing.compile_times(first, NOW)
    assert (times.compile_ns, times.pass_ns, times.codegen_ns, times.other_ns) == (40 * MS, 12 * MS, 20 * MS, 8 * MS)
    assert (times.runs, times.running, times.unfinished) == (3, 0, 0)
    assert timing.compile_times(failed, NOW).unfinished == 2
    assert timing.compile_times(running, NOW + 1 * MS).compile_ns == 11 * MS


def test_kept_up_to_date_as_the_stream_arrives_in_pieces() -> None:
    """After every piece, the incremental figures equal those of a fresh look at the tree."""
    specs = lowerings(5, fail=(2,))
    stream = [agent_hello(), *(msg for spec in specs for msg in spec.messages())]
    session = Session()
    tree = session.tree
    timing = PassTiming(tree)
    for start in range(0, len(stream), 37):
        session.apply(stream[start : start + 37])
        now = session.last_t_ns + 1 * MS
        assert _picture(timing.summary(now)) == _picture(PassTiming(tree).summary(now))
    final = timing.summary(session.last_t_ns)
    assert final.compiles == 5 and final.running == 0
    assert final.by_name["tl.LayoutInference"].failed == 1
    assert final.by_name["tl.Simplify"].count == 7 * 4 + 3  # 7 runs in a full lowering, 3 before tl.LayoutInference


def test_a_late_message_about_an_ended_compile_is_counted() -> None:
    session = _session(three_compiles())
    tree = session.tree
    timing = PassTiming(tree)
    before = timing.summary(NOW).by_name["tl.Simplify"].count
    session.apply(_run(1, "tl.Simplify", 7, T1 + 38 * MS, T1 + 39 * MS))  # reported after the compile ended
    after = timing.summary(NOW)
    assert after.by_name["tl.Simplify"].count == before + 1
    assert _picture(after) == _picture(PassTiming(tree).summary(NOW))


def test_the_real_h200_recording() -> None:
    messages, _ = read_recording(EXAMPLE)
    session = _session(messages)
    tree = session.tree
    session.end_stream("the recording ended")
    summary = PassTiming(tree).summary(session.last_t_ns)
    by_name = summary.by_name
    assert (summary.compiles, summary.runs, summary.running) == (9, 734, 0)
    assert {name: by_name[name].count for name in ("tl.Simplify", "pass_fn", "tirx.Simplify", "tl.LowerTileOp")} == {
        "tl.Simplify": 55,
        "pass_fn": 35,
        "tirx.Simplify": 32,
        "tl.LowerTileOp": 8,
    }
    layout = by_name["tl.LayoutInference"]
    assert (layout.count, layout.failed, layout.incomplete) == (9, 1, 0)
    assert layout.max_compile is not None and layout.max_compile.kernel == "softmax"
    assert sum(stats.count for stats in by_name.values()) == 734
    shares = sum(summary.share(stats.self_ns) for stats in by_name.values())
    assert shares == pytest.approx(summary.share(summary.pass_ns))
    assert summary.pass_ns + summary.codegen_ns + summary.other_ns == summary.compile_ns
    assert (summary.compile_ns, summary.pass_ns, summary.codegen_ns) == (21_703_318_060, 5_512_558_739, 16_156_760_414)
    slowest = summary.rows("self")[0]  # the demo's slow_gemm spends 4 s in one pass
    assert slowest.name == "tl.InjectSoftwarePipeline" and slowest.max_compile is not None
    assert (slowest.count, slowest.max_ns, slowest.max_compile.kernel) == (9, 4_000_595_853, "slow_gemm")


def test_an_empty_tree() -> None:
    summary = PassTiming(PassTree()).summary(0)
    assert (summary.compiles, summary.runs, summary.compile_ns) == (0, 0, 0)
    assert summary.share(0) == 0.0 and summary.rows() == []


def test_a_lowering_from_the_synthetic_stream() -> None:
    spec = Lowering(compile=1, kernel="gemm", start_ns=T1)
    summary = PassTiming(_tree(spec.messages())).summary(spec.end_ns())
    simplify = summary.by_name["tl.Simplify"]
    assert simplify.count == 7
    assert simplify.max_ns == 6_368_000  # the longest of its runs in the table, in microseconds there
    lower = summary.by_name["tl.LowerTileOp"]
    assert lower.total_ns == 85_066_000 and lower.self_ns < lower.total_ns  # tl.LetInline, tl.Simplify run inside
