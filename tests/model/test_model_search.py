"""Finding passes by name as the tree grows."""

from __future__ import annotations

from iket_tui.model.pass_search import PassSearch
from iket_tui.model.session import Session
from iket_tui.model.synthetic import GEMM_LOWERING, Lowering


def test_matches_are_in_tree_order_and_next_previous_wrap() -> None:
    session = Session()
    tree = session.tree
    session.apply(Lowering(compile=1, kernel="a", start_ns=0).messages())
    search = PassSearch(tree)
    search.set_term("layoutinf")

    [only] = search.matches
    assert only.name == "tl.LayoutInference"
    search.set_term("SIMPLIFY")
    simplifies = search.matches
    assert [node.name for node in simplifies] == [name for name, *_ in GEMM_LOWERING if "simplify" in name.lower()]
    assert {node.name for node in simplifies} == {"tl.Simplify", "tirx.Simplify"}
    assert search.first_from(0) is simplifies[0]
    assert search.next_after(simplifies[0].order) is simplifies[1]
    assert search.next_after(simplifies[-1].order) is simplifies[0]
    assert search.previous_before(simplifies[0].order) is simplifies[-1]
    assert search.position(simplifies[2]) == 3


def test_passes_arriving_later_are_found_too() -> None:
    session = Session()
    tree = session.tree
    first = Lowering(compile=1, kernel="a", start_ns=0)
    session.apply(first.messages())
    search = PassSearch(tree)
    search.set_term("tl.LayoutInference")
    assert len(search.matches) == 1
    session.apply(Lowering(compile=2, kernel="b", start_ns=first.end_ns() + 1).messages())

    assert [node.compile.id for node in search.matches] == [1, 2]
    search.set_term("no such pass")
    assert search.matches == [] and search.first_from(0) is None
