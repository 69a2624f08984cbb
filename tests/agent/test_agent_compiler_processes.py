"""The watcher of a codegen step's processes, on a real spinning child of this thread: what it
tells while the child runs and when the step ends, what a stacks answer names, and what a
client that attaches late is told of a process still running."""

from __future__ import annotations

import os
import subprocess
import time

from iket_tui.agent import requests
from iket_tui.agent.compiler_processes import POLL_S, update_every_ns
from iket_tui.agent.registry import Registry
from iket_tui.protocol import messages as m

S = 1_000_000_000
SPIN = "i=0; while [ $i -lt 100000000 ]; do i=$((i+1)); done"


def told(registry: Registry) -> list[m.Message]:
    return [msg for msg in registry.attach(10_000)[1].messages if isinstance(msg, dict)]


def wait_for(condition: object, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_spinning_child_is_told_with_its_command_and_growing_cpu_then_ended_before_the_step() -> None:
    registry = Registry()
    registry.emit(m.compile_begin(compile=1, label="add", kernel="add", target=None, t_ns=time.monotonic_ns()))
    watch = registry.compiler_processes.watch(1, "target.build.tilelang_cuda")
    child = subprocess.Popen(["sh", "-c", SPIN, "spinner"])
    try:

        def running() -> list[m.Message]:
            return [msg for msg in told(registry) if msg["type"] == m.COMPILE_PROCESS and msg["pid"] == child.pid]

        wait_for(lambda: len(running()) >= 2)
        first, second = running()[:2]
        assert (first["compile"], first["step"], first["ppid"]) == (1, "target.build.tilelang_cuda", os.getpid())
        assert (first["name"], first["argv"][:2], first["state"]) == ("sh", ["sh", "-c"], m.COMPILER_RUNNING)
        assert second["cpu_ns"] > first["cpu_ns"] and second["running_ns"] > first["running_ns"]
        assert second["t_ns"] - first["t_ns"] >= update_every_ns(first["running_ns"])  # not every look

        stacks = requests.answer(m.request(id=7, what=m.WHAT_STACKS), registry.ir_store, registry)
        (named,) = stacks["processes"]
        assert (named["pid"], named["name"], named["compile"]) == (child.pid, "sh", 1)
        assert named["cpu_ns"] >= second["cpu_ns"] and named["running_ns"] > 0
        assert registry.compiler_processes.pids_of(1) == [child.pid]
    finally:
        child.kill()
        child.wait()
    registry.compiler_processes.done(watch)
    (ended,) = [msg for msg in running() if msg["state"] != m.COMPILER_RUNNING]
    assert ended["state"] == m.COMPILER_ENDED and ended["exit"] is None
    assert requests.answer(m.request(id=8, what=m.WHAT_STACKS), registry.ir_store, registry)["processes"] == []
    count = len(running())
    time.sleep(3 * POLL_S)
    assert len(running()) == count  # the step ended: nothing more is told of it


def test_a_late_client_is_told_the_latest_state_of_a_running_process_until_its_compile_ends() -> None:
    registry = Registry(backlog=1)
    registry.emit(m.compile_begin(compile=1, label="add", kernel="add", target=None, t_ns=1))
    registry.emit(m.codegen_begin(compile=1, t_ns=2, name="target.build.tilelang_cuda"))

    def ptxas(cpu: int, t: int) -> m.Message:
        return m.compile_process(
            compile=1,
            step="target.build.tilelang_cuda",
            pid=42,
            ppid=41,
            name="ptxas",
            argv=["ptxas"],
            state=m.COMPILER_RUNNING,
            running_ns=t,
            cpu_ns=cpu,
            exit=None,
            t_ns=t,
        )

    registry.emit(ptxas(1 * S, 3))
    registry.emit(ptxas(2 * S, 4))
    registry.emit(m.heartbeat(t_ns=5, produced=4, dropped=0, open_passes=0))  # the backlog holds only this
    caught = [msg["type"] if isinstance(msg, dict) else msg[0] for msg in registry.attach(10)[1].messages]
    assert caught == [m.COMPILE_BEGIN, m.CODEGEN_BEGIN, m.COMPILE_PROCESS, m.HEARTBEAT]
    process = next(msg for msg in registry.attach(10)[1].messages if isinstance(msg, dict) and msg.get("pid") == 42)
    assert process["cpu_ns"] == 2 * S  # the latest
    registry.emit(m.compile_end(compile=1, label="add", t_ns=6, duration_ns=5, ok=True))
    registry.emit(m.heartbeat(t_ns=7, produced=6, dropped=0, open_passes=0))
    assert [msg["type"] for msg in registry.attach(10)[1].messages if isinstance(msg, dict)] == [m.HEARTBEAT]
