"""Compiles on a thread of its own whose pass never returns (argv[1]: ``spin`` loops in Python,
``pause`` blocks in libc's ``pause()``), and asks its own agent what a client would: a capture
of the stuck pass, then an abort. Prints one JSON object: the answers (the module's texts
replaced by checks), what the compiling thread caught, and the events of both its compiles.

For ``pause``, once the abort has answered, SIGUSR1 is sent to the compiling thread, which
ends ``pause()``; the pending abort then takes effect."""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "e2e" / "targets"))

import hang_passes
from tilelang import tvm

import iket_tui.agent
from iket_tui.agent.registry import registry
from iket_tui.agent.requests import answer
from iket_tui.demo import kernels
from iket_tui.protocol import messages as m

WAIT_S = 120.0
mode = sys.argv[1]
hang = hang_passes.HANGS[mode]
hang_name = hang_passes.SPIN if mode == "spin" else hang_passes.PAUSE
expected_before = kernels.printed_around("gemm", hang_passes.PLACE)["before"]

iket_tui.agent.start()
queue, _ = registry.attach(100_000)
caught: dict[str, Any] = {}


def compiling() -> None:
    with hang_passes.before_pipelining(hang):
        try:
            kernels.lower("gemm")
            caught["gemm"] = "lowered"
        except iket_tui.agent.CompileAborted as exc:
            caught["gemm"] = f"{type(exc).__name__}: {exc}"
    kernels.lower("vector_add")
    caught["vector_add"] = "lowered"


def ask(what: str, **fields: Any) -> m.Message:
    return answer(m.request(id=1, what=what, **fields), registry.ir_store)


signal.signal(signal.SIGUSR1, lambda signum, frame: None)
nothing = ask(m.WHAT_STUCK)
thread = threading.Thread(target=compiling, name="compiling")
thread.start()
deadline = time.monotonic() + WAIT_S
while True:
    stuck = ask(m.WHAT_STUCK)
    if stuck.get("ok") and stuck["name"] == hang_name and stuck["running_ns"] > 500_000_000:
        break
    assert time.monotonic() < deadline, stuck
    time.sleep(0.1)
module = tvm.ir.load_json(stuck.pop("ir_json"))
stuck["ir_json_loads_to_ir_script"] = module.script() == stuck["ir_script"]
stuck["ir_script_is_the_module_before"] = stuck.pop("ir_script") == expected_before
stuck["compile_thread"] = registry.running.get(stuck["compile"]).thread_id == thread.ident  # type: ignore[union-attr]
bad = ask(m.WHAT_STUCK, compile="one")
other = ask(m.WHAT_STUCK, compile=stuck["compile"], seq=0)
aborted = ask(m.WHAT_ABORT, compile=stuck["compile"])
if mode == "pause":
    signal.pthread_kill(thread.ident, signal.SIGUSR1)  # type: ignore[arg-type]
thread.join(WAIT_S)
events = [m.as_message(item) for item in queue.take(100_000)]
print(
    json.dumps(
        {
            "nothing": nothing,
            "stuck": stuck,
            "bad": bad,
            "other": other,
            "abort": aborted,
            "caught": caught,
            "alive": thread.is_alive(),
            "events": [msg for msg in events if msg["type"] not in (m.PASS_START, m.PASS_END)],
            "observer_errors": registry.observer_errors,
            "running": [running.compile_id for running in registry.running.all()],
        },
        default=str,
    )
)
iket_tui.agent.stop()
