"""``n`` on the stacks screen asks the source for the target's native stacks, as ``S`` asks for
its Python stacks: over a recording it is refused in one line and py-spy never runs; over a live
source the answer that comes in a batch is shown above the Python stacks."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot
from ui_driving import app_test, wait_for_batches, wait_until
from ui_fakes import FakeSource, FrozenClock, batch

from iket_tui.model.synthetic import live_stream
from iket_tui.protocol import messages as m
from iket_tui.sources import py_spy
from iket_tui.sources.base import NATIVE_STACKS, Answer, SourceBatch, SourceState
from iket_tui.sources.replay import RecordingSource
from iket_tui.ui.app import IketApp
from iket_tui.ui.stacks_screen import StacksScreen

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"
WIDE = (160, 48)
DUMP = 'Thread 4242 (idle): "MainThread"\n    wait (threading.py:320)\n'


@pytest.fixture
def py_spy_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """py-spy's stand-in: each run adds a line to the file returned."""
    runs = tmp_path / "runs"
    script = tmp_path / "py-spy"
    script.write_text(f'#!/bin/sh\necho "$@" >> {runs}\necho "Thread 1 (idle)"\n')
    script.chmod(0o755)
    monkeypatch.setattr(py_spy, "py_spy_path", lambda: str(script))
    return runs


class AskableSource(FakeSource):
    """A live fake source that takes requests and answers only what the test feeds it."""

    def __init__(self) -> None:
        super().__init__([batch(live_stream(), state=SourceState.LIVE)], stay_open=True)
        self.requests: list[m.Message] = []

    def request(self, what: str, *, timeout_s: float, **fields: object) -> int:
        self.requests.append({"what": what, "timeout_s": timeout_s, **fields})
        return len(self.requests)


async def _stacks_screen(pilot: Pilot[int], app: IketApp) -> StacksScreen:
    await pilot.press("S")
    await wait_until(pilot, lambda: isinstance(app.screen, StacksScreen), "the stacks screen")
    screen = app.screen
    assert isinstance(screen, StacksScreen)
    return screen


@app_test
async def test_in_a_replay_n_is_refused_in_one_line_and_py_spy_never_runs(py_spy_runs: Path) -> None:
    app = IketApp(RecordingSource(EXAMPLE, speed=0.0))
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_until(pilot, lambda: app.source_state is SourceState.ENDED, "the replay to end")
        assert any(process.pid for process in app.pass_tree.processes), "the recording names a pid"
        screen = await _stacks_screen(pilot, app)
        await pilot.press("n")
        await wait_until(pilot, lambda: screen.title_text().startswith("no native stacks"), "the refusal")
        await pilot.pause(0.2)  # a py-spy run off the app's thread would have begun by now
        assert screen.title_text() == "no native stacks: a recording cannot be asked: this needs a live target"
        assert screen.body_text() == ""
    assert not py_spy_runs.exists(), "py-spy ran over a recording"


@app_test
async def test_n_asks_the_source_and_shows_its_answer_above_the_python_stacks(py_spy_runs: Path) -> None:
    source = AskableSource()
    app = IketApp(source, clock=FrozenClock())
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        screen = await _stacks_screen(pilot, app)
        await pilot.press("n")
        assert source.requests == [
            {"what": m.WHAT_STACKS, "timeout_s": 10.0},
            {"what": NATIVE_STACKS, "timeout_s": 30.0},
        ]
        assert screen.title_text() == "reading the target's native stacks with py-spy ..."

        native = {"type": m.RESPONSE, "id": 2, "ok": True, "what": NATIVE_STACKS, "pid": 4242}
        native |= {"target": "gpu-box:4242", "text": DUMP}
        source.feed(SourceBatch(answers=(Answer(2, response=native),)))
        await wait_until(pilot, lambda: screen.native is not None, "the native stacks")
        assert screen.title_text() == "native stacks of gpu-box:4242 (py-spy), then the Python stacks"
        assert screen.body_text().splitlines() == DUMP.splitlines()
    assert not py_spy_runs.exists(), "the screen ran py-spy itself"


@app_test
async def test_why_there_are_no_native_stacks_is_said_in_one_line() -> None:
    source = AskableSource()
    app = IketApp(source, clock=FrozenClock())
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        screen = await _stacks_screen(pilot, app)
        await pilot.press("n")
        source.feed(
            SourceBatch(answers=(Answer(2, error="native stacks need py-spy: pip install 'iket-tui[native]'"),))
        )
        await wait_until(pilot, lambda: screen.title_text().startswith("no native stacks"), "the answer")
        assert screen.title_text() == "no native stacks: native stacks need py-spy: pip install 'iket-tui[native]'"
        assert screen.native is None and screen.body_text() == ""
