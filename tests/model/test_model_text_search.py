"""Finding a term in IR text: every occurrence, as str.count counts them, in order, wrapping."""

from __future__ import annotations

from iket_tui.model.text_search import TextMatches

IR = """\
# from tvm.script import tirx as T
    for ko in range(32):
        T.tma_copy(A, A_shared)   # tma
        T.tma_copy(B, B_shared)
    T.gemm(A_shared, B_shared, C_local)
"""


def test_a_term_with_a_capital_counts_as_str_count_does() -> None:
    lines = IR.splitlines()
    for term in ("A_shared", "T.tma_copy", "B", "T."):
        matches = TextMatches(lines, term)
        assert len(matches) == IR.count(term)
        assert all(lines[matches.line_of(i)][slice(*matches.span_of(i))] == term for i in range(len(matches)))


def test_a_term_in_lower_case_ignores_case() -> None:
    matches = TextMatches(IR.splitlines(), "tma")
    assert len(matches) == IR.lower().count("tma") == 3
    assert [matches.line_of(i) for i in range(len(matches))] == [2, 2, 3]
    assert list(matches.on_line(2)) == [0, 1] and list(matches.on_line(4)) == []


def test_occurrences_do_not_overlap() -> None:
    assert len(TextMatches(["aaaa"], "aa")) == "aaaa".count("aa") == 2


def test_outside_ascii_the_case_is_still_ignored() -> None:
    matches = TextMatches(["Straße STRASSE straße"], "straße")
    assert [matches.span_of(i) for i in range(len(matches))] == [(0, 6), (15, 21)]


def test_next_and_previous_wrap_and_the_first_is_from_a_line_on() -> None:
    matches = TextMatches(IR.splitlines(), "A_shared")  # lines 2 and 4
    assert matches.first_from(0) == 0
    assert matches.first_from(3) == 1
    assert matches.first_from(5) == 0  # past the last: back to the first
    assert matches.after(0) == 1 and matches.after(1) == 0
    assert matches.before(0) == 1 and matches.before(1) == 0


def test_nothing_found() -> None:
    matches = TextMatches(IR.splitlines(), "NoSuchName")
    assert len(matches) == 0
    assert matches.first_from(0) is None and matches.after(0) is None and matches.before(0) is None
    assert len(TextMatches(IR.splitlines(), "")) == 0
