"""The tree as the app shows it: a pass whose end said it changed nothing has its name dimmed,
one that changed the module or was not checked reads as any other."""

from __future__ import annotations

from ui_driving import app_test, wait_for_batches
from ui_fakes import FakeSource, FrozenClock, batch

from iket_tui.model.synthetic import Lowering, agent_hello
from iket_tui.protocol import messages as m
from iket_tui.sources.base import SourceState
from iket_tui.ui.app import IketApp


def _stream() -> list[m.Message]:
    messages = [agent_hello(), *Lowering(compile=1, kernel="gemm", start_ns=0).messages()]
    for msg in messages:
        if msg["type"] == m.PASS_END and msg["name"] in ("tl.LowerTileOp", "tl.Simplify"):
            msg["changed"] = msg["name"] == "tl.LowerTileOp"
    return messages


@app_test
async def test_the_tree_dims_the_name_of_a_pass_that_changed_nothing() -> None:
    source = FakeSource([batch(_stream(), state=SourceState.LIVE)], stay_open=True)
    app = IketApp(source, clock=FrozenClock())  # type: ignore[arg-type]
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for_batches(pilot, app, 1)
        await pilot.press("e")
        await pilot.pause()
        view = app.view
        names: dict[str, list[bool]] = {}
        for y in range(view.size.height):
            for segment in view.render_line(y):
                text = segment.text.strip()
                if text in ("tl.LowerTileOp", "tl.Simplify", "tl.LayoutInference") and segment.style is not None:
                    names.setdefault(text, []).append(bool(segment.style.dim))
        assert names["tl.Simplify"] and all(names["tl.Simplify"])
        assert names["tl.LowerTileOp"] == [False]
        assert names["tl.LayoutInference"] == [False]  # not known: as any pass
