"""Comparing compiles: which are matched, what is flagged slower, added, removed or moved."""

from __future__ import annotations

from typing import Any

from iket_tui.model import synthetic
from iket_tui.model.compare import CompileSummary, Shapes, compare, compare_pair, process_name, summarize
from iket_tui.model.session import Session


def _summaries(*lowerings: synthetic.Lowering, rank: int | None = None) -> list[CompileSummary]:
    """Real model compiles, from the messages the agent sends for ``lowerings``."""
    session = Session()
    session.apply([synthetic.agent_hello()])
    for lowering in lowerings:
        session.apply(lowering.messages())
    shapes: Shapes = {}
    return [summarize(comp, process_name(rank, 1), shapes) for comp in session.tree.compiles]


def _lowering(compile: int, kernel: str, **kwargs: Any) -> synthetic.Lowering:
    return synthetic.Lowering(compile=compile, kernel=kernel, start_ns=compile * 1_000_000_000, **kwargs)


def test_compiles_are_matched_by_kernel_in_order_and_the_rest_listed() -> None:
    a = _summaries(_lowering(1, "gemm"), _lowering(2, "gemm"), _lowering(3, "softmax"))
    b = _summaries(_lowering(1, "gemm"), _lowering(2, "softmax"), _lowering(3, "gemm"), _lowering(4, "gemm"))
    comparison = compare(a, b)
    assert [(p.a.compile, p.b.compile, p.a.kernel) for p in comparison.pairs] == [
        (1, 1, "gemm"),
        (2, 3, "gemm"),
        (3, 2, "softmax"),
    ]
    assert comparison.only_a == ()
    assert [(s.compile, s.kernel) for s in comparison.only_b] == [(4, "gemm")]
    assert comparison.flags() == ("unmatched",)


def test_other_ranks_are_not_matched() -> None:
    comparison = compare(_summaries(_lowering(1, "gemm"), rank=0), _summaries(_lowering(1, "gemm"), rank=1))
    assert comparison.pairs == ()
    assert [s.process for s in comparison.only_a + comparison.only_b] == ["rank 0", "rank 1"]


def test_a_pass_is_flagged_slower_from_twenty_percent_and_a_millisecond() -> None:
    base = 26_908_000  # tl.LayoutInference's own time in the synthetic lowering
    (a,) = _summaries(_lowering(1, "gemm"))
    for grown, flagged in ((base * 19 // 100, False), (base * 21 // 100, True)):
        (b,) = _summaries(_lowering(1, "gemm", slow={"tl.LayoutInference": base + grown}))
        pair = compare_pair(a, b)
        assert [c.name for c in pair.slower] == (["tl.LayoutInference"] if flagged else [])
        assert pair.passes[0].name == "tl.LayoutInference"
        assert pair.passes[0].change_ns == grown
    (b,) = _summaries(_lowering(1, "gemm", slow={"tl.LayoutInference": base * 3}))
    assert compare_pair(a, b, min_ns=base * 3).slower == ()
    assert compare_pair(a, b, slower_pct=300).slower == ()
    assert [c.name for c in compare_pair(a, b, slower_pct=199).slower] == ["tl.LayoutInference"]


def test_passes_added_removed_or_run_another_number_of_times() -> None:
    (a,) = _summaries(_lowering(1, "gemm"))
    (failed,) = _summaries(_lowering(1, "gemm", fail_in="tl.LayoutInference"))
    pair = compare_pair(failed, a)
    assert pair.failure == "fixed" and pair.removed == ()
    assert "tl.LowerTileOp" in pair.added  # it runs after the pass that failed
    assert "tl.Simplify" in pair.moved  # it runs before and after: more runs in the whole compile
    assert pair.slower == ()  # more runs took longer, which is no slowdown
    assert compare_pair(a, failed).failure == "new"
    assert compare_pair(a, failed).flags()[:1] == ("failed",)
