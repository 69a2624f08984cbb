"""Which rows a tree view shows, as compiles arrive and the user expands and collapses."""

from __future__ import annotations

from iket_tui.model.nodes import CodegenNode, CompileNode, ContextNode, Node, PassNode, ProcessNode
from iket_tui.model.pass_tree import PassTree
from iket_tui.model.session import Session
from iket_tui.model.synthetic import GEMM_LOWERING, Lowering, agent_hello, lowerings
from iket_tui.model.visible_rows import VisibleRows

PASSES = len(GEMM_LOWERING)


def shown(rows: VisibleRows) -> list[str]:
    """Each row as indentation and a short name, like a user reads the tree."""
    out = []
    for index in range(len(rows)):
        row = rows.row(index)
        assert row is not None
        out.append("  " * row.level + label(row.node))
    return out


def label(node: Node) -> str:
    if isinstance(node, PassNode):
        return node.name
    if isinstance(node, CompileNode):
        return f"compile {node.kernel}"
    if isinstance(node, ContextNode):
        return f"context {node.id}"
    if isinstance(node, ProcessNode):
        return f"pid {node.pid}"
    assert isinstance(node, CodegenNode)
    return node.title


def loaded(count: int = 3) -> tuple[PassTree, VisibleRows]:
    session = Session()
    tree = session.tree
    session.apply([agent_hello(pid=9)])
    for spec in lowerings(count, fail=()):
        session.apply(spec.messages())
    rows = VisibleRows(tree)
    rows.refresh()
    return tree, rows


def test_new_compiles_are_collapsed_under_the_process() -> None:
    _, rows = loaded(3)

    assert shown(rows) == ["pid 9", "  compile gemm_128x128", "  compile gemm_64x256", "  compile gemm_splitk"]


def test_expanding_a_compile_shows_its_context_nested_passes_and_codegen_steps() -> None:
    tree, rows = loaded(2)
    rows.set_expanded(tree.compiles[0], True)
    assert rows.refresh()

    lines = shown(rows)
    assert lines[:4] == ["pid 9", "  compile gemm_128x128", "    context 1", "      pass_fn"]
    assert "      tl.LowerTileOp" in lines
    at = lines.index("      tl.LowerTileOp")
    assert lines[at + 1 : at + 3] == ["        tl.LetInline", "        tl.Simplify"]
    after_passes = 2 + 1 + PASSES
    assert lines[after_passes : after_passes + 3] == [
        "    codegen tilelang_cuda",
        "    codegen tilelang_c_host",
        "  compile gemm_64x256",
    ]
    assert len(rows) == 1 + 1 + 1 + PASSES + 2 + 1


def test_collapsing_a_pass_hides_its_children_only() -> None:
    tree, rows = loaded(1)
    rows.set_expanded(tree.compiles[0], True)
    rows.refresh()
    before = len(rows)
    lower = next(node for node in tree.passes if node.name == "tl.LowerTileOp")
    rows.toggle(lower)
    rows.refresh()

    assert len(rows) == before - 2
    assert rows.index_of(lower.children[0]) is None
    assert rows.nearest_shown(lower.children[0]) is lower


def test_following_a_compile_expands_it_and_collapses_the_one_followed_before() -> None:
    tree, rows = loaded(3)
    first, second, _ = tree.compiles
    rows.follow(first)
    rows.refresh()
    assert rows.is_expanded(first)
    rows.follow(second)
    rows.refresh()

    assert not rows.is_expanded(first)
    assert rows.is_expanded(second)
    assert rows.index_of(tree.compiles[1].context_order[0]) == 3


def test_a_compile_the_user_expanded_stays_expanded_when_follow_moves_on() -> None:
    tree, rows = loaded(3)
    first, second, third = tree.compiles
    rows.set_expanded(first, True)
    rows.follow(first)
    rows.follow(second)
    rows.refresh()

    assert rows.is_expanded(first) and rows.is_expanded(second) and not rows.is_expanded(third)


def test_revealing_a_failing_pass_expands_the_path_to_it() -> None:
    session = Session()
    tree = session.tree
    session.apply(Lowering(compile=1, kernel="bad", start_ns=0, fail_in="tl.LetInline").messages())
    rows = VisibleRows(tree)
    rows.refresh()
    failing = tree.compiles[0].failing
    assert failing is not None
    rows.set_expanded(failing.compile, False)
    rows.reveal(failing)
    rows.refresh()

    line = rows.index_of(failing)
    assert line is not None
    assert shown(rows)[line - 1 : line + 1] == ["      tl.LowerTileOp", "        tl.LetInline"]


def test_passes_arriving_in_a_collapsed_compile_do_not_change_the_rows() -> None:
    session = Session()
    tree = session.tree
    spec = Lowering(compile=1, kernel="k", start_ns=0)
    messages = spec.messages()
    session.apply(messages[:10])
    rows = VisibleRows(tree)
    rows.refresh()
    version = rows.version
    session.apply(messages[10:40])

    assert not rows.refresh()
    assert rows.version == version
    rows.follow(tree.compiles[0])
    assert rows.refresh()
    before = len(rows)
    session.apply(messages[40:42])  # one more pass starts and ends
    assert rows.refresh()
    assert len(rows) == before + 1


def test_expand_all_and_collapse_all() -> None:
    _, rows = loaded(3)
    rows.expand_all()
    rows.refresh()
    assert len(rows) == 1 + 3 * (1 + 1 + PASSES + 2)
    rows.collapse_all()
    rows.refresh()
    assert len(rows) == 4
    assert rows.row(4) is None and rows.row(-1) is None


def test_collapsing_the_process_leaves_one_row() -> None:
    tree, rows = loaded(2)
    rows.set_expanded(tree.process, False)
    rows.refresh()

    assert shown(rows) == ["pid 9"]
    assert rows.index_of(tree.compiles[0]) is None
