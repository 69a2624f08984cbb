"""``relax.build`` of the demo's model inside the program's own ``PassContext`` (opt_level 3, an
instrument of its own that records every pass it is told of and skips none, and PassTimingInstrument),
then a ``tvm.compile`` of the TIR kernel in the same context. Prints as JSON what its instruments saw;
then waits for the file named by IKET_TEST_GATE, when there is one."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import tvm
from tvm import relax
from tvm.ir.instrument import PassTimingInstrument, pass_instrument

from iket_tui.demo.tvm_program import MLP, vector_add


@pass_instrument
class Recorder:
    def __init__(self) -> None:
        self.seen: list[list[Any]] = []
        self.depth = 0
        self.contexts = 0

    def enter_pass_ctx(self) -> None:
        self.contexts += 1

    def should_run(self, mod: Any, info: Any) -> bool:
        return True

    def run_before_pass(self, mod: Any, info: Any) -> None:
        self.seen.append([str(info.name), self.depth, len(mod.functions)])
        self.depth += 1

    def run_after_pass(self, mod: Any, info: Any) -> None:
        self.depth -= 1


recorder = Recorder()
timing = PassTimingInstrument()
with tvm.transform.PassContext(opt_level=3, instruments=[recorder, timing]):
    relax.build(MLP, target="llvm")
    tvm.compile(vector_add, target="llvm")
    timed = timing.render()
print(json.dumps({"seen": recorder.seen, "contexts": recorder.contexts, "timed": "LegalizeOps" in timed}))
gate = os.environ.get("IKET_TEST_GATE")
deadline = time.monotonic() + 300
while gate and not Path(gate).exists() and time.monotonic() < deadline:
    time.sleep(0.05)
