"""SVG snapshots of the timing screen: a live stream with a running pass and a failure, and the
real H200 recording on an 80x24 terminal. The screen runs alone over a session built beforehand,
so its clock is the session's latest time and the snapshots are exact."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual.app import App
from textual.pilot import Pilot

from iket_tui.model.session import Session
from iket_tui.model.synthetic import live_stream
from iket_tui.sources.reading import read_recording
from iket_tui.ui.timing_screen import TimingScreen

Compare = Callable[..., bool]
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"


class TimingApp(App[None]):
    """The timing screen over a given session's tree, and nothing else."""

    def __init__(self, session: Session) -> None:
        super().__init__()
        self.session = session

    def on_mount(self) -> None:
        session = self.session
        self.push_screen(TimingScreen(session.tree, now_ns=lambda: session.last_t_ns))


def test_timing_of_a_live_session(snap_compare: Compare) -> None:
    session = Session()
    session.apply(live_stream())  # the sixth compile is running tl.LayoutInference

    async def run_before(pilot: Pilot[None]) -> None:
        await pilot.press("down", "down")

    assert snap_compare(TimingApp(session), terminal_size=(160, 48), run_before=run_before)


def test_timing_of_a_real_run_at_80x24(snap_compare: Compare) -> None:
    messages, _ = read_recording(EXAMPLE)
    session = Session()
    session.apply(messages)
    session.end_stream("the recording ended")

    async def run_before(pilot: Pilot[None]) -> None:
        await pilot.press("tab", "up", "up", "up", "up")  # the failed compile, layout_conflict

    assert snap_compare(TimingApp(session), terminal_size=(80, 24), run_before=run_before)
