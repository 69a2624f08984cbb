"""Questions to the target through the app: a screen asks through the source, and the answer,
or why none came, reaches it in a batch like every other message."""

from __future__ import annotations

from ui_driving import app_test, wait_for_batches, wait_until
from ui_fakes import FakeSource, FrozenClock, batch

from iket_tui.model.nodes import PassNode
from iket_tui.model.synthetic import live_stream
from iket_tui.protocol import messages as m
from iket_tui.sources.base import Answer, SourceBatch, SourceState
from iket_tui.ui.app import IketApp
from iket_tui.ui.ir_screen import IRScreen
from iket_tui.ui.stacks_screen import StacksScreen

WIDE = (160, 48)
BEFORE = "x = T.alloc(1)\n"
AFTER = "x = T.alloc(1, scope='shared')\n"


class AskableSource(FakeSource):
    """A live fake source that takes requests and answers only what the test feeds it."""

    def __init__(self) -> None:
        super().__init__([batch(live_stream(), state=SourceState.LIVE)], stay_open=True)
        self.requests: list[m.Message] = []

    def request(self, what: str, *, timeout_s: float, **fields: object) -> int:
        self.requests.append({"what": what, "timeout_s": timeout_s, **fields})
        return len(self.requests)


def _answered(request_id: int, **fields: object) -> SourceBatch:
    response = m.response(id=request_id, t_ns=0, **fields)
    return SourceBatch(messages=(response,), answers=(Answer(request_id, response=response),))


@app_test
async def test_the_ir_screen_shows_the_answer_that_arrives_in_a_batch() -> None:
    source = AskableSource()
    app = IketApp(source, clock=FrozenClock())
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        node = next(node for node in app.pass_tree.passes if node.name == "tl.LowerTileOp")
        app.following = False
        app.rows.reveal(node)
        app.view.sync()
        app.view.select(node)
        await pilot.press("i")
        await wait_until(pilot, lambda: isinstance(app.screen, IRScreen), "the IR screen")
        screen = app.screen
        assert isinstance(screen, IRScreen) and isinstance(screen.node, PassNode)
        assert source.requests == [
            {"what": m.WHAT_IR, "timeout_s": 30.0, "compile": node.compile.id, "seq": node.seq, "which": "both"}
        ]
        assert screen.title_text().startswith("asking the target for the IR around tl.LowerTileOp")

        source.feed(_answered(7, what=m.WHAT_IR, ok=True, name=node.name, before="old", after="older"))
        await wait_for_batches(pilot, app, 2)
        assert screen.shown is None  # an answer to another request changes nothing

        answer = _answered(1, what=m.WHAT_IR, ok=True, name=node.name, before=BEFORE, after=AFTER, after_missing=None)
        source.feed(answer)
        await wait_until(pilot, lambda: screen.shown == "diff", "the diff")
        assert "+x = T.alloc(1, scope='shared')" in screen.text


@app_test
async def test_an_answer_that_never_comes_is_said_on_the_stacks_screen() -> None:
    source = AskableSource()
    app = IketApp(source, clock=FrozenClock())
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        await pilot.press("S")
        await wait_until(pilot, lambda: isinstance(app.screen, StacksScreen), "the stacks screen")
        screen = app.screen
        assert isinstance(screen, StacksScreen)
        assert source.requests == [{"what": m.WHAT_STACKS, "timeout_s": 10.0}]
        assert screen.title_text() == "asking the target for its stacks ..."

        why = "no answer within 10 s (is the target still running the agent?)"
        source.feed(SourceBatch(answers=(Answer(1, error=why),)))
        await wait_until(pilot, lambda: screen.title_text() != "asking the target for its stacks ...", "the answer")
        assert screen.title_text() == f"no stacks: {why}"


@app_test
async def test_an_agent_that_answers_it_cannot_is_said_on_the_stacks_screen() -> None:
    source = AskableSource()
    app = IketApp(source, clock=FrozenClock())
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        await pilot.press("S")
        await wait_until(pilot, lambda: isinstance(app.screen, StacksScreen), "the stacks screen")
        screen = app.screen
        assert isinstance(screen, StacksScreen)
        source.feed(_answered(1, what=m.WHAT_STACKS, ok=False, error="the agent's thread list is unreadable"))
        await wait_until(pilot, lambda: screen.title_text() != "asking the target for its stacks ...", "the answer")
        assert screen.title_text() == "no stacks: the agent's thread list is unreadable"
        assert screen.body_text() == ""
