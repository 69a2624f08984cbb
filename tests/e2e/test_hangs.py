"""A compile that never returns, handed to someone and got out of, with real TileLang: a program
whose pass of its own loops in Python (or blocks in libc's ``pause()``) is captured with
``iket-tui repro PID --stuck``, the reproducer hangs the same way in a fresh process without the
program, and ``iket-tui abort PID`` makes the compile fail while the program goes on to its next
compile. A pass blocked in native code on the main thread (``pause()``) is interrupted by the
abort's signal, as a wait is. The same from the app: ``R`` writes the reproducer, ``A`` then ``y`` aborts.

Where the pass lives is the user's: in the program's own main script (the reproducer takes the
pass from it without running the program, under the same pass context), in a file of its own
while it waits inside an installed library (the pass is named, not the library), or in a
package (``--pass-source``, relative imports and all)."""

from __future__ import annotations

import ast
import asyncio
import os
import re
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

import filelock  # installed with TileLang (through torch)
from live_target import WAIT_S, Stuck, main_code, socket_of, stacks_of

from iket_tui.durations import duration
from iket_tui.model.nodes import FAILED
from iket_tui.model.session import Session
from iket_tui.model.visible_rows import Row
from iket_tui.protocol import messages as m
from iket_tui.repro import write_hang
from iket_tui.sources.reading import read_recording
from iket_tui.sources.requests import ask
from iket_tui.sources.socket import SocketSource
from iket_tui.ui.app import IketApp
from iket_tui.ui.hang_screens import AbortPane, ReproPane
from iket_tui.ui.row_painter import Columns, RowState, RowStyles, paint_row

TARGETS = Path(__file__).parent / "targets"
PASSES = TARGETS / "hang_passes.py"
SCRIPT = TARGETS / "own_script.py"
PACKAGE = TARGETS / "script_package"
SPIN_CODE = "while turns >= 0:  # a Python loop that never ends"
PAUSE_CODE = "_libc.pause()  # blocks in native code until a signal is handled"
LOCK_CODE = 'with filelock.FileLock(os.environ["IKET_TEST_LOCK"]):  # waits inside filelock while another holds it'
SCRIPT_CODE = "while turns >= 0:  # the script's own loop that never ends"
PACKAGE_CODE = "while turns >= 0:  # the package's own loop that never ends"
SEEN = (
    "context: opt_level=2 config=['tirx.disable_vectorize', 'tl.disable_tma_lower'] required=['own_script.Spin'] "
    "disabled=['own_script.NeverRuns']"
)
"""What own_script.py's pass prints of its pass context: the program's, and the reproducer's."""
PROGRAMS = {"spin": "hang_target.py", "pause": "hang_target.py", "lock": "hang_target.py", "script": "own_script.py"}
FUNCTIONS = {"spin": "spin_forever", "pause": "pause_forever", "lock": "wait_for_lock", "script": "spin_in_script"}
DURATION = r"(\d+(\.\d+)? (ns|µs|ms|s)|\d+m \d\ds|\d+h \d\dm)"
"""A duration as :func:`iket_tui.durations.duration` writes it."""
ABORTED = re.compile(rf"aborted by iket-tui after {DURATION} in hang_test\.(SpinForever|PauseForever)")


@dataclass
class Hanging:
    program: subprocess.Popen[str]
    pid: str
    path: Path
    gate: Path
    recording: Path
    recorder: subprocess.Popen[str]
    env: dict[str, str]

    def output_until(self, line: str) -> list[str]:
        """The program's lines up to and including ``line`` (it prints as it goes)."""
        assert self.program.stdout is not None
        seen: list[str] = []
        while line not in seen:
            got = self.program.stdout.readline()
            assert got, f"the program ended before saying {line!r}: {seen}"
            seen.append(got.rstrip("\n"))
        return seen

    def finish(self) -> tuple[list[m.Message], Session]:
        """Let the program end, and the recording of its stream close; what was recorded."""
        self.gate.touch()
        assert self.program.wait(WAIT_S) == 0
        assert self.recorder.wait(WAIT_S) == 0, self.recorder.stderr
        messages, _ = read_recording(self.recording)
        session = Session()
        session.apply(messages)
        return messages, session


