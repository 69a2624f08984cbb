"""The session's bound on passes: past it, the oldest finished compiles keep their row and a
summary and let their passes go; failed, stuck and running compiles keep theirs, and the
timing screen's per pass totals are those of a session that kept everything."""

from __future__ import annotations

from pathlib import Path

from iket_tui.model.nodes import DONE, FAILED, CompileNode
from iket_tui.model.pass_search import PassSearch
from iket_tui.model.pass_timing import PassTiming, TimingSummary
from iket_tui.model.session import Session
from iket_tui.model.synthetic import agent_hello, live_stream, lowerings
from iket_tui.protocol import messages as m
from iket_tui.sources.reading import read_recording

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"
PASSES_PER_COMPILE = 85  # a synthetic lowering's passes


def _passes(comp: CompileNode) -> int:
    return sum(len(ctx.passes) for ctx in comp.context_order)


def _stream(count: int, fail: tuple[int, ...]) -> list[list[m.Message]]:
    """A hello and ``count`` compiles, one batch each."""
    return [[agent_hello()], *(spec.messages() for spec in lowerings(count, fail=fail))]


def _timing_rows(summary: TimingSummary) -> dict[str, tuple[int, int, int, int, int, int]]:
    return {
        name: (s.count, s.total_ns, s.self_ns, s.max_ns, s.failed, s.incomplete) for name, s in summary.by_name.items()
    }


def _totals(summary: TimingSummary) -> tuple[int, int, int, int, int]:
    return summary.compiles, summary.runs, summary.compile_ns, summary.pass_ns, summary.codegen_ns


def test_passes_held_never_exceed_the_bound_and_the_oldest_finished_compiles_are_summarised() -> None:
    bound = 5 * PASSES_PER_COMPILE
    session = Session(max_passes=bound)
    for batch in _stream(40, fail=()):
        session.apply(batch)
        assert len(session.tree.passes) <= bound
    tree = session.tree
    summarised = [comp for comp in tree.compiles if comp.summary is not None]
    assert tree.summarised == len(summarised) > 30
    assert summarised == tree.compiles[: len(summarised)]  # the oldest ones
    assert all(_passes(comp) == 0 and comp.status is DONE for comp in summarised)
    assert all(comp.summary is not None and comp.summary.runs == PASSES_PER_COMPILE for comp in summarised)
    assert _passes(tree.compiles[-1]) == PASSES_PER_COMPILE  # the newest keeps its passes
    assert sum(_passes(comp) for comp in tree.compiles) == len(tree.passes)


def test_an_unbounded_session_keeps_every_pass() -> None:
    session = Session()
    for batch in _stream(40, fail=()):
        session.apply(batch)
    assert session.tree.summarised == 0
    assert len(session.tree.passes) == 40 * PASSES_PER_COMPILE


def test_failed_compiles_are_never_summarised_however_old() -> None:
    session = Session(max_passes=3 * PASSES_PER_COMPILE)
    for batch in _stream(30, fail=(0, 3, 17)):
        session.apply(batch)
    tree = session.tree
    failed = [comp for comp in tree.compiles if comp.status is FAILED]
    assert len(failed) == 3
    assert all(comp.summary is None and _passes(comp) > 0 for comp in failed)
    assert all(comp.failing is not None and comp.failing.name == "tl.LayoutInference" for comp in failed)
    assert tree.summarised > 20


def test_running_and_stuck_compiles_keep_their_passes() -> None:
    """The compile in the middle of a pass that has run 20 minutes keeps every pass, however
    small the bound; the finished ones before it are summarised."""
    session = Session(max_passes=10)
    session.apply(live_stream(compiles=6, fail=(), running_for_ns=1_200_000_000_000))
    tree = session.tree
    running = tree.compiles[-1]
    assert running.end_ns is None and running.summary is None
    assert tree.stuck_passes(session.last_t_ns)
    assert len(tree.passes) == _passes(running) > 10  # over the bound: nothing else can go
    assert tree.summarised == 5


