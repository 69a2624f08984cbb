"""Which pass a failed compile is blamed on when the client's ``--passes``/``--depth`` filter left
the failing pass out.

The streams are those the agent sends for a real TileLang lowering that fails in a pass
(:class:`~iket_tui.model.synthetic.Lowering`), with the ``compile_failure`` the agent sends just
before the ``compile_end``, passed through the agent's own :class:`PassFilter` as a filtered
client receives them. The failure names its pass even when the filter left that pass out
(docs/protocol.md, "Filters"): the kept passes around it are left incomplete, not failed.
"""

from __future__ import annotations

import pytest

from iket_tui.agent.pass_filter import PassChoice, PassFilter
from iket_tui.model.nodes import DONE, FAILED, INCOMPLETE, CompileNode
from iket_tui.model.pass_tree import left_out_failure
from iket_tui.model.session import Session
from iket_tui.model.synthetic import LAYOUT_CONFLICT, NVCC_REJECTED, Lowering
from iket_tui.protocol import messages as m

MS = 1_000_000


def failed_in(fail_in: str) -> tuple[list[m.Message], tuple[str, int]]:
    """A lowering failing in the pass ``fail_in``, with the agent's ``compile_failure`` naming it
    just before the ``compile_end``; and the failing pass's name and ``seq``."""
    stream = Lowering(compile=7, kernel="gemm", start_ns=0, fail_in=fail_in).messages()
    start = [msg for msg in stream if msg["type"] == m.PASS_START][-1]
    assert start["name"] == fail_in  # nothing started after the failing pass
    failure = m.compile_failure(
        compile=7,
        stage="pass",
        seq=start["seq"],
        name=fail_in,
        error=LAYOUT_CONFLICT,
        error_type="tvm.error.InternalError",
        t_ns=stream[-1]["t_ns"] - 1,
        ir_script="# from tvm.script import ir as I",
    )
    return [*stream[:-1], failure, stream[-1]], (fail_in, start["seq"])


def filtered(stream: list[m.Message], choice: PassChoice) -> list[m.Message]:
    """What a client with the filter ``choice`` is sent of ``stream``."""
    kept = PassFilter(choice).apply(stream)
    assert len(kept) < len(stream)
    return [item for item in kept if isinstance(item, dict)]


def applied(stream: list[m.Message]) -> CompileNode:
    session = Session()
    session.apply(stream)
    assert session.counters.malformed == 0
    [comp] = session.tree.compiles
    return comp


@pytest.mark.parametrize(
    "choice",
    [PassChoice(depth=0), PassChoice(globs=("tl.LowerTileOp", "tl.Simplify"))],
    ids=["depth 0", "names"],
)
def test_a_failure_in_a_pass_left_out_leaves_the_kept_pass_around_it_incomplete(choice: PassChoice) -> None:
    stream, (name, seq) = failed_in("tl.LetInline")  # nested in tl.LowerTileOp
    comp = applied(filtered(stream, choice))

    assert comp.status is FAILED and comp.error == LAYOUT_CONFLICT
    [ctx] = comp.context_order
    assert all(node.name != name for node in ctx.passes.values())
    lower = next(node for node in ctx.passes.values() if node.name == "tl.LowerTileOp")
    assert lower.status is INCOMPLETE, "the kept pass around the failing one did not fail itself"
    assert comp.failing is None
    assert [node.name for node in ctx.passes.values() if node.status is FAILED] == []
    assert left_out_failure(comp) == (name, seq)


def test_a_failure_with_no_kept_pass_around_it_is_still_named() -> None:
    stream, (name, seq) = failed_in("tl.LayoutInference")  # top level
    comp = applied(filtered(stream, PassChoice(globs=("tirx.*",))))

    assert comp.failing is None and comp.incomplete == []
    assert all(node.status is DONE for ctx in comp.context_order for node in ctx.passes.values())
    assert left_out_failure(comp) == (name, seq)


def test_a_failing_pass_the_filter_kept_is_the_one_blamed() -> None:
    stream, (name, seq) = failed_in("tl.LetInline")
    comp = applied(filtered(stream, PassChoice(globs=("tl.L*",))))  # tl.LowerTileOp and tl.LetInline

    assert comp.failing is not None and (comp.failing.name, comp.failing.seq) == (name, seq)
    assert comp.failing.status is FAILED and comp.failing.error == LAYOUT_CONFLICT
    assert comp.failing.parent is not None and comp.failing.parent.status is INCOMPLETE
    assert left_out_failure(comp) is None


def test_without_a_filter_the_named_pass_is_blamed_and_nothing_is_left_out() -> None:
    stream, (name, seq) = failed_in("tl.LetInline")
    comp = applied(stream)

    assert comp.failing is not None and (comp.failing.name, comp.failing.seq, comp.failing.status) == (
        name,
        seq,
        FAILED,
    )
    assert left_out_failure(comp) is None


def test_a_codegen_failure_names_no_pass_left_out() -> None:
    comp = applied(
        Lowering(compile=2, kernel="k", start_ns=0, codegen_ns=300 * MS, codegen_error=NVCC_REJECTED).messages()
    )
    assert comp.failed_codegen is not None and comp.failing is None
    assert left_out_failure(comp) is None
