"""The header bar on its own: a state given before its lines are mounted (a tick of the app's
clock can come then, or while the app closes) is shown once they are, and raises nothing."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets import Static
from ui_driving import app_test

from iket_tui.ui.header_bar import HeaderBar, HeaderState

STATE = HeaderState(target="pid 4242  python kernels/demo.py", connection="live", events=12, rate="3", dropped=0)


def test_a_state_given_before_the_lines_are_mounted_is_kept_for_the_next_call() -> None:
    bar = HeaderBar(id="header")
    bar.show(STATE)
    assert bar.state is None


class OneHeader(App[None]):
    def compose(self) -> ComposeResult:
        yield HeaderBar(id="header")


@app_test
async def test_once_mounted_the_same_state_is_shown() -> None:
    app = OneHeader()
    async with app.run_test(size=(120, 4)) as pilot:
        bar = app.query_one(HeaderBar)
        bar.show(STATE)
        await pilot.pause()
        assert bar.state == STATE
        assert "pid 4242" in str(bar.query_one("#header-target", Static).render())
        assert "12 events" in str(bar.query_one("#header-rate", Static).render())
