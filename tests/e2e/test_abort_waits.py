"""``iket-tui abort`` on compiles that wait, with real TileLang and real processes: a pass of
the program's own that waits on the main thread (an event, a lock, ``time.sleep``, ``select``,
``subprocess``) is interrupted and the compile fails with CompileAborted, which the program
catches as ``Exception`` and goes on, its own signal handlers untouched; a pass that swallows
the exception fails at the next pass; a codegen step waiting on an nvcc that never ends has
that nvcc and the processes under it ended, and the compile fails with what nvcc printed; on
another thread, the answer says the wait cannot be interrupted and names the child it waits
on; and the bundled demo goes on to its next kernel."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("tilelang")

from live_target import WAIT_S, socket_of, stacks_of

from iket_tui.agent import waited_processes

TARGETS = Path(__file__).parent / "targets"
PROGRAM = TARGETS / "waiting_passes.py"
DURATION = r"(\d+(\.\d+)? (ns|µs|ms|s)|\d+m \d\ds)"
ABORTED = rf"aborted by iket-tui after {DURATION} in wait_test\.Wait"


@dataclass
class Program:
    process: subprocess.Popen[str]
    env: dict[str, str]
    gate: Path

    @property
    def pid(self) -> str:
        return str(self.process.pid)

    def line(self) -> str:
        """The program's next line, TileLang's log lines left out."""
        assert self.process.stdout is not None
        while True:
            got = self.process.stdout.readline()
            assert got, "the program ended early"
            if "[TileLang:" not in got:
                return got.rstrip("\n")

    def abort(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "iket_tui", "abort", self.pid],
            capture_output=True,
            text=True,
            timeout=WAIT_S,
            env={**self.env, "IKET_TUI": ""},
        )

    def finish(self) -> None:
        self.gate.touch()
        assert self.process.wait(WAIT_S) == 0


@pytest.fixture
def start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """Starts a program under the agent (``start(ARGS..., env=...)``), killed after the test."""
    runtime = Path(tempfile.mkdtemp(prefix="ik"))  # short: socket paths are limited to 107 bytes
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    started: list[Program] = []

    def run(*args: str, env: dict[str, str] | None = None) -> Program:
        environment = {
            **os.environ,
            **(env or {}),
            "IKET_TUI": "1",
            "XDG_RUNTIME_DIR": str(runtime),
            "IKET_TEST_GATE": str(tmp_path / "gate"),
        }
        process = subprocess.Popen(
            [sys.executable, *args], cwd=TARGETS, env=environment, stdout=subprocess.PIPE, text=True
        )
        program = Program(process, environment, tmp_path / "gate")
        started.append(program)
        socket_of(process)  # type: ignore[arg-type]
        return program

    yield run
    for program in started:  # the program and whatever it left running (a failed test's children)
        waited_processes.end(waited_processes.with_descendants([program.process.pid]), grace_s=0.1)
        program.process.kill()
        program.process.wait()
    shutil.rmtree(runtime, ignore_errors=True)


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(") ")[2].startswith("Z")


def test_a_wait_on_the_main_thread_is_interrupted_and_the_program_goes_on(start: object) -> None:
    waits = ["event", "lock", "sleep", "select", "communicate", "swallow"]
    program = start(str(PROGRAM), *waits)  # type: ignore[operator]
    child = 0
    for how in waits:
        assert program.line() == f"waiting: {how} (SIGRTMAX the program's: True)"
        if how == "communicate":
            child = int(program.line().removeprefix("child "))
        aborted = program.abort()
        assert aborted.returncode == 0, (how, aborted.stdout, aborted.stderr)
        said = aborted.stdout.splitlines()
        message = said[0].removeprefix("compile ").partition(" failed: CompileAborted: ")[2]
        assert re.fullmatch(rf"{ABORTED}; the program goes on", message), said
        message = message.removesuffix("; the program goes on")
        if how == "communicate":
            assert said[1:] == [f"It was waiting on process {child} (sleep 600), which the abort left running."]
            assert not _gone(child)
            os.kill(child, signal.SIGKILL)
        else:
            assert said[1:] == []
        if how == "swallow":  # the pass went on; the next pass raised the abort again
            assert program.line() == "swallowed CompileAborted"
        assert program.line() == f"caught CompileAborted: {message}", how
    assert program.line() == "vector_add lowered"
    assert program.line() == "handled SIGUSR1 SIGUSR2 SIGALRM SIGRTMAX"
    assert program.line() == "other real-time handlers: []", "the agent's handler is gone with the compiles"
    program.finish()


def test_native_code_on_the_main_thread_that_lets_no_signal_in_is_said_to_be_there(start: object) -> None:
    """The abort's signal stays pending while sigsuspend lets in SIGUSR1 only: the answer says the
    main thread is inside native code; once SIGUSR1 ends sigsuspend, the abort takes effect."""
    program = start(str(PROGRAM), "suspend")  # type: ignore[operator]
    assert program.line() == "waiting: suspend (SIGRTMAX the program's: True)"
    deadline = time.monotonic() + WAIT_S
    while "libc.sigsuspend(mask)" not in str(stacks_of(socket_of(program.process))):  # type: ignore[arg-type]
        assert time.monotonic() < deadline, "the pass never reached sigsuspend"
        time.sleep(0.2)
    aborted = program.abort()
    assert aborted.returncode == 1, (aborted.stdout, aborted.stderr)
    said = aborted.stdout.splitlines()
    assert said[0] == (
        "compile 1 is inside native code: the abort's signal did not bring its thread, the main thread, back to "
        "Python (a C++ pass, say)."
    )
    assert said[1] == (
        f"It is in wait_test.Wait; its innermost Python frame: {PROGRAM}:{_line_of('libc.sigsuspend(mask)')} in "
        "wait: libc.sigsuspend(mask)"
    )
    assert said[-1].startswith(f"Next: `iket-tui stacks {program.pid} --native` shows where it is")
    os.kill(program.process.pid, signal.SIGUSR1)
    caught = program.line()
    assert re.fullmatch(rf"caught CompileAborted: {ABORTED}", caught), caught
    assert program.line() == "vector_add lowered"
    assert program.line() == "handled SIGUSR1 SIGUSR2 SIGALRM SIGRTMAX"
    assert program.line() == "other real-time handlers: []"
    program.finish()


def _line_of(code: str) -> int:
    return next(number for number, line in enumerate(PROGRAM.read_text().splitlines(), 1) if line.strip() == code)


@pytest.mark.parametrize("where", ["main", "--thread"])
def test_an_nvcc_that_never_ends_is_ended_and_the_compile_fails_with_its_output(
    start: object, tmp_path: Path, where: str
) -> None:
    """The nvcc that CUDA_HOME names prints, starts a process that ignores SIGTERM (a ptxas that
    spins), and waits for it: both are ended (that one killed after the grace), and what nvcc
    printed is the compile's error."""
    cuda = tmp_path / "cuda"
    (cuda / "bin").mkdir(parents=True)
    nvcc = cuda / "bin" / "nvcc"
    nvcc.write_text(
        "#!/bin/sh\n"
        'echo "nvcc: compiling $# arguments"\n'
        'echo "ptxas: still optimizing"\n'
        f"{sys.executable} -c "
        "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)' &\n"
        "wait\n"
    )
    nvcc.chmod(0o755)
    args = ["nvcc"] if where == "main" else ["--thread", "nvcc"]  # on any thread, its processes are ended
    program = start(str(PROGRAM), *args, env={"CUDA_HOME": str(cuda)})  # type: ignore[operator]
    deadline = time.monotonic() + WAIT_S
    while "'function': 'communicate'" not in str(stacks_of(socket_of(program.process))):  # type: ignore[arg-type]
        assert time.monotonic() < deadline, "nvcc never ran"
        time.sleep(0.2)
    started = time.monotonic()
    aborted = program.abort()
    assert aborted.returncode == 0, (aborted.stdout, aborted.stderr)
    assert 2 <= time.monotonic() - started < 30, "ptxas ignored SIGTERM: killed after the grace"
    said = aborted.stdout
    assert said.startswith("compile 1 failed: CompileAborted: Compilation error:\n"), said
    assert "\nnvcc: compiling 11 arguments\nptxas: still optimizing\n" in said
    ended = re.search(
        rf"\naborted by iket-tui after {DURATION} in target\.build\.tilelang_cuda: ended the compiler's processes it "
        r"waited on, nvcc \(pid (\d+)\), python[\d.]* \(pid (\d+)\); the program goes on\n$",
        said,
    )
    assert ended, said
    assert _gone(int(ended.group(4))) and _gone(int(ended.group(5)))
    caught = program.line()
    assert caught.startswith("caught CompileAborted: ")
    error = json.loads(caught.removeprefix("caught CompileAborted: "))
    assert error.startswith("Compilation error:\nnvcc: compiling 11 arguments\nptxas: still optimizing\n")
    line = said.rstrip("\n").removesuffix("; the program goes on").rpartition("\n")[2]
    assert error.endswith(f"\n{line}"), "the program's exception says what the abort ended, last"
    assert program.line() == "vector_add lowered"
    program.finish()