def _iket(*args: str, env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "iket_tui", *args], capture_output=True, text=True, timeout=WAIT_S, env=env, cwd=cwd
    )


def _fresh_python(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], float]:
    """``python ARGS`` in ``cwd``, without the agent and without the program; and how long it took."""
    env = {key: value for key, value in (env or os.environ).items() if not key.startswith("IKET_TUI")}
    started = time.monotonic()
    done = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=WAIT_S, cwd=cwd, env=env)
    return done, time.monotonic() - started


@pytest.fixture
def hanging(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Hanging]:
    """The program stuck in its own pass (the test's parameter: ``spin``, ``pause``, ``lock``,
    whose lock this process holds meanwhile, or ``script``, the pass in own_script.py), under the
    agent, recorded from its start by ``iket-tui record``."""
    runtime = Path(tempfile.mkdtemp(prefix="ik"))  # short: socket paths are limited to 107 bytes
    patch = pytest.MonkeyPatch()
    patch.setenv("XDG_RUNTIME_DIR", str(runtime))
    lock = filelock.FileLock(tmp_path / "held.lock")
    lock.acquire()
    env = {
        **os.environ,
        "IKET_TUI": "1",
        "IKET_TEST_HANG": request.param,
        "IKET_TEST_GATE": str(tmp_path / "gate"),
        "IKET_TEST_LOCK": str(tmp_path / "held.lock"),
    }
    program = subprocess.Popen(
        [sys.executable, PROGRAMS[request.param]], cwd=TARGETS, env=env, stdout=subprocess.PIPE, text=True
    )
    quiet = {**env, "IKET_TUI": ""}
    recorder: subprocess.Popen[str] | None = None
    try:
        path = socket_of(program)  # type: ignore[arg-type]
        recording = tmp_path / "run.msgpack"
        recorder = subprocess.Popen(
            [sys.executable, "-m", "iket_tui", "record", str(program.pid), "-o", str(recording)],
            env=quiet,
            stderr=subprocess.PIPE,
            text=True,
        )
        function = FUNCTIONS[request.param]
        deadline = time.monotonic() + WAIT_S
        while not any(function in frame["function"] for frame in _main_frames(stacks_of(path))):
            assert time.monotonic() < deadline, "the program never reached its hanging pass"
            time.sleep(0.2)
        yield Hanging(program, str(program.pid), path, tmp_path / "gate", recording, recorder, quiet)
    finally:
        program.kill()
        program.wait()
        if recorder is not None:
            recorder.kill()
            recorder.wait()
        lock.release()
        patch.undo()
        shutil.rmtree(runtime, ignore_errors=True)


def _main_frames(response: m.Message) -> list[dict[str, Any]]:
    main = next(thread for thread in response["threads"] if thread["main"])
    frames: list[dict[str, Any]] = main["frames"]
    return frames


def _reproduces(directory: Path, code: str, function: str, cwd: Path) -> None:
    """``repro.py --timeout 5`` in a fresh process: still running after 5 s, exit 3, with the stack."""
    ran, took = _fresh_python(str(directory / "repro.py"), "--timeout", "5", cwd=cwd)
    assert ran.returncode == 3, ran.stderr[-3000:]
    lines = ran.stdout.splitlines()
    assert lines[0] == "still running after 5 s: reproduced"
    assert lines[-2:] == [f'  File "{PASSES}", line {_line_of(code)}, in {function}', f"    {code}"]
    assert 5 <= took < 60


def _line_of(code: str, path: Path = PASSES) -> int:
    return next(number for number, line in enumerate(path.read_text().splitlines(), 1) if line.strip() == code)


