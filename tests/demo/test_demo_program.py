"""The demo program as a process: what it prints, how it exits, what it leaves alone."""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from iket_tui.protocol import messages as m
from iket_tui.sources.reading import read_recording

PROGRAM = [sys.executable, "-m", "iket_tui.demo.program"]
WAIT_SECONDS = 240.0


def _environment() -> dict[str, str]:
    """This environment without the agent's start switch: the program must run on its own."""
    return {name: value for name, value in os.environ.items() if name != "IKET_TUI"}


def _run(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PROGRAM, *arguments],
        capture_output=True,
        text=True,
        env=_environment(),
        timeout=WAIT_SECONDS,
        check=False,
    )


def _outcomes(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith(("ok ", "failed "))]


@pytest.mark.tilelang
def test_program_reports_every_kernel_and_exits_0_despite_failures() -> None:
    pytest.importorskip("tilelang")
    done = _run("--kernels", "vector_add,layout_conflict,nvcc_error,slow_gemm", "--slow-seconds", "0.5", "--pause", "0")

    assert done.returncode == 0, done.stderr
    vector_add, layout_conflict, nvcc_error, slow_gemm = _outcomes(done.stdout)
    assert vector_add.startswith("ok vector_add in ")
    assert layout_conflict.startswith("failed layout_conflict after ")
    assert layout_conflict.endswith(
        "InternalError: Layout infer conflict between D_local and C_local in T.Parallel loop:"
    )
    assert nvcc_error.startswith("failed nvcc_error after ")
    assert "RuntimeError: " in nvcc_error
    assert nvcc_error.endswith('error: identifier "iket_demo_missing_device_function" is undefined')
    assert slow_gemm.startswith("ok slow_gemm in ")
    assert "compiling slow_gemm: the GEMM with tl.InjectSoftwarePipeline slowed down" in done.stdout


@pytest.mark.tilelang
def test_program_repeats_the_list_and_can_skip_nvcc() -> None:
    pytest.importorskip("tilelang")
    done = _run("--kernels", "vector_add,softmax", "--repeat", "2", "--pause", "0", "--lower-only")

    assert done.returncode == 0, done.stderr
    assert [line.split(" in ")[0] for line in _outcomes(done.stdout)] == [
        "ok vector_add",
        "ok softmax",
        "ok vector_add",
        "ok softmax",
    ]
    assert "lowering softmax: fp16 row softmax" in done.stdout


@pytest.mark.tilelang
def test_program_names_an_unknown_kernel_in_one_line() -> None:
    pytest.importorskip("tilelang")
    done = _run("--kernels", "gemm,matmul")

    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "iket_tui.demo.program: unknown demo kernel 'matmul'; known: vector_add, gemm, softmax, gemm_relu, "
        "traced_gemm, slow_gemm, stuck_gemm, layout_conflict, nvcc_error"
    ]
    assert _outcomes(done.stdout) == []


@pytest.mark.parametrize(
    ("arguments", "complaint"),
    [
        (("--repeat", "0"), "argument --repeat: must be 1 or more: '0'"),
        (("--pause", "soon"), "argument --pause: not a number: 'soon'"),
        (("--slow-seconds", "-1"), "argument --slow-seconds: must be 0 or more: '-1'"),
        (("--kernels", ","), "argument --kernels: no kernel named"),
        (("--colour",), "unrecognized arguments: --colour"),
    ],
)
def test_program_rejects_bad_arguments_in_one_line(arguments: tuple[str, ...], complaint: str) -> None:
    done = _run(*arguments)

    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"iket_tui.demo.program: {complaint}"]


def test_importing_the_program_compiles_nothing_and_loads_no_agent_or_ui() -> None:
    heavy = ("tilelang", "textual", "iket_tui.agent", "iket_tui.demo.kernels")
    probe = f"import sys, iket_tui.demo.program\nprint(sorted(m for m in {heavy!r} if m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=_environment(), timeout=60, check=True
    )

    assert done.stdout.strip() == "[]"