def test_a_wait_on_another_thread_is_said_and_its_child_named(start: object) -> None:
    program = start(str(PROGRAM), "--thread", "communicate")  # type: ignore[operator]
    assert program.line() == "waiting: communicate (SIGRTMAX the program's: True)"
    child = int(program.line().removeprefix("child "))
    aborted = program.abort()
    assert aborted.returncode == 1, (aborted.stdout, aborted.stderr)
    said = aborted.stdout.splitlines()
    assert said[0] == (
        "compile 1 runs on thread tuning, not the main thread, and is inside native code: its thread has run no "
        "Python since the abort was asked, and a wait there cannot be interrupted."
    )
    assert said[1].startswith("It is in wait_test.Wait; its innermost Python frame: ")
    assert said[3] == (
        f"It waits on process {child} (sleep 600): ending that (kill {child}) lets the thread go on, and the abort "
        "then takes effect."
    )
    assert not _gone(child), "the program's own child is left to the user"
    os.kill(child, signal.SIGTERM)
    caught = program.line()
    assert re.fullmatch(rf"caught CompileAborted: {ABORTED}", caught), caught
    assert program.line() == "vector_add lowered"
    program.finish()


def test_the_demo_goes_on_to_its_next_kernel(start: object) -> None:
    program = start(  # type: ignore[operator]
        "-m", "iket_tui.demo.program", "--kernels", "slow_gemm,vector_add", "--slow-seconds", "600", "--lower-only"
    )
    deadline = time.monotonic() + WAIT_S
    while "time.sleep(seconds)" not in str(stacks_of(socket_of(program.process))):  # type: ignore[arg-type]
        assert time.monotonic() < deadline, "the demo never reached its slowed pass"
        time.sleep(0.2)
    aborted = program.abort()
    assert aborted.returncode == 0, (aborted.stdout, aborted.stderr)
    lines = []
    while not lines or not lines[-1].startswith("ok vector_add"):
        lines.append(program.line())
    (failed,) = [line for line in lines if line.startswith("failed slow_gemm")]
    assert re.fullmatch(
        rf"failed slow_gemm after {DURATION}: CompileAborted: aborted by iket-tui after {DURATION} in "
        r"tl\.InjectSoftwarePipeline",
        failed,
    ), failed
    assert program.process.wait(WAIT_S) == 0