def _tree_rows(session: Session, compile_id: int) -> tuple[str, str]:
    """The compile's row and its failed pass's row, as the tree paints them."""
    comp = session.tree.compiles[compile_id - 1]
    assert comp.failing is not None
    look = RowState(expanded=True, cursor=False, now_ns=session.last_t_ns, search="")
    paint = [
        paint_row(session.tree, Row(node, level, True), look, Columns(160), RowStyles())
        for node, level in ((comp, 1), (comp.failing, 4))
    ]
    return paint[0].text.rstrip(), paint[1].text.rstrip()


@pytest.mark.parametrize("hanging", ["spin"], indirect=True)
def test_a_python_loop_is_reproduced_elsewhere_and_aborted_while_the_program_goes_on(
    hanging: Hanging, tmp_path: Path
) -> None:
    out = tmp_path / "repro"
    written = _iket("repro", hanging.pid, "--stuck", "-o", str(out), env=hanging.env)
    assert written.returncode == 0, written.stderr
    (said,) = written.stderr.splitlines()
    assert re.fullmatch(
        rf"iket-tui: wrote a reproducer of the stuck pass hang_test\.SpinForever \(pass \d+ of compile 1, running "
        rf"for {DURATION}\) to {out}: hang_test\.SpinForever is a pass of your own, in {PASSES} \(spin_forever\): "
        rf"python {out}/repro\.py imports that file to rebuild it, so it needs that file too "
        r"\(--pass-source FILE where it lives elsewhere\)",
        said,
    ), said
    assert sorted(path.name for path in out.iterdir()) == [
        "before.py",
        "config.json",
        "module.json",
        "repro.py",
        "stack.txt",
    ]
    assert SPIN_CODE in (out / "stack.txt").read_text()
    _reproduces(out, SPIN_CODE, "spin_forever", tmp_path)

    aborted = _iket("abort", hanging.pid, env=hanging.env)
    assert aborted.returncode == 0, aborted.stderr
    (line,) = aborted.stdout.splitlines()
    message = line.removeprefix("compile 1 failed: CompileAborted: ").removesuffix("; the program goes on")
    assert ABORTED.fullmatch(message), line
    assert hanging.output_until("vector_add lowered") == [
        "hanging",
        f"caught CompileAborted: {message}",
        "vector_add lowered",
    ]

    # Nothing runs now: asking again is one line and exit code 2, as is a target that is not there.
    for args in (("abort", hanging.pid), ("repro", hanging.pid, "--stuck", "-o", str(tmp_path / "late"))):
        late = _iket(*args, env=hanging.env)
        assert late.returncode == 2 and late.stdout == ""
        (why,) = late.stderr.splitlines()
        assert why.endswith(f": no compile is running in pid {hanging.pid} now"), why
    gone = _iket("abort", "999999", env=hanging.env)
    assert (gone.returncode, gone.stderr) == (2, "iket-tui: no process with pid 999999\n")

    messages, session = hanging.finish()
    first, second = session.tree.compiles
    assert (first.status, first.error, second.status.value) == (FAILED, f"CompileAborted: {message}", "done")
    assert first.failing is not None and (first.failing.name, first.failing.status) == (
        "hang_test.SpinForever",
        FAILED,
    )
    compile_row, pass_row = _tree_rows(session, 1)
    assert compile_row.startswith(f"  ▼ ✗ gemm CompileAborted: {message} ")
    assert re.fullmatch(rf" +▼ ✗ hang_test\.SpinForever +failed +pipeline_cuda +{DURATION} +{DURATION}", pass_row)

    # The failure was captured as any failure is, and `repro` on the recording makes a hang of it.
    again = tmp_path / "again"
    from_recording = _iket("repro", str(hanging.recording), "-o", str(again), env=hanging.env)
    assert from_recording.returncode == 0, from_recording.stderr
    assert from_recording.stderr.startswith(
        f"iket-tui: wrote a reproducer of compile 1 (hang_test.SpinForever) to {again}"
    )
    _reproduces(again, SPIN_CODE, "spin_forever", tmp_path)
    none = _iket("repro", str(hanging.recording), "--stuck", "-o", str(tmp_path / "none"), env=hanging.env)
    assert none.returncode == 2 and len(none.stderr.splitlines()) == 1
    assert "this recording holds no capture of a stuck pass" in none.stderr
    assert not any(msg.get("what") == m.WHAT_STUCK for msg in messages if isinstance(msg, dict))


