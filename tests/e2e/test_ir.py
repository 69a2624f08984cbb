"""IR on demand from a live target: the agent keeps the modules around every pass of its recent
compiles and prints them only when asked. The text it gives is what TVM prints for the same
modules lowered here; a compile beyond the kept number says so; a pass still running has its
IR before it and says there is none after it yet."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("tilelang")

from live_target import STUCK_PASS, Stuck, socket_of

from iket_tui.model.nodes import PassNode
from iket_tui.protocol import messages as m
from iket_tui.sources.base import SourceError
from iket_tui.sources.ir import fetch_ir, view_of
from iket_tui.sources.socket import SocketSource
from iket_tui.ui.app import IketApp
from iket_tui.ui.ir_screen import IRScreen

WAIT_S = 120.0
TARGET = Path(__file__).parent / "targets" / "lowered_twice.py"
PASS = "tl.LowerTileOp"


@dataclass
class Lowered:
    program: subprocess.Popen[str]
    path: Path
    env: dict[str, str]
    seq: dict[int, int]  # compile id -> sequence number of PASS in it


@pytest.fixture(scope="module")
def lowered() -> Iterator[Lowered]:
    runtime = Path(tempfile.mkdtemp(prefix="ik"))
    patch = pytest.MonkeyPatch()
    patch.setenv("XDG_RUNTIME_DIR", str(runtime))
    gate = runtime / "gate"
    env = {**os.environ, "IKET_TUI": "1", "IKET_TUI_WAIT_CLIENT": "120", "IKET_TUI_IR_COMPILES": "1"}
    program = subprocess.Popen(
        [sys.executable, str(TARGET)], env={**env, "IKET_TEST_GATE": str(gate)}, stdout=subprocess.PIPE, text=True
    )
    try:
        path = socket_of(program)
        seq: dict[int, int] = {}
        ends = 0
        source = SocketSource(path)
        source.connect()
        for batch in source.batches():
            for item in batch.messages:
                msg = m.message_of(item) if isinstance(item, list) else item
                if msg["type"] == m.PASS_END and msg["name"] == PASS:
                    seq[msg["compile"]] = msg["seq"]
                ends += msg["type"] == m.COMPILE_END
            if ends == 2:
                break
        source.close_and_wait("seen")
        yield Lowered(program, path, {**env, "IKET_TUI": ""}, seq)
    finally:
        gate.touch()
        program.kill()
        program.wait()
        patch.undo()
        shutil.rmtree(runtime, ignore_errors=True)


def _ask(path: Path, compile_id: int, seq: int, which: str) -> m.Message:
    source = SocketSource(path)
    try:
        source.connect()
        return fetch_ir(source, compile_id, seq, which)
    finally:
        source.close_and_wait("done")


def _tvm_prints() -> dict[str, str]:
    """The TVMScript TVM prints for vector_add's module before and after PASS, lowered here."""
    from iket_tui.demo import kernels

    return kernels.printed_around("vector_add", PASS)


def test_the_ir_around_a_pass_is_what_tvm_prints(lowered: Lowered) -> None:
    newest = max(lowered.seq)
    answer = _ask(lowered.path, newest, lowered.seq[newest], "both")
    assert answer["ok"] and answer["name"] == PASS
    expected = _tvm_prints()
    assert answer["before"] == expected["before"]
    assert answer["after"] == expected["after"]
    assert answer["before"] != answer["after"]


def test_the_ir_command_prints_before_after_and_diff(lowered: Lowered) -> None:
    newest = max(lowered.seq)
    common = ["ir", str(lowered.program.pid), "--compile", str(newest), "--pass", str(lowered.seq[newest])]
    run = [sys.executable, "-m", "iket_tui", *common]
    diff = subprocess.run(run, capture_output=True, text=True, timeout=WAIT_S, env=lowered.env)
    assert diff.returncode == 0, diff.stderr
    assert diff.stdout.startswith(f"--- before {PASS}\n+++ after {PASS}\n")
    before = subprocess.run([*run, "--before"], capture_output=True, text=True, timeout=WAIT_S, env=lowered.env)
    assert before.returncode == 0 and before.stdout.startswith("# from tvm.script import ir as I")


