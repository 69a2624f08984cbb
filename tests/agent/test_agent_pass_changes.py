"""Which passes of a real TileLang lowering changed the module: known where asked
(``IKET_TUI_PASS_CHANGES=1``) while a client is attached (each ``pass_end`` says ``changed``), not
computed at all while none is, nor by default."""

from __future__ import annotations

from typing import Any

import pytest

from iket_tui.agent import pass_notes
from iket_tui.agent.registry import Registry
from iket_tui.model.session import Session
from iket_tui.protocol import messages as m

pytestmark = pytest.mark.tilelang
tilelang = pytest.importorskip("tilelang")

import tvm  # noqa: E402

from iket_tui.agent import tilelang_tool  # noqa: E402
from iket_tui.demo import kernels  # noqa: E402

OWN_PASS = "iket_test.Annotate"
WRAPPED = "tl.InjectAssumes"  # changes nothing in the demo GEMM (measured)


@pytest.fixture
def own_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """TileLang's ``tl.InjectAssumes`` run inside a pass of the test's own, which then changes
    the module (it adds an attribute)."""
    real = tilelang.transform.InjectAssumes

    def annotating(*args: Any, **kwargs: Any) -> Any:
        inner = real(*args, **kwargs)

        def run(mod: Any, _ctx: Any) -> Any:
            return inner(mod).with_attr("iket_test_annotated", True)

        return tvm.transform.module_pass(run, opt_level=0, name=OWN_PASS)

    monkeypatch.setattr(tilelang.transform, "InjectAssumes", annotating)


@pytest.fixture(autouse=True)
def asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(pass_notes.CHANGES_VARIABLE, "1")


@pytest.fixture
def comparisons(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Every structural comparison of two modules the agent makes, counted."""
    made: list[bool] = []
    real = pass_notes._structurally_equal

    def counted(before: Any, after: Any) -> bool:
        made.append(real(before, after))
        return made[-1]

    monkeypatch.setattr(pass_notes, "_structurally_equal", counted)
    return made


def _lower(registry: Registry) -> None:
    tilelang_tool.register(registry)
    try:
        kernels.lower("gemm")
    finally:
        tilelang_tool.unregister()


def _ends(sent: list[Any]) -> list[m.Message]:
    return [msg for msg in map(m.as_message, sent) if msg["type"] == m.PASS_END]


@pytest.mark.usefixtures("own_pass")
def test_with_a_client_each_pass_end_says_whether_the_pass_changed_the_module() -> None:
    registry = Registry()
    client, _ = registry.attach(limit=100_000)
    _lower(registry)
    ends = _ends(client.take(100_000))
    assert len(ends) > 50
    changed = {(end["name"], end["depth"]): end["changed"] for end in ends}
    assert changed[(OWN_PASS, 0)] is True
    assert changed[(WRAPPED, 1)] is False
    assert changed[("tl.LayoutInference", 0)] is True
    assert changed[("tl.VerifyBufferInit", 0)] is False
    assert all(type(end["changed"]) is bool for end in ends)
    unchanged = [end["name"] for end in ends if not end["changed"]]
    assert 10 < len(unchanged) < len(ends) - 10, unchanged


@pytest.mark.usefixtures("own_pass")
def test_the_model_marks_exactly_the_passes_that_changed_nothing() -> None:
    registry = Registry()
    client, _ = registry.attach(limit=100_000)
    _lower(registry)
    sent = [m.as_message(item) for item in client.take(100_000)]
    session = Session()
    session.apply(sent)
    said = {(end["seq"]): end["changed"] for end in _ends(sent)}
    passes = session.tree.passes
    assert len(passes) == len(said)
    assert {node.seq: node.changed for node in passes} == said
    marked = {(node.name, node.depth) for node in passes if node.changed is False}
    assert (WRAPPED, 1) in marked and (OWN_PASS, 0) not in marked


def test_without_a_client_nothing_is_compared_and_pass_ends_stay_rows(comparisons: list[bool]) -> None:
    registry = Registry()
    _lower(registry)
    _late, catch_up = registry.attach(limit=100_000)
    ends = [item for item in catch_up.messages if m.as_message(item)["type"] == m.PASS_END]
    assert comparisons == []
    assert ends and all(isinstance(end, tuple) for end in ends)
    assert all("changed" not in m.as_message(end) for end in ends)


def test_by_default_nothing_is_compared_and_pass_ends_stay_rows_with_a_client(
    comparisons: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(pass_notes.CHANGES_VARIABLE)
    registry = Registry()
    client, _ = registry.attach(limit=100_000)
    _lower(registry)
    ends = [item for item in client.take(100_000) if m.as_message(item)["type"] == m.PASS_END]
    assert comparisons == []
    assert len(ends) > 50 and all(isinstance(end, tuple) for end in ends)


def test_a_client_costs_at_most_one_comparison_per_pass(comparisons: list[bool]) -> None:
    registry = Registry()
    client, _ = registry.attach(limit=100_000)
    _lower(registry)
    ends = _ends(client.take(100_000))
    assert 0 < len(comparisons) <= len(ends)
    assert comparisons.count(True) == sum(1 for end in ends if not end["changed"]) - (len(ends) - len(comparisons))


def test_a_comparison_that_fails_leaves_every_pass_end_without_the_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(_before: Any, _after: Any) -> bool:
        raise ValueError("cannot compare these")

    monkeypatch.setattr(pass_notes, "_structurally_equal", refuse)
    registry = Registry()
    client, _ = registry.attach(limit=100_000)
    _lower(registry)
    sent = client.take(100_000)
    starts = [item for item in sent if m.as_message(item)["type"] == m.PASS_START]
    ends = _ends(sent)
    assert len(ends) == len(starts) > 50
    compared = [end for end in ends if "changed" in end]
    assert all(end["changed"] is False for end in compared)  # only passes that returned their module
    assert registry.observer_errors == len(ends) - len(compared) > 0


def test_a_value_other_than_1_or_0_is_said_once_and_checks_nothing(
    comparisons: list[bool], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(pass_notes.CHANGES_VARIABLE, "yes please")
    pass_notes.changes_asked.cache_clear()
    registry = Registry()
    _attached, _ = registry.attach(limit=100_000)  # a client: the IR is kept, where the check would run
    _lower(registry)
    _lower(registry)
    assert comparisons == []
    said = capsys.readouterr().err.splitlines()
    assert said == [
        "iket-tui agent: IKET_TUI_PASS_CHANGES must be 1 or 0, got 'yes please'; passes are not checked for changes"
    ]
