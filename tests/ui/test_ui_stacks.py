"""The stacks pane over a recording says it needs a live target, and changes nothing."""

from __future__ import annotations

from pathlib import Path

from ui_driving import app_test, wait_until

from iket_tui.sources.base import SourceState
from iket_tui.sources.replay import RecordingSource
from iket_tui.ui.app import IketApp
from iket_tui.ui.stacks_screen import StacksScreen

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"


@app_test
async def test_in_a_replay_the_stacks_pane_says_it_needs_a_live_target() -> None:
    app = IketApp(RecordingSource(EXAMPLE, speed=0.0))
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_until(pilot, lambda: app.source_state is SourceState.ENDED, "the replay to end")
        await pilot.press("S")
        await wait_until(pilot, lambda: isinstance(app.screen, StacksScreen), "the stacks pane")
        screen = app.screen
        assert isinstance(screen, StacksScreen)
        assert screen.title_text() == "no stacks: a recording cannot be asked: this needs a live target"
        assert screen.body_text() == ""
        await pilot.press("S")
        assert not isinstance(app.screen, StacksScreen)
