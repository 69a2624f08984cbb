"""The pass tree built from message sequences: structure, durations, statuses, counters."""

from __future__ import annotations

from iket_tui.model import timing
from iket_tui.model.nodes import DONE, FAILED, INCOMPLETE, MISMATCH, RUNNING, PassNode
from iket_tui.model.session import Session
from iket_tui.model.synthetic import GEMM_LOWERING, LAYOUT_CONFLICT, NVCC_REJECTED, Lowering, agent_hello
from iket_tui.protocol import messages as m

MS = 1_000_000


def names(nodes: list[PassNode]) -> list[str]:
    return [node.name for node in nodes]


def small_compile(*, compile: int = 1, t0: int = 1000 * MS) -> list[m.Message]:
    """A hand-written compile: pass A (with child B) then pass C."""
    common = {"compile": compile, "context": 1}
    return [
        m.compile_begin(compile=compile, label="stage=jit-lower, kernel=add", kernel="add", target="cuda", t_ns=t0),
        m.pass_context(m.PASS_CONTEXT_ENTER, **common, t_ns=t0 + 1 * MS),
        m.pass_start(
            **common, name="tl.LowerTileOp", seq=0, depth=0, parent=None, phase="pipeline_cuda", t_ns=t0 + 2 * MS
        ),
        m.pass_start(**common, name="tl.Simplify", seq=1, depth=1, parent=0, phase="pipeline_cuda", t_ns=t0 + 3 * MS),
        m.pass_end(
            **common,
            name="tl.Simplify",
            seq=1,
            depth=1,
            parent=0,
            phase="pipeline_cuda",
            t_ns=t0 + 7 * MS,
            duration_ns=4 * MS,
        ),
        m.pass_end(
            **common,
            name="tl.LowerTileOp",
            seq=0,
            depth=0,
            parent=None,
            phase="pipeline_cuda",
            t_ns=t0 + 12 * MS,
            duration_ns=10 * MS,
        ),
        m.pass_start(**common, name="tirx.Filter", seq=2, depth=0, parent=None, phase=None, t_ns=t0 + 13 * MS),
        m.pass_end(
            **common,
            name="tirx.Filter",
            seq=2,
            depth=0,
            parent=None,
            phase=None,
            t_ns=t0 + 15 * MS,
            duration_ns=2 * MS,
        ),
        m.pass_context(m.PASS_CONTEXT_EXIT, **common, t_ns=t0 + 16 * MS),
        m.compile_end(
            compile=compile, label="stage=jit-lower, kernel=add", t_ns=t0 + 20 * MS, duration_ns=20 * MS, ok=True
        ),
    ]


def test_a_small_compile_has_the_expected_tree_durations_and_statuses() -> None:
    session = Session()
    tree = session.tree
    session.apply(small_compile())

    [comp] = tree.compiles
    assert (comp.kernel, comp.label, comp.target, comp.status) == ("add", "stage=jit-lower, kernel=add", "cuda", DONE)
    [ctx] = comp.context_order
    assert names(ctx.roots) == ["tl.LowerTileOp", "tirx.Filter"]
    lower, filter_ = ctx.roots
    assert names(lower.children) == ["tl.Simplify"]
    assert [node.status for node in (lower, lower.children[0], filter_)] == [DONE, DONE, DONE]
    now = 10**12  # anything later: finished nodes do not depend on the clock
    assert timing.inclusive_ns(lower, now) == 10 * MS
    assert timing.self_ns(lower, now) == 6 * MS
    assert timing.self_ns(lower.children[0], now) == 4 * MS
    assert timing.inclusive_ns(ctx, now) == 15 * MS
    assert timing.self_ns(ctx, now) == 3 * MS
    assert timing.inclusive_ns(comp, now) == 20 * MS
    assert timing.self_ns(comp, now) == 8 * MS
    assert session.counters.events == 10