@pytest.mark.parametrize("hanging", ["pause"], indirect=True)
def test_a_pass_blocked_in_native_code_is_reproduced_and_the_abort_interrupts_it(
    hanging: Hanging, tmp_path: Path
) -> None:
    # A client that records the stream and asks for the capture: the recording holds it.
    recorded = tmp_path / "asked.msgpack"
    source = SocketSource(hanging.path, record_to=recorded)
    try:
        source.connect()
        capture = ask(source, m.WHAT_STUCK)
    finally:
        source.close_and_wait("done")
    assert capture["ok"] and capture["name"] == "hang_test.PauseForever"
    out = tmp_path / "repro"
    written = _iket("repro", str(recorded), "--stuck", "-o", str(out), env=hanging.env)
    assert written.returncode == 0, written.stderr
    assert written.stderr.startswith(
        f"iket-tui: wrote a reproducer of the stuck pass hang_test.PauseForever (pass {capture['seq']} of compile 1, "
        f"running for {duration(capture['running_ns'])}) to {out}: "
    )
    _reproduces(out, PAUSE_CODE, "pause_forever", tmp_path)

    # The agent's signal ends pause() on the main thread, and its handler raises the abort: the compile
    # fails with it and the program goes on, its own SIGUSR1 handler never run.
    aborted = _iket("abort", hanging.pid, env=hanging.env)
    assert aborted.returncode == 0, aborted.stdout + aborted.stderr
    (line,) = aborted.stdout.splitlines()
    message = line.removeprefix("compile 1 failed: CompileAborted: ").removesuffix("; the program goes on")
    assert ABORTED.fullmatch(message), line
    said = hanging.output_until("vector_add lowered")
    assert said == ["hanging", f"caught CompileAborted: {message}", "vector_add lowered"]

    _, session = hanging.finish()
    first, second = session.tree.compiles
    assert first.status is FAILED and first.error == f"CompileAborted: {message}"
    assert second.status.value == "done"


