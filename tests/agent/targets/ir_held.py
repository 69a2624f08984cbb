"""Lowers the demo GEMM under the agent, as often as asked, and prints as JSON what the IR
store holds after each compile, the C heap in use then, and what a request for the IR of each
compile is answered at the end.

Run with the store's bounds in the environment (IKET_TUI_IR_COMPILES, IKET_TUI_IR_MEMORY).
"""

from __future__ import annotations

import gc
import json
import sys

import iket_tui.agent
from iket_tui.agent.ir_store import IRUnavailable, _heap_in_use
from iket_tui.agent.registry import registry
from iket_tui.demo import kernels

compiles = int(sys.argv[1])
iket_tui.agent.start()
ir_store = registry.ir_store
after_each = []
for _ in range(compiles):
    kernels.lower("gemm")
    gc.collect()
    after_each.append({"held": ir_store.held(), "heap": _heap_in_use()})
answers: dict[int, str] = {}
for compile_id in range(1, compiles + 1):
    try:
        ir_store.script(compile_id, 1, "before")
        answers[compile_id] = "held"
    except IRUnavailable as exc:
        answers[compile_id] = str(exc)
print(json.dumps({"after_each": after_each, "answers": answers, "measured": ir_store.measured}))
iket_tui.agent.stop()