def test_a_real_gemm_lowering_shows_every_pass_in_order_with_its_nesting() -> None:
    session = Session()
    tree = session.tree
    session.apply(
        [agent_hello(pid=77, argv=["python", "gemm.py"]), *Lowering(compile=1, kernel="gemm", start_ns=0).messages()]
    )

    assert (tree.process.pid, tree.process.command) == (77, "python gemm.py")
    [comp] = tree.compiles
    [ctx] = comp.context_order
    assert [node.name for node in tree.passes] == [name for name, *_ in GEMM_LOWERING]
    assert names(ctx.roots) == [name for name, depth, *_ in GEMM_LOWERING if depth == 0]
    by_name = {node.name: node for node in ctx.roots}
    assert names(by_name["tl.LowerTileOp"].children) == ["tl.LetInline", "tl.Simplify"]
    assert names(by_name["s_tir.HoistIfThenElse"].children) == [
        "s_tir.InsertHoistIfThenElse",
        "tirx.Simplify",
        "tirx.RemoveNoOp",
    ]
    assert names(by_name["tl.SplitHostDevice"].children) == ["tirx.ConvertSSA"]
    assert {node.phase for node in tree.passes} == {"pipeline_cuda", None}
    assert all(node.status is DONE for node in tree.passes)
    assert comp.status is DONE and tree.failed_compiles == 0


def test_a_compile_failing_in_a_pass_marks_that_pass_failed_with_the_compile_error() -> None:
    session = Session()
    tree = session.tree
    session.apply(Lowering(compile=3, kernel="add_transposed", start_ns=0, fail_in="tl.LayoutInference").messages())

    [comp] = tree.compiles
    assert comp.status is FAILED
    assert comp.stage == "pass"
    assert comp.error == LAYOUT_CONFLICT
    assert comp.traceback is not None and "LayoutInference" in comp.traceback
    assert comp.failing is not None and comp.failing.name == "tl.LayoutInference"
    assert comp.failing.status is FAILED
    assert comp.failing.error == LAYOUT_CONFLICT
    assert tree.passes[-1] is comp.failing  # nothing after the failing pass ran
    assert comp.context_order[0].status is FAILED
    assert tree.failed_compiles == 1


def test_a_failure_in_a_nested_pass_leaves_its_parent_incomplete() -> None:
    session = Session()
    tree = session.tree
    session.apply(Lowering(compile=1, kernel="k", start_ns=0, fail_in="tl.LetInline").messages())

    [comp] = tree.compiles
    assert comp.failing is not None and comp.failing.name == "tl.LetInline"
    parent = comp.failing.parent
    assert parent is not None and parent.name == "tl.LowerTileOp"
    assert (parent.status, comp.failing.status) == (INCOMPLETE, FAILED)
    assert parent.duration_ns is not None and parent.duration_ns >= comp.failing.duration_ns  # type: ignore[operator]


def test_a_codegen_failure_is_reported_on_codegen_not_on_a_pass() -> None:
    session = Session()
    tree = session.tree
    spec = Lowering(compile=1, kernel="k", start_ns=0, codegen_ns=300 * MS, codegen_error=NVCC_REJECTED)
    session.apply(spec.messages())

    [comp] = tree.compiles
    assert (comp.status, comp.stage, comp.failing) == (FAILED, "codegen", None)
    [nvcc] = comp.codegen_steps  # the host build never ran
    assert (nvcc.title, nvcc.status, nvcc.error, nvcc.duration_ns) == (
        "codegen tilelang_cuda",
        FAILED,
        NVCC_REJECTED,
        300 * MS,
    )
    assert comp.failed_codegen is nvcc
    assert all(node.status is DONE for node in tree.passes)


def codegen_compile(*, named: bool = True, t0: int = 1000 * MS) -> list[m.Message]:
    """A compile as ``tilelang.compile`` reports it: one pass, then the device build (nvcc,
    2.9 s) and the host build (1 ms). Without ``named``, as agents that did not name steps."""
    cuda = "target.build.tilelang_cuda" if named else None
    host = "target.build.tilelang_c_host" if named else None
    name, phase = "tl.Simplify", "pipeline_cuda"
    return [
        m.compile_begin(compile=1, label="kernel=vector_add", kernel="vector_add", target="cuda", t_ns=t0),
        m.pass_context(m.PASS_CONTEXT_ENTER, compile=1, context=0, t_ns=t0 + 1 * MS),
        m.pass_start(compile=1, context=0, name=name, seq=0, depth=0, parent=None, phase=phase, t_ns=t0 + 2 * MS),
        m.pass_end(
            compile=1,
            context=0,
            name=name,
            seq=0,
            depth=0,
            parent=None,
            phase=phase,
            t_ns=t0 + 12 * MS,
            duration_ns=10 * MS,
        ),
        m.pass_context(m.PASS_CONTEXT_EXIT, compile=1, context=0, t_ns=t0 + 13 * MS),
        m.codegen_begin(compile=1, t_ns=t0 + 100 * MS, name=cuda),
        m.codegen_end(compile=1, t_ns=t0 + 3000 * MS, duration_ns=2900 * MS, ok=True, name=cuda),
        m.codegen_begin(compile=1, t_ns=t0 + 3003 * MS, name=host),
        m.codegen_end(compile=1, t_ns=t0 + 3004 * MS, duration_ns=1 * MS, ok=True, name=host),
        m.compile_end(compile=1, label="kernel=vector_add", t_ns=t0 + 3010 * MS, duration_ns=3010 * MS, ok=True),
    ]


