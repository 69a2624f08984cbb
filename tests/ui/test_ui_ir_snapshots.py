"""SVG snapshots of the IR screen over the real TVMScript of a real module: the demo GEMM,
lowered here for sm_90a, before and after ``tl.LowerTileOp`` (TileLang's lowering is the same
on every machine). The screen takes its answer from a target that answers as the agent does,
so the snapshots are exact; the live path is covered by tests/e2e/test_ir.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("tilelang")

from textual.app import App
from textual.pilot import Pilot
from ui_driving import wait_until
from ui_fakes import AnsweringTarget

from iket_tui.model.nodes import PassNode
from iket_tui.model.session import Session
from iket_tui.model.synthetic import lowerings
from iket_tui.protocol import messages as m
from iket_tui.ui.ir_screen import IRScreen

Compare = Callable[..., bool]
KERNEL = "gemm"
PASS = "tl.LowerTileOp"


@pytest.fixture(scope="module")
def answer() -> m.Message:
    return lowered_answer()


def lowered_answer() -> m.Message:
    """The agent's answer for the module around PASS, as TVM prints it, lowered here."""
    from iket_tui.demo import kernels

    texts = kernels.printed_around(KERNEL, PASS)
    node = _node()
    return m.response(
        id=0,
        what=m.WHAT_IR,
        t_ns=0,
        ok=True,
        compile=node.compile.id,
        seq=node.seq,
        which="both",
        name=PASS,
        before=texts["before"],
        after=texts["after"],
        after_missing=None,
    )


def _node() -> PassNode:
    """PASS in a compile shaped like the demo GEMM's."""
    session = Session()
    tree = session.tree
    session.apply([msg for spec in lowerings(1, fail=()) for msg in spec.messages()])
    return next(node for node in tree.passes if node.name == PASS)


class IRApp(App[None]):
    """The IR screen of PASS over a target that answers with ``answer``, and nothing else."""

    TITLE = "iket-tui"

    def __init__(self, answer: m.Message) -> None:
        super().__init__()
        self.target = AnsweringTarget({m.WHAT_IR: answer})

    def on_mount(self) -> None:
        screen = IRScreen(self.target, _node())
        self.target.screen = screen
        self.push_screen(screen)


def shown(view: str, then: tuple[str, ...] = ()) -> Callable[[Pilot[None]], Any]:
    async def run_before(pilot: Pilot[None]) -> None:
        app = pilot.app
        await wait_until(pilot, lambda: isinstance(app.screen, IRScreen) and app.screen.shown == view, f"the {view}")
        await pilot.press(*then)
        await pilot.pause()

    return run_before


def test_the_diff_a_pass_made(snap_compare: Compare, answer: m.Message) -> None:
    assert snap_compare(IRApp(answer), terminal_size=(160, 48), run_before=shown("diff"))


def test_a_search_in_the_ir_after_a_pass(snap_compare: Compare, answer: m.Message) -> None:
    """``/tma`` then ``n``: every occurrence marked, the second one current and scrolled to."""
    keys = ("a", "slash", *"tma", "enter", "n")
    assert snap_compare(IRApp(answer), terminal_size=(120, 32), run_before=shown("diff", keys))
