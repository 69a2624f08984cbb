"""SVG snapshots of the timing screen: a live stream with a running pass and a failure, and the
real H200 recording on an 80x24 terminal. The screen runs alone over a tree built beforehand,
so its clock is the tree's latest time and the snapshots are exact."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual.app import App
from textual.pilot import Pilot

from iket_tui.model.pass_tree import PassTree
from iket_tui.model.synthetic import live_stream
from iket_tui.sources.reading import read_recording
from iket_tui.ui.timing_screen import TimingScreen

Compare = Callable[..., bool]
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"


class TimingApp(App[None]):
    """The timing screen over a given tree, and nothing else."""

    def __init__(self, tree: PassTree) -> None:
        super().__init__()
        self.pass_tree = tree

    def on_mount(self) -> None:
        self.push_screen(TimingScreen(self.pass_tree))


def test_timing_of_a_live_session(snap_compare: Compare) -> None:
    tree = PassTree()
    tree.apply(live_stream())  # the sixth compile is running tl.LayoutInference

    async def run_before(pilot: Pilot[None]) -> None:
        await pilot.press("down", "down")

    assert snap_compare(TimingApp(tree), terminal_size=(160, 48), run_before=run_before)


def test_timing_of_a_real_run_at_80x24(snap_compare: Compare) -> None:
    messages, _ = read_recording(EXAMPLE)
    tree = PassTree()
    tree.apply(messages)
    tree.end_stream("the recording ended")

    async def run_before(pilot: Pilot[None]) -> None:
        await pilot.press("tab", "up", "up", "up", "up")  # the failed compile, layout_conflict

    assert snap_compare(TimingApp(tree), terminal_size=(80, 24), run_before=run_before)