@pytest.mark.parametrize("hanging", ["script"], indirect=True)
def test_a_pass_in_the_programs_main_script_is_reproduced_without_running_the_program(
    hanging: Hanging, tmp_path: Path
) -> None:
    out = tmp_path / "repro"
    written = _iket("repro", hanging.pid, "--stuck", "-o", str(out), env=hanging.env)
    assert written.returncode == 0, written.stderr
    (said,) = written.stderr.splitlines()
    assert said.endswith(
        f") to {out}: own_script.Spin is a pass of your own, in {SCRIPT} (spin_in_script): {SCRIPT} is the program's "
        "main script: only the pass's definition and the script's imports are taken from it, never the program "
        f"itself; python {out}/repro.py needs that file too (--pass-source FILE where it lives elsewhere)"
    ), said
    assert hanging.output_until(SEEN) == ["the program runs", "the program builds its module", SEEN]
    script = (out / "repro.py").read_text()
    (context,) = [line for line in script.splitlines() if line.startswith("CONTEXT = ")]
    assert ast.literal_eval(context.removeprefix("CONTEXT = ")) == {
        "opt_level": 2,
        "required_pass": ["own_script.Spin"],
        "disabled_pass": ["own_script.NeverRuns"],
    }
    config = (out / "config.json").read_text()
    assert '"tl.disable_tma_lower"' in config and '"tirx.disable_vectorize"' in config

    # The pass alone, under the program's pass context, and nothing of the program ("the program runs", nor
    # the top-level "mod = gemm_module()" though the pass's parameter is named mod too).
    ran, took = _fresh_python(str(out / "repro.py"), "--timeout", "5", cwd=tmp_path)
    assert ran.returncode == 3, ran.stderr[-3000:]
    lines = ran.stdout.splitlines()
    assert lines[:2] == [SEEN, "still running after 5 s: reproduced"], ran.stdout[:3000]
    assert lines[-2:] == [
        f'  File "{SCRIPT}", line {_line_of(SCRIPT_CODE, SCRIPT)}, in spin_in_script',
        f"    {SCRIPT_CODE}",
    ]
    assert 5 <= took < 60

    # The same pass kept in a package: --pass-source imports the file as a module of its package.
    spin = PACKAGE / "spin.py"
    ran, _ = _fresh_python(str(out / "repro.py"), "--timeout", "3", "--pass-source", str(spin), cwd=tmp_path)
    assert ran.returncode == 3, ran.stderr[-3000:]
    lines = ran.stdout.splitlines()
    assert lines[0] == "still running after 3 s: reproduced"
    assert lines[-2:] == [
        f'  File "{spin}", line {_line_of(PACKAGE_CODE, spin)}, in spin_in_package',
        f"    {PACKAGE_CODE}",
    ]
    # A file that cannot be imported is one line; one whose import never ends is caught by the timeout.
    broken = PACKAGE / "broken.py"
    ran, _ = _fresh_python(str(out / "repro.py"), "--timeout", "3", "--pass-source", str(broken), cwd=tmp_path)
    assert (ran.returncode, ran.stdout, ran.stderr) == (
        1,
        "",
        f"repro: loading {broken} to make own_script.Spin failed: ModuleNotFoundError: No module named "
        "'script_package.missing' (line 5)\n",
    )
    endless = PACKAGE / "stuck_import.py"
    ran, took = _fresh_python(str(out / "repro.py"), "--timeout", "3", "--pass-source", str(endless), cwd=tmp_path)
    assert (ran.returncode, ran.stdout) == (1, ""), ran.stderr[-3000:]
    said = ran.stderr.splitlines()
    assert said[0] == (
        f"repro: loading {endless} to make own_script.Spin still runs after 3 s, before the pass runs (a longer "
        "--timeout lets a slow import finish). Where it is (innermost last):"
    )
    assert f'  File "{endless}", line 7, in <module>' in said
    assert 3 <= took < 60


@pytest.mark.parametrize("hanging", ["lock"], indirect=True)
def test_a_pass_waiting_inside_an_installed_library_is_named_and_reproduced(hanging: Hanging, tmp_path: Path) -> None:
    """The pass waits in filelock for a lock this test holds: the capture names the pass in its
    own file, not filelock, and the reproducer imports that file and waits the same way."""
    out = tmp_path / "repro"
    written = _iket("repro", hanging.pid, "--stuck", "-o", str(out), env=hanging.env)
    assert written.returncode == 0, written.stderr
    (said,) = written.stderr.splitlines()
    assert said.endswith(
        f") to {out}: hang_test.WaitForLock is a pass of your own, in {PASSES} (wait_for_lock): python {out}/repro.py "
        "imports that file to rebuild it, so it needs that file too (--pass-source FILE where it lives elsewhere)"
    ), said
    stack = (out / "stack.txt").read_text()
    assert f"{os.sep}filelock{os.sep}" in stack.splitlines()[-2], "the thread is inside filelock"

    ran, _ = _fresh_python(str(out / "repro.py"), "--timeout", "5", cwd=tmp_path, env=hanging.env)
    assert ran.returncode == 3, ran.stderr[-3000:]
    lines = ran.stdout.splitlines()
    assert lines[0] == "still running after 5 s: reproduced"
    pass_line = f'  File "{PASSES}", line {_line_of(LOCK_CODE)}, in wait_for_lock'
    assert pass_line in lines and f"{os.sep}filelock{os.sep}" in lines[-2]


