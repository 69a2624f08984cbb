"""One rank of a simulated job across machines: the real agent, and a compile of a few passes
emitted as TileLang's observer reports them (so that 64 ranks idle in little memory and CPU),
then one more compile for each line read on standard input, until it closes. ``RANK`` is its
rank; the rank ``IKET_TEST_SLOW_RANK`` names stays in ``tl.LayoutInference`` in its first
compile, which the others finish in about a millisecond. It says ``ready`` once its agent
listens and its first compile is emitted, and ``done N`` after compile N."""

from __future__ import annotations

import os
import sys
import time

import iket_tui.agent
from iket_tui.agent.registry import registry
from iket_tui.protocol import messages as m

PASSES = ("tl.LegalizeNegativeIndex", "tl.Simplify", "tl.LayoutInference", "tl.LowerTileOp")
LABEL = "stage=jit-lower, kernel=gemm, backend=tvm_ffi"


def compile_once(number: int, *, stay_in: str | None = None) -> None:
    """Compile ``number``: its passes in order, or up to ``stay_in``, which it never leaves."""
    now = time.monotonic_ns
    begun = now()
    registry.emit(m.compile_begin(compile=number, label=LABEL, kernel="gemm", target="cuda", t_ns=begun))
    registry.emit(m.pass_context(m.PASS_CONTEXT_ENTER, compile=number, context=1, t_ns=now()))
    for seq, name in enumerate(PASSES):
        start = now()
        registry.emit(
            m.pass_start(compile=number, context=1, name=name, seq=seq, depth=0, parent=None, phase=None, t_ns=start)
        )
        if name == stay_in:
            return
        time.sleep(0.001)
        end = now()
        registry.emit(
            m.pass_end(
                compile=number,
                context=1,
                name=name,
                seq=seq,
                depth=0,
                parent=None,
                phase=None,
                t_ns=end,
                duration_ns=end - start,
            )
        )
    registry.emit(m.pass_context(m.PASS_CONTEXT_EXIT, compile=number, context=1, t_ns=now()))
    end = now()
    registry.emit(m.compile_end(compile=number, label=LABEL, t_ns=end, duration_ns=end - begun, ok=True))


iket_tui.agent.start()
slow = os.environ["RANK"] == os.environ.get("IKET_TEST_SLOW_RANK")
compile_once(1, stay_in="tl.LayoutInference" if slow else None)
print("ready", flush=True)
for number, _line in enumerate(sys.stdin, 2):
    compile_once(number)
    print(f"done {number}", flush=True)
