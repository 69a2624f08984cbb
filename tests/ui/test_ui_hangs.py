"""The keys for a stuck compile, over a fake live target: ``R`` asks for a capture of the running
pass and writes a reproducer from the answer, ``A`` asks before it aborts and then says what
came of the abort, in the words ``iket-tui abort`` prints. Neither acts on a pass that is not
running, and a recording says it cannot be asked."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from test_ui_requests import WIDE, AskableSource, _answered
from textual.geometry import Region
from textual.widgets import Static
from ui_driving import app_test, wait_for_batches, wait_until
from ui_fakes import FakeReplay, FrozenClock, batch

from iket_tui.model.nodes import RUNNING, PassNode
from iket_tui.model.synthetic import live_stream
from iket_tui.protocol import messages as m
from iket_tui.ui.abort_text import abort_lines
from iket_tui.ui.app import IketApp
from iket_tui.ui.hang_screens import AbortPane, ReproPane

MODULE_JSON = '{"root_index": 0, "nodes": [{"type": "None"}], "metadata": {}}'


def _capture(node: PassNode) -> dict[str, object]:
    return {
        "what": m.WHAT_STUCK,
        "ok": True,
        "compile": node.compile.id,
        "seq": node.seq,
        "name": node.name,
        "running_ns": 1_200_000_000,
        "target": '{"kind": "cuda", "arch": "sm_90a"}',
        "config_json": None,
        "ir_script": "# the module\n",
        "ir_json": MODULE_JSON,
        "ir_missing": None,
        "pass_source": None,
        "frames": [{"file": "/x/tvm/ir/transform.py", "line": 171, "function": "__call__", "code": "RunPass"}],
    }


def _running(app: IketApp) -> PassNode:
    cursor = app.view.cursor
    assert isinstance(cursor, PassNode) and cursor.status is RUNNING, "following puts the cursor on the running pass"
    return cursor


@app_test
async def test_r_on_the_running_pass_writes_a_reproducer_from_the_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    source = AskableSource()
    app = IketApp(source, clock=FrozenClock())
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        node = _running(app)
        assert node.name == "tl.LayoutInference"
        await pilot.press("R")
        await wait_until(pilot, lambda: isinstance(app.screen, ReproPane), "the repro pane")
        pane = app.screen
        assert isinstance(pane, ReproPane)
        assert source.requests == [
            {"what": m.WHAT_STUCK, "timeout_s": 30.0, "compile": node.compile.id, "seq": node.seq}
        ]
        what = f"tl.LayoutInference (pass {node.seq} of compile {node.compile.id}, {node.compile.kernel})"
        assert pane.text() == f"asking the target for the module {what} was given ...\nescape closes"

        source.feed(_answered(1, **_capture(node)))
        await wait_until(pilot, lambda: pane.written is not None, "the reproducer")
        directory = tmp_path / f"iket-repro-c{node.compile.id}-p{node.seq}"
        assert sorted(path.name for path in directory.iterdir()) == [
            "before.py",
            "module.json",
            "repro.py",
            "stack.txt",
        ]
        assert (directory / "module.json").read_text() == MODULE_JSON
        assert pane.text().splitlines() == [
            f"a reproducer of {what}",
            f"written to {directory}, the pass running for 1.20 s when captured:",
            f"python {directory / 'repro.py'} runs tl.LayoutInference alone on the module it was given, for 10 s",
            f"python {directory / 'repro.py'} --timeout S",
            "escape closes",
        ]
        await pilot.press("escape")
        assert not isinstance(app.screen, ReproPane)


@app_test
async def test_a_capture_the_target_refuses_is_said_in_the_pane() -> None:
    source = AskableSource()
    app = IketApp(source, clock=FrozenClock())
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        node = _running(app)
        await pilot.press("R")
        await wait_until(pilot, lambda: isinstance(app.screen, ReproPane), "the repro pane")
        pane = app.screen
        assert isinstance(pane, ReproPane)
        why = f"compile {node.compile.id} is in codegen (target.build.tilelang_cuda), not in a pass"
        source.feed(_answered(1, what=m.WHAT_STUCK, ok=False, error=why))
        await wait_until(pilot, lambda: "no reproducer" in pane.text(), "the refusal")
        assert pane.text().splitlines()[1] == why


@app_test
async def test_the_keys_need_a_running_pass() -> None:
    source = AskableSource()
    app = IketApp(source, clock=FrozenClock())
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        finished = next(node for node in app.pass_tree.passes if node.compile.status is not RUNNING)
        app.following = False
        app.rows.reveal(finished)
        app.view.sync()
        app.view.select(finished)
        for key in ("R", "A"):
            await pilot.press(key)
            await pilot.pause()
            assert not isinstance(app.screen, ReproPane | AbortPane)
        assert source.requests == []
        said = "put the cursor on a running pass, or on its compile"
        assert [note.message for note in app._notifications] == [said, said]


@app_test
async def test_a_recording_cannot_be_asked_for_a_capture() -> None:
    app = IketApp(FakeReplay([batch(live_stream())], stay_open=True), clock=FrozenClock())
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        app.view.select(next(node for node in app.pass_tree.passes if node.status is RUNNING))
        await pilot.press("R")
        await wait_until(pilot, lambda: isinstance(app.screen, ReproPane), "the repro pane")
        pane = app.screen
        assert isinstance(pane, ReproPane)
        assert pane.text().splitlines()[1] == (
            "a recording cannot be asked: this needs a live target; iket-tui repro RECORDING --stuck -o DIR reads a "
            "capture a recording holds"
        )


@app_test
async def test_a_replay_names_its_own_file_in_the_command_that_reads_a_capture() -> None:
    app = IketApp(FakeReplay([batch(live_stream())], stay_open=True), clock=FrozenClock())
    app.detail.recording = Path("runs/stuck gemm.msgpack")  # as `iket-tui replay` sets it
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        app.view.select(next(node for node in app.pass_tree.passes if node.status is RUNNING))
        await pilot.press("R")
        await wait_until(pilot, lambda: isinstance(app.screen, ReproPane), "the repro pane")
        pane = app.screen
        assert isinstance(pane, ReproPane)
        assert (
            pane.text()
            .splitlines()[1]
            .endswith("; iket-tui repro 'runs/stuck gemm.msgpack' --stuck -o DIR reads a capture a recording holds")
        )


@app_test
async def test_a_asks_before_it_aborts_and_says_what_came_of_it() -> None:
    source = AskableSource()
    app = IketApp(source, clock=FrozenClock())
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        node = _running(app)
        compile_id = node.compile.id
        await pilot.press("A")
        await wait_until(pilot, lambda: isinstance(app.screen, AbortPane), "the confirmation")
        pane = app.screen
        assert isinstance(pane, AbortPane)
        assert pane.text().splitlines()[:2] == [
            f"Abort compile {compile_id}?",
            f"It has been in tl.LayoutInference (pass {node.seq}) for 1.20 s.",
        ]
        await pilot.press("n")
        assert not isinstance(app.screen, AbortPane) and source.requests == []

        await pilot.press("A")
        await wait_until(pilot, lambda: isinstance(app.screen, AbortPane), "the confirmation")
        pane = app.screen
        assert isinstance(pane, AbortPane)
        await pilot.press("y")
        assert source.requests == [{"what": m.WHAT_ABORT, "timeout_s": 30.0, "compile": compile_id}]
        assert pane.text().startswith(f"aborting compile {compile_id} ...")
        await pilot.press("y")  # asked once only
        assert len(source.requests) == 1

        answer = {
            "what": m.WHAT_ABORT,
            "ok": True,
            "compile": compile_id,
            "name": "tl.LayoutInference",
            "seq": node.seq,
            "state": m.ABORT_NATIVE,
            "where": "/x/tvm/ir/transform.py:171 in __call__: return _ffi_transform_api.RunPass(self, mod)",
            "pid": 4242,
            "compile_error": None,
        }
        source.feed(_answered(1, **answer))
        await wait_until(pilot, lambda: pane.answer is not None, "the answer")
        assert pane.text().splitlines()[1:-1] == abort_lines(answer)
        assert pane.text().splitlines()[0] == f"compile {compile_id}"


@app_test
async def test_the_panes_wrap_their_sentences_to_their_width() -> None:
    """The confirmation and the native-code answer are paragraphs that the pane wraps: in a
    94-column pane no line ends early, leaving a word or two alone on the next."""
    source = AskableSource()
    app = IketApp(source, clock=FrozenClock())
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        node = _running(app)
        await pilot.press("A")
        await wait_until(pilot, lambda: isinstance(app.screen, AbortPane), "the confirmation")
        pane = app.screen
        assert isinstance(pane, AbortPane)
        await pilot.pause()
        body = pane.query_one("#hang-body", Static)
        width = body.content_region.width
        assert width == 94
        confirm = pane.text().splitlines()[1:-1]
        assert len(confirm) == 2, "one line for the pass, one paragraph for what an abort does"
        assert _shown(body) == _wrapped(confirm, width)

        await pilot.press("y")
        answer = {
            "what": m.WHAT_ABORT,
            "ok": True,
            "compile": node.compile.id,
            "name": "tl.LayoutInference",
            "seq": node.seq,
            "state": m.ABORT_NATIVE,
            "where": "/x/tvm/ir/transform.py:171 in __call__: return _ffi_transform_api.RunPass(self, mod)",
            "pid": 4242,
            "compile_error": None,
        }
        source.feed(_answered(1, **answer))
        await wait_until(pilot, lambda: pane.answer is not None, "the answer")
        await pilot.pause()
        shown = _shown(body)
        assert shown == _wrapped(abort_lines(answer), width)
        assert shown[-2:] == [
            "Next: `iket-tui stacks 4242 --native` shows where it is (S, then n, in the UI); ending the",
            "process (kill 4242) is your call.",
        ]


def _shown(widget: Static) -> list[str]:
    """The lines a widget shows, as painted."""
    region = widget.content_region
    return [strip.text.rstrip() for strip in widget.render_lines(Region(0, 0, region.width, region.height))]


def _wrapped(paragraphs: list[str], width: int) -> list[str]:
    """The paragraphs as words wrapped at ``width``, without a break inside a word."""
    return [line for text in paragraphs for line in textwrap.wrap(text, width, break_on_hyphens=False)]


def test_what_an_abort_came_to_in_words() -> None:
    base = {"compile": 3, "name": "tl.Foo", "pid": 77}
    error = "CompileAborted: aborted by iket-tui after 42 s in tl.Foo"
    assert abort_lines({**base, "state": m.ABORT_ABORTED, "compile_error": error}) == [
        f"compile 3 failed: {error}; the program goes on"
    ]
    assert abort_lines({**base, "state": m.ABORT_ENDED, "compile_error": None}) == [
        "compile 3 ended before the abort took effect (it finished)"
    ]
    raised = abort_lines({**base, "state": m.ABORT_RAISED})
    assert raised[-1] == "`iket-tui stacks 77` (S in the UI) shows where the thread is now."
    native = abort_lines({**base, "state": m.ABORT_NATIVE, "where": "f.py:1 in g: h()"})
    assert native[1] == "It is in tl.Foo; its innermost Python frame: f.py:1 in g: h()"
    assert "(kill 77) is your call." in native[-1]
