"""The IR screen over an answer the target gives: line numbers, the diff's lines, and a search
that Enter starts, an empty Enter drops and Escape leaves alone."""

from __future__ import annotations

from pathlib import Path

from textual.app import App
from textual.pilot import Pilot
from ui_driving import app_test, wait_until
from ui_fakes import AnsweringTarget

from iket_tui.model.nodes import PassNode
from iket_tui.model.session import Session
from iket_tui.model.synthetic import lowerings
from iket_tui.protocol import messages as m
from iket_tui.ui.ir_screen import IRScreen

BEFORE = "".join(f"x_{i} = T.alloc({i})\n" for i in range(1, 41))
AFTER = BEFORE.replace("x_20 = T.alloc(20)", "x_20 = T.alloc(20, scope='shared')")


def _node() -> PassNode:
    session = Session()
    tree = session.tree
    session.apply([msg for spec in lowerings(1, fail=()) for msg in spec.messages()])
    return next(node for node in tree.passes if node.name == "tl.LowerTileOp")


class IRApp(App[None]):
    def __init__(self, save_dir: Path | None = None) -> None:
        super().__init__()
        self.save_dir = save_dir
        node = _node()
        answer = m.response(
            id=0, what=m.WHAT_IR, t_ns=0, ok=True, name=node.name, before=BEFORE, after=AFTER, after_missing=None
        )
        self.target = AnsweringTarget({m.WHAT_IR: answer})
        self.node = node

    def on_mount(self) -> None:
        screen = IRScreen(self.target, self.node, save_dir=self.save_dir)
        self.target.screen = screen
        self.push_screen(screen)


async def _the_diff(app: IRApp, pilot: Pilot[int]) -> IRScreen:
    """The IR screen, once it shows the diff it opens with."""
    await wait_until(pilot, lambda: isinstance(app.screen, IRScreen) and app.screen.shown == "diff", "the diff")
    screen = app.screen
    assert isinstance(screen, IRScreen)
    return screen


def _rows(screen: IRScreen) -> list[str]:
    body = screen.body
    return [body.line_text(y).rstrip() for y in range(body.scrollable_content_region.height)]


@app_test
async def test_the_ir_before_has_line_numbers_and_the_diff_its_changes() -> None:
    app = IRApp()
    async with app.run_test(size=(60, 12)) as pilot:
        screen = await _the_diff(app, pilot)
        assert app.target.requests == [
            {"what": m.WHAT_IR, "compile": app.node.compile.id, "seq": app.node.seq, "which": "both"}
        ]
        rows = _rows(screen)
        assert rows[:3] == ["--- before tl.LowerTileOp", "+++ after tl.LowerTileOp", "@@ -17,7 +17,7 @@"]
        assert "-x_20 = T.alloc(20)" in rows and "+x_20 = T.alloc(20, scope='shared')" in rows
        await pilot.press("b")
        assert _rows(screen)[:2] == [" 1  x_1 = T.alloc(1)", " 2  x_2 = T.alloc(2)"]
        assert screen.title_text() == f"IR before {screen.what} · 40 lines"


@app_test
async def test_enter_searches_an_empty_enter_drops_it_escape_leaves_it() -> None:
    app = IRApp()
    async with app.run_test(size=(60, 12)) as pilot:
        screen = await _the_diff(app, pilot)
        await pilot.press("b", "slash", *"alloc(3", "enter")  # alloc(3 and alloc(30 to alloc(39
        assert screen.search_status() == "match 1 of 11"
        assert _rows(screen)[2] == " 3  x_3 = T.alloc(3)"  # on screen already: the view stays
        await pilot.press("N")
        assert screen.search_status() == "match 11 of 11"
        assert any(row.startswith("39  x_39") for row in _rows(screen))
        await pilot.press("slash", *"x_1", "escape")
        assert screen.search_status() == "match 11 of 11" and screen.term == "alloc(3"
        await pilot.press("slash")
        assert screen.search_bar.term == "alloc(3"  # the input opens on the current term
        await pilot.press(*["backspace"] * 7, "enter")
        assert screen.search_status() == "" and screen.body.matches is None
        assert screen.title_text() == f"IR before {screen.what} · 40 lines"


@app_test
async def test_w_saves_the_view_and_never_writes_through_a_planted_link(tmp_path: Path) -> None:
    app = IRApp(save_dir=tmp_path)
    async with app.run_test(size=(60, 12)) as pilot:
        screen = await _the_diff(app, pilot)
        saved = tmp_path / f"iket-ir-c{app.node.compile.id}-p{app.node.seq}-diff.diff"
        await pilot.press("w")
        assert saved.read_text(encoding="utf-8") == screen.text

        victim = tmp_path / "victim"
        victim.write_text("keep me", encoding="utf-8")
        saved.unlink()
        saved.symlink_to(victim)
        await pilot.press("w")
        await pilot.pause()
        assert victim.read_text(encoding="utf-8") == "keep me"
        assert saved.is_symlink()
        (notice,) = [n for n in app._notifications if "symbolic link" in n.message]
        assert notice.severity == "error"


class SteppingApp(IRApp):
    """The IR screen on ``tl.LowerTileOp`` of a compile whose three passes after it changed
    nothing, as the agent said in their ``pass_end``."""

    def __init__(self) -> None:
        super().__init__()
        messages = [msg for spec in lowerings(1, fail=()) for msg in spec.messages()]
        ends = sorted((msg for msg in messages if msg["type"] == m.PASS_END), key=lambda msg: msg["seq"])
        at = next(i for i, msg in enumerate(ends) if msg["name"] == "tl.LowerTileOp")
        for i, msg in enumerate(ends):
            msg["changed"] = not at < i <= at + 3
        self.unchanged = [msg["seq"] for msg in ends[at + 1 : at + 4]]
        self.next_changed = ends[at + 4]
        session = Session()
        session.apply(messages)
        self.node = next(node for node in session.tree.passes if node.name == "tl.LowerTileOp")


@app_test
async def test_next_and_previous_pass_skip_the_passes_that_changed_nothing() -> None:
    app = SteppingApp()
    async with app.run_test(size=(100, 12)) as pilot:
        screen = await _the_diff(app, pilot)
        await pilot.press("right_square_bracket")
        await wait_until(pilot, lambda: screen.shown == "diff" and screen.node is not app.node, "the next pass")
        asked = app.target.requests[-1]
        assert asked["seq"] == app.next_changed["seq"]
        assert asked["seq"] not in [request["seq"] for request in app.target.requests[:-1]]
        assert screen.node.name == app.next_changed["name"]
        assert screen.title_text().endswith(" · 3 passes that changed nothing skipped")
        await pilot.press("left_square_bracket")
        await wait_until(pilot, lambda: screen.shown == "diff" and screen.node is app.node, "back")
        assert [request["seq"] for request in app.target.requests] == [app.node.seq, asked["seq"], app.node.seq]
        assert all(seq not in [r["seq"] for r in app.target.requests] for seq in app.unchanged)
        assert screen.title_text().endswith(" · 3 passes that changed nothing skipped")
