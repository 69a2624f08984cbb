"""A compile stuck in its compiler, watched for real: TileLang's ``tilelang.compile`` runs the
``nvcc`` of ``CUDA_HOME`` (a fake one here: no GPU is needed to reach it), which starts a
``ptxas`` that spins on the CPU until the test lets it go. Under ``iket-tui run --no-ui
--record``, the recording holds both processes (pid, command, a CPU time that grows while
ptxas spins, their end), ``iket-tui stacks`` names them while they run, the model marks the
spinning one stuck past a small threshold, and ``dump`` shows their events."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("tilelang")

from iket_tui.model.nodes import DONE
from iket_tui.model.session import Session
from iket_tui.model.visible_rows import Row
from iket_tui.protocol import messages as m
from iket_tui.sources.reading import RecordingReader
from iket_tui.ui.header_bar import stuck_line
from iket_tui.ui.row_painter import Columns, RowState, RowStyles, paint_row

WAIT_S = 120.0
TARGET = Path(__file__).parent / "targets" / "spinning_nvcc.py"
STEP = "target.build.tilelang_cuda"
SPIN_S = 3.0  # how long ptxas spins at least, once it is seen: the agent looks every 0.5 s

NVCC = """#!/bin/sh
case "$*" in *--version*) echo "Cuda compilation tools, release 13.0, V13.0.88"; exit 0;; esac
echo "$PPID" > "$IKET_TEST_GATE.program"
"$(dirname "$0")/ptxas" -arch=sm_90a -O3 tvm_kernels.ptx
echo "ptxas fatal : spun until stopped"
exit 1
"""
PTXAS = """#!/bin/sh
echo "$$" > "$IKET_TEST_GATE.ptxas"
i=0
while [ ! -e "$IKET_TEST_GATE" ] && [ $i -lt 300000000 ]; do i=$((i+1)); done
"""


@dataclass
class SpunOut:
    recording: Path
    messages: list[m.Message]
    program_pid: int
    ptxas_pid: int
    stacks: str
    run_stdout: str


def _wait_for(path: Path, proc: subprocess.Popen[str]) -> int:
    deadline = time.monotonic() + WAIT_S
    while not (path.exists() and path.read_text().strip()):
        assert proc.poll() is None, f"iket-tui run ended early: {proc.communicate()}"
        assert time.monotonic() < deadline, f"{path.name} never came"
        time.sleep(0.05)
    return int(path.read_text())


@pytest.fixture(scope="module")
def spun_out(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SpunOut]:
    home = tmp_path_factory.mktemp("cuda")
    (home / "bin").mkdir()
    for name, text in (("nvcc", NVCC), ("ptxas", PTXAS)):
        (home / "bin" / name).write_text(text)
        (home / "bin" / name).chmod(0o755)
    gate = home / "gate"
    recording = home / "run.msgpack"
    runtime = Path(tempfile.mkdtemp(prefix="ik"))  # short: socket paths are limited to 107 bytes
    os.chmod(runtime, 0o700)
    env = {**os.environ, "CUDA_HOME": str(home), "IKET_TEST_GATE": str(gate), "XDG_RUNTIME_DIR": str(runtime)}
    env.pop("IKET_TUI", None)
    command = [sys.executable, "-m", "iket_tui", "run", "--no-ui", "--record", str(recording), "--"]
    run = subprocess.Popen(
        [*command, sys.executable, str(TARGET)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        program = _wait_for(Path(f"{gate}.program"), run)
        ptxas = _wait_for(Path(f"{gate}.ptxas"), run)
        spinning_since = time.monotonic()
        deadline = spinning_since + WAIT_S
        while True:  # until the agent has seen ptxas
            stacks = subprocess.run(
                [sys.executable, "-m", "iket_tui", "stacks", str(program)],
                env={**env, "IKET_TUI": ""},
                capture_output=True,
                text=True,
                timeout=WAIT_S,
            )
            if f"pid {ptxas}  ptxas" in stacks.stdout or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        time.sleep(max(0.0, SPIN_S - (time.monotonic() - spinning_since)))
    finally:
        gate.touch()
    out, err = run.communicate(timeout=WAIT_S)
    assert run.returncode == 0, err
    messages = [msg for msg in RecordingReader(recording) if isinstance(msg, dict)]
    yield SpunOut(recording, messages, program, ptxas, stacks.stdout + stacks.stderr, out)


def processes_of(spun: SpunOut, pid: int) -> list[m.Message]:
    return [msg for msg in spun.messages if msg.get("type") == m.COMPILE_PROCESS and msg["pid"] == pid]


def test_the_recording_holds_nvcc_and_ptxas_below_it_with_pid_command_and_growing_cpu_time(spun_out: SpunOut) -> None:
    assert "compile failed: RuntimeError" in spun_out.run_stdout
    ptxas = processes_of(spun_out, spun_out.ptxas_pid)
    assert len(ptxas) >= 3, ptxas
    assert [msg["state"] for msg in ptxas] == [m.COMPILER_RUNNING] * (len(ptxas) - 1) + [m.COMPILER_ENDED]
    assert {(msg["compile"], msg["step"], msg["name"]) for msg in ptxas} == {(1, STEP, "ptxas")}
    argv = ptxas[0]["argv"]
    assert argv[1].endswith("/bin/ptxas") and argv[2:] == ["-arch=sm_90a", "-O3", "tvm_kernels.ptx"]
    cpu = [msg["cpu_ns"] for msg in ptxas]
    assert cpu == sorted(cpu) and cpu[-1] > cpu[0] > 0  # it spun: its CPU time grew, told as it grew
    assert [msg["running_ns"] for msg in ptxas] == sorted(msg["running_ns"] for msg in ptxas)

    nvcc_pid = ptxas[0]["ppid"]
    nvcc = processes_of(spun_out, nvcc_pid)
    assert nvcc and {(msg["name"], msg["ppid"]) for msg in nvcc} == {("nvcc", spun_out.program_pid)}
    assert nvcc[-1]["state"] == m.COMPILER_ENDED
    kinds = [msg["type"] for msg in spun_out.messages]
    last_process = max(i for i, kind in enumerate(kinds) if kind == m.COMPILE_PROCESS)
    assert kinds.index(m.CODEGEN_END) > last_process  # every process's end is told before the step's


def test_stacks_names_the_compiles_running_processes(spun_out: SpunOut) -> None:
    text = spun_out.stacks
    assert "Compiler processes of running codegen steps:" in text, text
    assert "  compile 1, codegen tilelang_cuda:" in text
    ptxas_line = next(line for line in text.splitlines() if f"pid {spun_out.ptxas_pid}  ptxas" in line)
    nvcc_line = next(line for line in text.splitlines() if "  nvcc  (cpu " in line)
    assert ptxas_line.index("pid") > nvcc_line.index("pid")  # below the nvcc that started it
    assert "(cpu " in ptxas_line and ", running " in ptxas_line and "/bin/ptxas -arch=sm_90a" in ptxas_line


def test_the_spinning_ptxas_is_stuck_past_a_small_threshold_until_it_ends(spun_out: SpunOut) -> None:
    session = Session(stuck_after_ns=1_000_000_000)
    ptxas = processes_of(spun_out, spun_out.ptxas_pid)
    last_running = next(i for i, msg in enumerate(spun_out.messages) if msg is ptxas[-2])
    session.apply(spun_out.messages[: last_running + 1])
    now = ptxas[-2]["t_ns"]
    tree = session.tree
    (node,) = [node for node in tree.stuck_processes(now) if node.pid == spun_out.ptxas_pid]
    row = paint_row(tree, Row(node, 4, False), RowState(False, False, now), Columns(120), RowStyles()).text
    assert f"! ptxas pid {spun_out.ptxas_pid}  cpu " in row and " stuck " in row
    nvcc = node.parent
    assert nvcc is not None and nvcc.name == "nvcc" and tree.is_process_stuck(nvcc, now)  # waiting on ptxas as long
    assert stuck_line(tree, now).startswith(f"2 stuck, longest ptxas pid {spun_out.ptxas_pid} ")  # what nvcc waits on

    session.apply(spun_out.messages[last_running + 1 :])
    assert node.status is DONE and tree.stuck_processes(now) == [] and stuck_line(tree, now) == ""


def test_dump_shows_the_processes_events(spun_out: SpunOut) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "iket_tui", "dump", str(spun_out.recording)],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if " compile_process " in line]
    ended = next(line for line in lines if f"pid={spun_out.ptxas_pid} " in line and "state=ended" in line)
    assert "compile=1 ptxas step=target.build.tilelang_cuda" in ended
    assert " cpu=" in ended and " running=" in ended and "exit=-" in ended