class _RunningProgram:
    """The demo program in the background, its stdout read line by line as it comes."""

    def __init__(self, *arguments: str) -> None:
        self.process = subprocess.Popen(
            [*PROGRAM, *arguments], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=_environment()
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def lines_until(self, wanted: str) -> list[str]:
        """Every line up to and including the first that starts with ``wanted``."""
        seen: list[str] = []
        while True:
            line = self._lines.get(timeout=WAIT_SECONDS)
            assert line is not None, f"the program ended before printing {wanted!r}: {seen}"
            seen.append(line)
            if line.startswith(wanted):
                return seen

    def rest(self) -> list[str]:
        """Every line still to come, until the program closes its stdout."""
        seen: list[str] = []
        while (line := self._lines.get(timeout=WAIT_SECONDS)) is not None:
            seen.append(line)
        return seen

    def interrupt(self) -> None:
        self.process.send_signal(signal.SIGINT)

    def exit_code(self) -> int:
        return self.process.wait(timeout=WAIT_SECONDS)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def start_program() -> Iterator[Callable[..., _RunningProgram]]:
    started: list[_RunningProgram] = []

    def start(*arguments: str) -> _RunningProgram:
        started.append(_RunningProgram(*arguments))
        return started[-1]

    yield start
    for program in started:
        program.close()


@pytest.mark.tilelang
def test_ctrl_c_stops_the_program_once_the_kernel_being_compiled_is_done(
    start_program: Callable[..., _RunningProgram],
) -> None:
    pytest.importorskip("tilelang")
    program = start_program(
        "--kernels", "slow_gemm", "--forever", "--lower-only", "--slow-seconds", "2", "--pause", "0"
    )
    program.lines_until("lowering slow_gemm")

    program.interrupt()

    assert program.exit_code() == 130
    rest = program.rest()
    assert "demo: stopping after this kernel; Ctrl-C again stops at once" in rest
    assert any(line.startswith("ok slow_gemm in ") for line in rest)
    assert rest[-1] == "demo: stopped by Ctrl-C"


@pytest.mark.tilelang
def test_a_second_ctrl_c_ends_the_program_at_once(start_program: Callable[..., _RunningProgram]) -> None:
    pytest.importorskip("tilelang")
    program = start_program("--kernels", "slow_gemm", "--lower-only", "--slow-seconds", "600")
    program.lines_until("lowering slow_gemm")
    program.interrupt()
    program.lines_until("demo: stopping after this kernel")

    program.interrupt()

    assert program.exit_code() == -signal.SIGINT
    assert program.rest() == []


STUCK = "the GEMM stuck in demo.WaitForAbort, a pass of the demo's own, until aborted"
LET_GO = "RuntimeError: the program ended while its compile waited in demo.WaitForAbort"


@pytest.mark.tilelang
def test_the_stuck_compile_waits_while_the_list_is_compiled_and_fails_as_the_program_ends() -> None:
    pytest.importorskip("tilelang")
    done = _run("--kernels", "vector_add,softmax", "--hang", "--lower-only", "--pause", "0")

    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no thread was left inside a compile as the interpreter shut down
    lines = done.stdout.splitlines()
    assert lines[1] == f"lowering stuck_gemm: {STUCK}"
    assert lines[2].startswith("lowering vector_add: ")  # the list starts once stuck_gemm waits
    vector_add, softmax, stuck = _outcomes(done.stdout)
    assert vector_add.startswith("ok vector_add in ") and softmax.startswith("ok softmax in ")
    assert stuck.startswith("failed stuck_gemm after ") and stuck.endswith(LET_GO)


@pytest.mark.tilelang
def test_stay_keeps_the_program_alive_after_the_list_until_ctrl_c(
    start_program: Callable[..., _RunningProgram],
) -> None:
    pytest.importorskip("tilelang")
    program = start_program("--kernels", "vector_add", "--lower-only", "--hang", "--stay", "--pause", "0")
    seen = program.lines_until("demo: every kernel compiled; staying alive until stopped (Ctrl-C)")
    assert any(line.startswith("ok vector_add in ") for line in seen)
    assert not any(line.startswith("failed stuck_gemm") for line in seen)  # it still waits

    with pytest.raises(subprocess.TimeoutExpired):
        program.process.wait(timeout=1.0)  # the list is done, and the program stays
    program.interrupt()

    assert program.exit_code() == 0
    rest = program.rest()
    assert rest[0] == "demo: stopped by Ctrl-C"  # at once: no kernel was being compiled
    assert rest[1].startswith("failed stuck_gemm after ") and rest[1].endswith(LET_GO)
    assert len(rest) == 2


@pytest.mark.tilelang
def test_without_nvcc_the_program_and_every_compile_label_say_so(tmp_path: Path) -> None:
    pytest.importorskip("tilelang")
    recording = tmp_path / "no-nvcc.msgpack"
    runtime = tempfile.mkdtemp(prefix="ik")  # short: socket paths are limited to 107 bytes
    program = [*PROGRAM, "--kernels", "nvcc_error", "--pause", "0"]
    done = subprocess.run(
        [sys.executable, "-m", "iket_tui", "run", "--no-ui", "--record", str(recording), "--", *program],
        capture_output=True,
        text=True,
        env={**_environment(), "CUDA_HOME": str(tmp_path / "no-cuda"), "XDG_RUNTIME_DIR": runtime},
        timeout=WAIT_SECONDS,
        check=False,
    )
    shutil.rmtree(runtime, ignore_errors=True)

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].endswith("; nvcc=not found: nvcc is not run, so nvcc_error does not fail"), lines[0]
    assert any(line.startswith("ok nvcc_error in ") for line in lines)
    messages, _ = read_recording(recording)
    (label,) = [msg["label"] for msg in messages if msg["type"] == m.COMPILE_BEGIN]
    assert label == "stage=lower, kernel=nvcc_error, target=sm_90a, nvcc=not found"
