"""Pass contexts made before the agent starts (in code, once TVM is imported): one without
instruments, one with an instrument of the program's own. The TIR kernel is compiled in each, then
in TVM's default context once the agent is stopped. Prints as JSON how many passes the program's
instrument saw and how many instruments a context made after the stop has; then waits for the
file named by IKET_TEST_GATE."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import tvm
from tvm.ir.instrument import pass_instrument

import iket_tui.agent
from iket_tui.demo.tvm_program import vector_add


@pass_instrument
class Counter:
    def __init__(self) -> None:
        self.passes = 0
        self.contexts = 0

    def enter_pass_ctx(self) -> None:
        self.contexts += 1

    def run_before_pass(self, mod: Any, info: Any) -> None:
        self.passes += 1


plain = tvm.transform.PassContext(opt_level=3)
counter = Counter()
instrumented = tvm.transform.PassContext(instruments=[counter])
iket_tui.agent.start(wait_for_client_s=120)
with plain:
    tvm.compile(vector_add, target="llvm")
with instrumented:
    tvm.compile(vector_add, target="llvm")
iket_tui.agent.stop()
tvm.compile(vector_add, target="llvm")
after_stop = len(tvm.transform.PassContext().instruments)
print(json.dumps({"passes": counter.passes, "contexts": counter.contexts, "after_stop": after_stop}), flush=True)
gate = Path(os.environ["IKET_TEST_GATE"])
deadline = time.monotonic() + 300
while not gate.exists() and time.monotonic() < deadline:
    time.sleep(0.05)
sys.exit(0)