def test_the_ir_command_in_json_holds_the_text_it_prints(lowered: Lowered) -> None:
    newest = max(lowered.seq)
    common = ["ir", str(lowered.program.pid), "--compile", str(newest), "--pass", str(lowered.seq[newest])]
    run = [sys.executable, "-m", "iket_tui", *common]
    printed = subprocess.run([*run, "--after"], capture_output=True, text=True, timeout=WAIT_S, env=lowered.env)
    done = subprocess.run(
        [*run, "--after", "--format", "json"], capture_output=True, text=True, timeout=WAIT_S, env=lowered.env
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer == {
        "target": answer["target"],
        "compile": newest,
        "seq": lowered.seq[newest],
        "view": "after",
        "text": answer["text"],
    }
    assert answer["text"].startswith("# from tvm.script import ir as I")
    assert answer["text"] + ("" if answer["text"].endswith("\n") else "\n") == printed.stdout  # exactly as held
    assert str(lowered.program.pid) in answer["target"] or str(lowered.path) in answer["target"]


def test_a_compile_beyond_the_kept_number_says_so(lowered: Lowered) -> None:
    oldest = min(lowered.seq)
    with pytest.raises(SourceError, match=f"compile {oldest} is no longer held \\(the agent keeps the last 1\\)"):
        _ask(lowered.path, oldest, lowered.seq[oldest], "before")
    done = subprocess.run(
        [sys.executable, "-m", "iket_tui", "ir", str(lowered.program.pid), "--compile", str(oldest), "--pass", "3"],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        env=lowered.env,
    )
    assert done.returncode == 2
    kept = f"compile {oldest} is no longer held (the agent keeps the last 1)"
    assert done.stderr.splitlines() == [f"iket-tui: no IR around pass 3 of compile {oldest}: {kept}"]


def test_a_running_pass_has_its_ir_before_and_none_after(stuck: Stuck) -> None:
    compile_id, seq = _running_pass(stuck.path)
    answer = _ask(stuck.path, compile_id, seq, "both")
    assert answer["ok"] and answer["name"] == STUCK_PASS
    assert answer["before"].startswith("# from tvm.script import ir as I")
    assert answer["after"] is None
    assert answer["after_missing"] == f"pass {seq} ({STUCK_PASS}) has not finished: there is no IR after it yet"
    assert view_of(answer, "diff") == f"no IR after it: {answer['after_missing']}\n"


def test_the_ir_pane_of_the_app_on_the_running_pass(stuck: Stuck, tmp_path: Path) -> None:
    async def scenario() -> None:
        app = IketApp(SocketSource(stuck.path))
        async with app.run_test(size=(160, 48)) as pilot:
            await _until(pilot, lambda: isinstance(app.view.cursor, PassNode) and app.view.cursor.name == STUCK_PASS)
            await pilot.press("i")
            await _until(pilot, lambda: isinstance(app.screen, IRScreen))
            screen = app.screen
            assert isinstance(screen, IRScreen)
            screen.save_dir = tmp_path
            await _until(pilot, lambda: screen.title_text().startswith("IR before"))
            assert f"{STUCK_PASS} (pass " in screen.title_text()
            assert screen.text.startswith("# from tvm.script import ir as I")
            await pilot.press("d")
            await _until(pilot, lambda: screen.text.startswith("no IR after it: pass "))
            await pilot.press("b", "w")
            saved = list(tmp_path.glob("iket-ir-c*-p*-before.py"))
            assert len(saved) == 1 and saved[0].read_text() == screen.text
            await pilot.press("escape")
            assert not isinstance(app.screen, IRScreen)

    asyncio.run(scenario())


def test_searching_the_ir_of_a_pass(lowered: Lowered) -> None:
    """``/`` finds every occurrence the ``ir`` command prints, in each view; ``n`` and ``N`` go
    from one to the next, wrapping, and scroll the view to show it."""
    newest = max(lowered.seq)
    seq = lowered.seq[newest]
    printed = {view: _printed(lowered, newest, seq, view) for view in ("before", "after", "diff")}
    term = "T.sblock"  # a capital: the case counts, as for str.count
    counts = {view: text.count(term) for view, text in printed.items()}
    assert counts["before"] >= 4 and counts["diff"] >= 1

    async def scenario() -> None:
        app = IketApp(SocketSource(lowered.path), follow=False)
        async with app.run_test(size=(100, 12)) as pilot:
            await _until(pilot, lambda: _pass_in(app, newest) is not None)
            node = _pass_in(app, newest)
            assert node is not None and node.seq == seq
            app.rows.reveal(node)
            app.view.sync()
            app.view.select(node)
            await pilot.press("i")
            await _until(pilot, lambda: isinstance(app.screen, IRScreen) and app.screen.shown == "diff")
            screen = app.screen
            assert isinstance(screen, IRScreen)
            assert screen.text.rstrip("\n") == printed["diff"].rstrip("\n")

            await pilot.press("slash", *term, "enter")  # its "b" is typed, not a switch to the IR before
            assert not screen.search_bar.display and screen.shown == "diff"
            assert screen.search_status() == f"match 1 of {counts['diff']}"
            assert screen.title_text().endswith(f" lines · match 1 of {counts['diff']}")
            _assert_current_match_on_screen(screen, term)

            await pilot.press("b")
            assert screen.shown == "before" and screen.text.rstrip("\n") == printed["before"].rstrip("\n")
            assert screen.search_status() == f"match 1 of {counts['before']}"
            seen = [(screen.body.current, screen.body.scroll_offset.y)]
            _assert_current_match_on_screen(screen, term)
            for _ in range(counts["before"]):
                await pilot.press("n")
                seen.append((screen.body.current, screen.body.scroll_offset.y))
                _assert_current_match_on_screen(screen, term)
            assert [current for current, _ in seen] == [*range(counts["before"]), 0]
            assert len({top for _, top in seen}) > 1, "n never scrolled the view"
            await pilot.press("N")
            assert screen.search_status() == f"match {counts['before']} of {counts['before']}"
            _assert_current_match_on_screen(screen, term)
            await pilot.press("N")
            assert screen.search_status() == f"match {counts['before'] - 1} of {counts['before']}"

            await pilot.press("a")  # the same search, from where the view was
            assert screen.shown == "after" and screen.search_status().endswith(f" of {counts['after']}")
            _assert_current_match_on_screen(screen, term)
            after = screen.search_status()

            await pilot.press("slash", *"NoSuchName", "escape")
            assert not screen.search_bar.display and screen.shown == "after"
            assert screen.search_status() == after
            await pilot.press("slash", *"NoSuchName", "enter")
            assert screen.search_status() == "no match for NoSuchName"
            assert screen.title_text().endswith(" lines · no match for NoSuchName")
            assert screen.body.matches is not None and len(screen.body.matches) == 0
            await pilot.press("n")
            assert screen.search_status() == "no match for NoSuchName"

    asyncio.run(scenario())


def _printed(lowered: Lowered, compile_id: int, seq: int, view: str) -> str:
    """What ``iket-tui ir`` prints for ``view`` of the pass."""
    command = [sys.executable, "-m", "iket_tui", "ir", str(lowered.program.pid), "--compile", str(compile_id)]
    done = subprocess.run(
        [*command, "--pass", str(seq), f"--{view}"], capture_output=True, text=True, timeout=WAIT_S, env=lowered.env
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _pass_in(app: IketApp, compile_id: int) -> PassNode | None:
    return next((p for p in app.pass_tree.passes if p.name == PASS and p.compile.id == compile_id), None)


def _assert_current_match_on_screen(screen: IRScreen, term: str) -> None:
    """The current match's line is on screen and shows the term (the view scrolled to it)."""
    body = screen.body
    assert body.matches is not None and body.current is not None
    line = body.matches.line_of(body.current)
    top = body.scroll_offset.y
    assert top <= line < top + body.scrollable_content_region.height
    assert term in body.line_text(line - top)


def _running_pass(path: Path) -> tuple[int, int]:
    """The compile and sequence number of the stuck pass, from a client's catch-up."""
    source = SocketSource(path)
    try:
        source.connect()
        for batch in source.batches():
            for item in batch.messages:
                msg = m.message_of(item) if isinstance(item, list) else item
                if msg["type"] == m.PASS_START and msg["name"] == STUCK_PASS:
                    return msg["compile"], msg["seq"]
        raise AssertionError("the stuck pass was not in the catch-up")
    finally:
        source.close_and_wait("seen")


async def _until(pilot: Any, condition: Any) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await pilot.pause(0.05)