def test_every_codegen_step_of_a_compile_is_kept_with_its_own_time() -> None:
    session = Session()
    tree = session.tree
    session.apply(codegen_compile())

    [comp] = tree.compiles
    steps = comp.codegen_steps
    assert [step.title for step in steps] == ["codegen tilelang_cuda", "codegen tilelang_c_host"]
    assert [step.name for step in steps] == ["target.build.tilelang_cuda", "target.build.tilelang_c_host"]
    assert [step.status for step in steps] == [DONE, DONE]
    assert [step.duration_ns for step in steps] == [2900 * MS, 1 * MS]
    now = 10**12
    assert timing.inclusive_ns(comp, now) == 3010 * MS
    assert timing.codegen_ns(comp, now) == 2901 * MS
    assert timing.self_ns(comp, now) == 99 * MS  # 3010 ms less 10 ms of passes and 2901 ms of codegen


def test_codegen_steps_from_an_agent_that_did_not_name_them_are_kept_apart() -> None:
    session = Session()
    tree = session.tree
    session.apply(codegen_compile(named=False))

    [comp] = tree.compiles
    assert [step.title for step in comp.codegen_steps] == ["codegen", "codegen"]
    assert [step.duration_ns for step in comp.codegen_steps] == [2900 * MS, 1 * MS]
    assert timing.self_ns(comp, 10**12) == 99 * MS


def test_a_running_codegen_step_ticks_with_the_clock() -> None:
    session = Session()
    tree = session.tree
    messages = codegen_compile()
    session.apply(messages[:6])  # nvcc started at +100 ms
    [comp] = tree.compiles
    [nvcc] = comp.codegen_steps
    now = 1000 * MS + 1600 * MS

    assert nvcc.status is RUNNING
    assert timing.inclusive_ns(nvcc, now) == 1500 * MS
    assert timing.self_ns(comp, now) == 90 * MS  # 1600 ms less 10 ms of passes and 1500 ms in nvcc
    session.end_stream("the target exited")
    assert (nvcc.status, nvcc.duration_ns) == (INCOMPLETE, 0)  # ended at the last time seen, its start


def test_a_codegen_end_closes_the_open_step_of_its_name() -> None:
    session = Session()
    tree = session.tree
    t0 = 1000 * MS
    session.apply(
        [
            m.compile_begin(compile=1, label="kernel=k", kernel="k", target="cuda", t_ns=t0),
            m.codegen_begin(compile=1, t_ns=t0 + 10 * MS, name="target.build.outer"),
            m.codegen_begin(compile=1, t_ns=t0 + 20 * MS, name="target.build.inner"),
            m.codegen_end(compile=1, t_ns=t0 + 50 * MS, duration_ns=40 * MS, ok=True, name="target.build.outer"),
            m.codegen_end(compile=1, t_ns=t0 + 60 * MS, duration_ns=40 * MS, ok=True),  # unnamed: the open one
            m.codegen_end(compile=1, t_ns=t0 + 70 * MS, duration_ns=5 * MS, ok=True, name="target.build.lost"),
        ]
    )

    outer, inner, lost = tree.compiles[0].codegen_steps
    assert (outer.title, outer.end_ns, outer.duration_ns) == ("codegen outer", t0 + 50 * MS, 40 * MS)
    assert (inner.title, inner.end_ns, inner.duration_ns) == ("codegen inner", t0 + 60 * MS, 40 * MS)
    assert (lost.title, lost.begin_ns, lost.status) == ("codegen lost", t0 + 65 * MS, DONE)  # its begin never came
    assert timing.codegen_ns(tree.compiles[0], 10**12) == 50 * MS + 5 * MS  # inner ran inside outer


