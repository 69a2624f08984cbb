"""Questions in a session of several processes go to the process of the node under the cursor:
the IR of a pass to the agent that ran it, the stacks to the process of the row selected."""

from __future__ import annotations

from typing import Any

from ui_driving import app_test, wait_for_batches, wait_until
from ui_fakes import FakeSource, FrozenClock, batch

from iket_tui.model.nodes import Node
from iket_tui.model.synthetic import Lowering, agent_hello
from iket_tui.protocol import messages as m
from iket_tui.sources.base import SourceState
from iket_tui.ui.app import IketApp
from iket_tui.ui.ir_screen import IRScreen
from iket_tui.ui.stacks_screen import StacksScreen

WIDE = (160, 48)
FIRST, SECOND = 301, 302


def two_workers() -> list[dict[str, Any]]:
    """Two processes, each compiling its compile 1."""
    out: list[dict[str, Any]] = []
    for pid, kernel in ((FIRST, "gemm"), (SECOND, "softmax")):
        hello = agent_hello(pid=pid)
        hello["ppid"] = 1
        out += [m.process(pid=pid, start_time=1), hello, *Lowering(1, kernel, 1_000_000).messages()]
    return out


class AskableProcesses(FakeSource):
    """Several processes' stream that takes requests, as the merged source does."""

    def __init__(self) -> None:
        super().__init__([batch(two_workers(), state=SourceState.LIVE)], stay_open=True)
        self.requests: list[m.Message] = []

    def request(self, what: str, *, timeout_s: float, **fields: object) -> int:
        self.requests.append({"what": what, **fields})
        return len(self.requests)


@app_test
async def test_the_ir_and_the_stacks_are_asked_of_the_process_under_the_cursor() -> None:
    source = AskableProcesses()
    app = IketApp(source, clock=FrozenClock(), follow=False)
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        tree = app.pass_tree
        second = next(process for process in tree.processes if process.pid == SECOND)
        node = next(node for node in tree.passes if node.name == "tl.LowerTileOp" and node.compile.process is second)

        async def select(target: Node) -> None:
            app.rows.reveal(target)
            app.view.sync()
            app.view.select(target)
            await pilot.pause()

        await select(node)
        await pilot.press("i")
        await wait_until(pilot, lambda: isinstance(app.screen, IRScreen), "the IR screen")
        assert source.requests == [
            {"what": m.WHAT_IR, "compile": 1, "seq": node.seq, "which": "both", "process": SECOND}
        ]
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, IRScreen), "the tree again")

        first = next(process for process in tree.processes if process.pid == FIRST)
        await select(first)
        await pilot.press("S")
        await wait_until(pilot, lambda: isinstance(app.screen, StacksScreen), "the stacks screen")
        assert source.requests[-1]["what"] == m.WHAT_STACKS and source.requests[-1]["process"] == FIRST
