"""A kernel compiled again, in the app: the timing screen counts each kernel's compiles, and the
tree's compile rows say how many times and what changed."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import DataTable
from ui_driving import app_test, wait_for_batches, wait_until
from ui_fakes import FakeSource, FrozenClock, batch

from iket_tui.model.synthetic import Lowering
from iket_tui.protocol import messages as m
from iket_tui.sources.base import SourceState
from iket_tui.ui.app import IketApp
from iket_tui.ui.timing_screen import TimingScreen

CALLER = {"function": "train_step", "file": "train.py", "line": 42}


def lowering(compile_id: int, start_ns: int, kernel: str, **origin: Any) -> list[m.Message]:
    messages = Lowering(compile=compile_id, kernel=kernel, start_ns=start_ns).messages()
    return [{**msg, **origin} if msg["type"] == m.COMPILE_BEGIN else msg for msg in messages]


@app_test
async def test_the_timing_screen_counts_the_compiles_of_each_kernel() -> None:
    told = {"caller": CALLER, "input_hash": "aa", "config": {}}
    stream = [
        *lowering(1, 0, "gemm", **told),
        *lowering(2, 10**9, "softmax", **told),
        *lowering(3, 2 * 10**9, "gemm", **{**told, "config": {"tl.disable_tma_lower": "True"}}),
    ]
    app = IketApp(FakeSource([batch(stream, state=SourceState.LIVE)], stay_open=True), clock=FrozenClock())
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for_batches(pilot, app, 1)
        app.push_screen(TimingScreen(app.pass_tree, now_ns=app.now_ns))
        await wait_until(pilot, lambda: isinstance(app.screen, TimingScreen), "the timing screen")
        table: DataTable[Text] = app.screen.query_one("#compiles", DataTable)
        kernels = [table.get_row_at(row)[1].plain.strip() for row in range(table.row_count)]
        assert kernels == ["gemm (1 of 2)", "softmax", "gemm (2 of 2)"]