def test_codegen_messages_seen_twice_in_a_catch_up_change_nothing() -> None:
    session = Session()
    tree = session.tree
    messages = codegen_compile()
    session.apply(messages[:7])
    session.apply(messages)

    [comp] = tree.compiles
    assert [step.title for step in comp.codegen_steps] == ["codegen tilelang_cuda", "codegen tilelang_c_host"]
    assert timing.self_ns(comp, 10**12) == 99 * MS


def test_a_compile_that_fails_while_codegen_runs_marks_that_step_failed() -> None:
    session = Session()
    tree = session.tree
    t0 = 1000 * MS
    session.apply(
        [
            *codegen_compile(named=False)[:6],
            m.compile_end(
                compile=1,
                label="kernel=vector_add",
                t_ns=t0 + 900 * MS,
                duration_ns=900 * MS,
                ok=False,
                error=NVCC_REJECTED,
                stage="codegen",
            ),
        ]
    )

    [comp] = tree.compiles
    [step] = comp.codegen_steps
    assert (step.status, step.error, step.duration_ns) == (FAILED, NVCC_REJECTED, 800 * MS)
    assert comp.failed_codegen is step and comp.failing is None


def test_running_passes_are_timed_against_the_given_clock() -> None:
    session = Session()
    tree = session.tree
    session.apply(small_compile()[:4])  # LowerTileOp running, its child Simplify running
    lower = tree.passes[0]
    simplify = tree.passes[1]
    t0 = 1000 * MS

    assert [node.status for node in tree.running_passes()] == [RUNNING, RUNNING]
    assert timing.inclusive_ns(lower, t0 + 52 * MS) == 50 * MS
    assert timing.inclusive_ns(simplify, t0 + 52 * MS) == 49 * MS
    assert timing.self_ns(lower, t0 + 52 * MS) == 1 * MS
    assert timing.inclusive_ns(tree.compiles[0], t0 + 52 * MS) == 52 * MS


def _history(session: Session, count: int) -> int:
    """``count`` finished GEMM lowerings; returns when the last one ended."""
    t = 0
    for index in range(count):
        spec = Lowering(compile=index + 1, kernel="gemm", start_ns=t)
        session.apply(spec.messages())
        t = spec.end_ns() + MS
    return t


def test_a_pass_far_beyond_its_usual_time_and_the_threshold_is_stuck() -> None:
    session = Session(stuck_after_ns=10_000 * MS)
    tree = session.tree
    t = _history(session, 3)
    slow = Lowering(compile=9, kernel="gemm", start_ns=t, slow={"tl.LayoutInference": 600_000 * MS})
    started = next(msg["t_ns"] for msg in slow.messages() if msg.get("name") == "tl.LayoutInference")
    session.apply(slow.messages(until_ns=started))
    layout = tree.passes[-1]
    assert layout.name == "tl.LayoutInference" and layout.status is RUNNING

    assert not tree.is_stuck(layout, started + 5_000 * MS)  # far above usual, below the threshold
    assert tree.is_stuck(layout, started + 20_000 * MS)
    assert tree.stuck_passes(started + 20_000 * MS) == [layout]


def test_a_pass_over_the_threshold_but_within_ten_times_its_usual_is_not_stuck() -> None:
    session = Session(stuck_after_ns=1_000 * MS)
    tree = session.tree
    t = _history(session, 2)
    usual = tree.typical.median("tl.LayoutInference")
    assert usual is not None and 20 * MS < usual < 40 * MS
    slow = Lowering(compile=9, kernel="gemm", start_ns=t, slow={"tl.LayoutInference": 600_000 * MS})
    started = next(msg["t_ns"] for msg in slow.messages() if msg.get("name") == "tl.LayoutInference")
    session.apply(slow.messages(until_ns=started))
    layout = tree.passes[-1]
    tree.stuck_factor = 100.0  # usual about 30 ms: 100x is about 3 s

    assert not tree.is_stuck(layout, started + 1_500 * MS)
    assert tree.is_stuck(layout, started + 4_000 * MS)


def test_without_history_the_threshold_alone_decides() -> None:
    session = Session(stuck_after_ns=30_000 * MS)
    tree = session.tree
    session.apply(small_compile()[:3])
    lower = tree.passes[0]

    assert not tree.is_stuck(lower, lower.start_ns + 29_000 * MS)
    assert tree.is_stuck(lower, lower.start_ns + 31_000 * MS)