def test_the_default_timeout_is_twice_what_the_pass_had_run(tmp_path: Path) -> None:
    """A capture of a pass that had run 24.3 s: repro.py waits 48.6 s unless told otherwise."""
    capture = {
        "compile": 2,
        "seq": 30,
        "name": "tl.InjectSoftwarePipeline",
        "running_ns": 24_300_000_000,
        "target": '{"kind": "cuda", "arch": "sm_90a"}',
        "config_json": None,
        "ir_script": "# the module\n",
        "ir_json": '{"root_index": 0, "nodes": [{"type": "None"}], "metadata": {}}',
        "pass_source": None,
    }
    found = write_hang(capture, tmp_path)
    assert found.note.endswith(" alone on the module it was given, for 48.6 s")
    ran, _ = _fresh_python(str(tmp_path / "repro.py"), "--help", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "how long to let it run (default 48.6)" in " ".join(ran.stdout.split())


def test_a_tilelang_pass_is_rebuilt_by_name_and_says_so_when_it_returns(stuck: Stuck, tmp_path: Path) -> None:
    """The demo's slowed tl.InjectSoftwarePipeline: TileLang's own pass runs in the reproducer,
    and it returns, since the slowness was the demo's Python around it, which the reproducer names."""
    assert "time.sleep(seconds)" in main_code(stuck.first)
    out = tmp_path / "repro"
    written = _iket("repro", str(stuck.program.pid), "--stuck", "-o", str(out), env=stuck.env)
    assert written.returncode == 0, written.stderr
    assert re.search(
        rf"\) to {out}: python {out}/repro\.py runs tl\.InjectSoftwarePipeline alone on the module it was given, "
        r"for \d+(\.\d)? s$",
        written.stderr.strip(),
    ), written.stderr
    script = (out / "repro.py").read_text()
    assert "When captured, the pass was running Python code of " in script and "kernels.py (run)" in script
    ran, _ = _fresh_python(str(out / "repro.py"), "--timeout", "60", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert re.fullmatch(
        r"tl\.InjectSoftwarePipeline returned after \d+\.\d s: the hang did not reproduce here\n", ran.stdout
    ), ran.stdout


@pytest.mark.parametrize("hanging", ["spin"], indirect=True)
def test_the_app_writes_the_reproducer_and_aborts_on_its_keys(
    hanging: Hanging, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # where R writes the reproducer

    async def scenario() -> None:
        app = IketApp(SocketSource(hanging.path))
        async with app.run_test(size=(160, 48)) as pilot:
            await _until(pilot, lambda: any(node.name == "hang_test.SpinForever" for node in app.pass_tree.passes))
            node = next(node for node in app.pass_tree.passes if node.name == "hang_test.SpinForever")
            app.following = False
            app.rows.reveal(node)
            app.view.sync()
            app.view.select(node)
            await pilot.press("R")
            await _until(pilot, lambda: isinstance(app.screen, ReproPane))
            pane = app.screen
            assert isinstance(pane, ReproPane)
            await _until(pilot, lambda: pane.written is not None)
            directory = tmp_path / f"iket-repro-c1-p{node.seq}"
            assert pane.directory == directory and (directory / "repro.py").is_file()
            assert f"python {directory / 'repro.py'} --timeout S" in pane.text()
            await pilot.press("escape")
            assert not isinstance(app.screen, ReproPane)

            await pilot.press("A")
            await _until(pilot, lambda: isinstance(app.screen, AbortPane))
            confirm = app.screen
            assert isinstance(confirm, AbortPane)
            assert confirm.text().startswith("Abort compile 1?\nIt has been in hang_test.SpinForever")
            await pilot.press("y")
            await _until(pilot, lambda: confirm.answer is not None)
            assert confirm.text().startswith("compile 1 aborted\ncompile 1 failed: CompileAborted: aborted by iket-tui")
            await pilot.press("escape")
            await _until(pilot, lambda: app.pass_tree.compiles[0].status is FAILED)
            assert node.status is FAILED

        _reproduces(directory, SPIN_CODE, "spin_forever", tmp_path)

    asyncio.run(scenario())
    assert hanging.output_until("vector_add lowered")[-1] == "vector_add lowered"


async def _until(pilot: Any, condition: Any) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await pilot.pause(0.05)
