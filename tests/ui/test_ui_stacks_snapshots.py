"""SVG snapshots of the stacks pane over a real answer: the demo program held inside
``tl.InjectSoftwarePipeline``, asked for its stacks through its agent (captured once by
``data/capture_stacks.py``, this machine's paths made neutral). The pane takes the answer from
a target that answers as the agent does, so the snapshots are exact."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from textual.app import App
from textual.pilot import Pilot
from ui_driving import wait_until
from ui_fakes import AnsweringTarget

from iket_tui.protocol import messages as m
from iket_tui.ui.stacks_screen import StacksScreen

Compare = Callable[..., bool]
STACKS = Path(__file__).parent / "data" / "stacks-slow-gemm.json"


class StacksApp(App[None]):
    """The stacks pane over a target that answers with ``answer``, and nothing else."""

    TITLE = "iket-tui"

    def __init__(self, answer: m.Message) -> None:
        super().__init__()
        self.target = AnsweringTarget({m.WHAT_STACKS: answer})

    def on_mount(self) -> None:
        screen = StacksScreen(self.target)
        self.target.screen = screen
        self.push_screen(screen)


def answered(then: tuple[str, ...] = ()) -> Callable[[Pilot[None]], object]:
    async def run_before(pilot: Pilot[None]) -> None:
        app = pilot.app
        shown = lambda: isinstance(app.screen, StacksScreen) and app.screen.response is not None  # noqa: E731
        await wait_until(pilot, shown, "the stacks")
        await pilot.press(*then)
        await pilot.pause()

    return run_before


def test_stacks_of_a_stuck_compile(snap_compare: Compare) -> None:
    answer = json.loads(STACKS.read_text(encoding="utf-8"))
    assert snap_compare(StacksApp(answer), terminal_size=(160, 48), run_before=answered())


def test_stacks_with_the_agent_threads_at_80x24(snap_compare: Compare) -> None:
    """Long lines are cut, not folded, and scroll sideways; the end shows the agent's threads."""
    answer = json.loads(STACKS.read_text(encoding="utf-8"))
    assert snap_compare(StacksApp(answer), terminal_size=(80, 24), run_before=answered(("a", "end")))