def test_an_out_of_order_end_callback_marks_the_innermost_pass_mismatched() -> None:
    session = Session()
    tree = session.tree
    head = small_compile()[:4]
    session.apply(head)
    common = {"compile": 1, "context": 1, "t_ns": 1010 * MS}
    session.apply(
        [
            m.callback_mismatch(**common, expected="tl.Simplify", got="tl.LowerTileOp"),
            m.pass_incomplete(
                compile=1,
                context=1,
                name="tl.LowerTileOp",
                seq=0,
                depth=0,
                parent=None,
                phase="pipeline_cuda",
                t_ns=1011 * MS,
                error="RuntimeError: unmatched after-pass callback",
            ),
            m.pass_incomplete(
                compile=1,
                context=1,
                name="tl.Simplify",
                seq=1,
                depth=1,
                parent=0,
                phase="pipeline_cuda",
                t_ns=1011 * MS,
                error="RuntimeError: unmatched after-pass callback",
            ),
        ]
    )

    lower, simplify = tree.passes
    assert (lower.status, simplify.status) == (INCOMPLETE, MISMATCH)
    assert simplify.error is not None and "'tl.LowerTileOp' ended while 'tl.Simplify'" in simplify.error
    assert tree.compiles[0].mismatches == 1


def test_malformed_and_unknown_messages_are_counted_and_change_nothing() -> None:
    session = Session()
    tree = session.tree
    good = small_compile()
    start = good[2]
    bad: list[object] = [
        ["not", "a", "map"],
        42,
        {"no": "type"},
        {"type": 7},
        {**start, "seq": "0"},
        {**start, "name": None},
        {k: v for k, v in start.items() if k != "t_ns"},
        {**start, "parent": "zero"},
        {**good[0], "label": 3},
        {**good[-1], "ok": "yes"},
        {"type": m.HEARTBEAT, "t_ns": 5, "dropped": 0},
        {"type": m.PASS_END, "compile": 1, "context": 1, "seq": 0, "t_ns": 9},
    ]
    session.apply(bad)
    session.apply([{"type": "frobnicate", "t_ns": 1}])

    assert session.counters.malformed == len(bad)
    assert session.counters.unknown == 1
    assert tree.compiles == [] and tree.passes == []
    assert session.counters.events == 0


def test_loss_counters_come_from_heartbeats_drop_reports_and_sync() -> None:
    session = Session()
    session.apply(
        [
            agent_hello(),
            m.sync(t_ns=1, backlog=900, backlog_lost=40),
            m.heartbeat(t_ns=2, produced=1000, dropped=5, open_passes=1),
            m.dropped(t_ns=3, count=7, total=12),
            m.checkpoint(messages=50, dropped=7, t_ns=4),
            *small_compile(),
        ]
    )

    counters = session.counters
    assert (counters.dropped, counters.backlog_lost, counters.produced, counters.heartbeats) == (12, 40, 1000, 1)
    assert counters.events == len(small_compile())


def test_a_late_client_sees_passes_whose_start_it_missed() -> None:
    session = Session()
    tree = session.tree
    messages = small_compile()
    session.apply([messages[4], messages[5]])  # only the two pass_end messages

    assert names(tree.passes) == ["tl.Simplify", "tl.LowerTileOp"]
    simplify, lower = tree.passes
    assert (simplify.start_ns, simplify.duration_ns, simplify.status) == (1003 * MS, 4 * MS, DONE)
    assert lower.start_ns == 1002 * MS
    session.apply(messages)  # the full stream again: duplicates change nothing
    assert len(tree.passes) == 3


def test_when_the_stream_ends_whatever_is_open_becomes_incomplete() -> None:
    session = Session()
    tree = session.tree
    session.apply(small_compile()[:4])
    session.end_stream("the target exited")

    lower, simplify = tree.passes
    assert (lower.status, simplify.status, tree.compiles[0].status) == (INCOMPLETE, INCOMPLETE, INCOMPLETE)
    assert simplify.error == "never finished: the target exited"
    assert simplify.duration_ns == 0  # ended at the last time seen, which is its start
    assert tree.running_passes() == []


def test_a_pass_event_changes_only_its_own_compiles_version() -> None:
    session = Session()
    tree = session.tree
    session.apply(small_compile(compile=1) + small_compile(compile=2, t0=2000 * MS)[:3])
    first, second = tree.compiles
    before = (first.version, first.shape, second.version, second.shape)
    session.apply(small_compile(compile=2, t0=2000 * MS)[3:4])

    assert (first.version, first.shape) == before[:2]
    assert second.shape == before[3] + 1