def test_timing_totals_equal_those_of_a_session_that_kept_every_pass() -> None:
    batches = _stream(40, fail=(2, 25))
    bounded, kept = Session(max_passes=4 * PASSES_PER_COMPILE), Session()
    bounded_timing, kept_timing = PassTiming(bounded.tree), PassTiming(kept.tree)
    for index, batch in enumerate(batches):
        bounded.apply(batch)
        kept.apply(batch)
        if index % 7 == 0:  # the timing screen open now and then: some compiles timed before they are summarised
            bounded_timing.summary(bounded.last_t_ns)
    assert bounded.tree.summarised > 30
    now = kept.last_t_ns
    expected, got = kept_timing.summary(now), bounded_timing.summary(now)
    assert _timing_rows(got) == _timing_rows(expected)
    assert _totals(got) == _totals(expected)
    fresh = PassTiming(bounded.tree).summary(now)  # opened only after the passes went
    assert _timing_rows(fresh) == _timing_rows(expected)
    assert _totals(fresh) == _totals(expected)
    first = bounded.tree.compiles[0]
    assert first.summary is not None
    assert bounded_timing.compile_times(first, now) == kept_timing.compile_times(kept.tree.compiles[0], now)


def test_a_recording_replayed_past_the_bound_keeps_its_failures_and_timing() -> None:
    messages, _ = read_recording(EXAMPLE)
    kept = Session()
    kept.apply(messages)
    total = len(kept.tree.passes)
    bound = total // 3
    bounded = Session(max_passes=bound)
    for start in range(0, len(messages), 50):
        bounded.apply(messages[start : start + 50])
    bounded.end_stream("recording ended")
    kept.end_stream("recording ended")
    tree = bounded.tree
    assert tree.summarised > 0
    assert len(tree.passes) <= max(bound, sum(_passes(c) for c in tree.compiles if c.status is not DONE))
    assert [c.status for c in tree.compiles] == [c.status for c in kept.tree.compiles]
    assert [c.title for c in tree.compiles] == [c.title for c in kept.tree.compiles]
    for comp in tree.compiles:
        if comp.status is FAILED:
            assert comp.summary is None and _passes(comp) > 0
    now = kept.last_t_ns
    assert _timing_rows(PassTiming(tree).summary(now)) == _timing_rows(PassTiming(kept.tree).summary(now))


def test_search_forgets_the_passes_of_summarised_compiles_and_finds_the_new_ones() -> None:
    session = Session(max_passes=4 * PASSES_PER_COMPILE)
    search = PassSearch(session.tree)
    search.set_term("LayoutInference")
    batches = _stream(20, fail=())
    for batch in batches[:4]:
        session.apply(batch)
    assert len(search.matches) == 3
    for batch in batches[4:]:
        session.apply(batch)
        assert all(node.compile.summary is None for node in search.matches)
        kept = [node for node in session.tree.passes if node.name == "tl.LayoutInference"]
        assert search.matches == kept
    assert session.tree.summarised > 10
    assert search.matches[-1].compile is session.tree.compiles[-1]


def test_a_late_pass_of_a_summarised_compile_is_counted_not_kept() -> None:
    session = Session(max_passes=2 * PASSES_PER_COMPILE)
    for batch in _stream(6, fail=()):
        session.apply(batch)
    first = session.tree.compiles[0]
    assert first.summary is not None
    late = [
        m.pass_start(compile=1, context=1, name="tl.Late", seq=999, depth=0, parent=None, phase=None, t_ns=5),
        m.pass_end(
            compile=1, context=1, name="tl.Late", seq=999, depth=0, parent=None, phase=None, t_ns=9, duration_ns=4
        ),
    ]
    session.apply(late)
    assert session.tree.late_events >= 1
    assert _passes(first) == 0
    assert first.summary.runs == PASSES_PER_COMPILE
