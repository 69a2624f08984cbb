"""A program that already uses TileLang's own instrumentation, run with and without the agent.

``instruments.py trace``: lowers a GEMM and a kernel failing in ``tl.LayoutInference`` (run
it with ``TL_LOWER_TRACE=html``). ``instruments.py profile``: compiles an add for sm_90a (run it
with ``TILELANG_PASS_PROFILE=1``). ``instruments.py observer LOG``: a user's own
``StackedPassInstrument`` with a ``PassEventObserver``, first in the user's own ``PassContext``
(a GEMM and the failing kernel), then registered as a TileLang tool over lowerings under nested
``pass_phase`` labels (one with a pass of the user's that runs ``tl.LayoutInference`` inside a
phase of its own) and the failing kernel; every callback the observers see is written to LOG
as JSON.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

import kernels
import tilelang
from tilelang import tvm
from tilelang.instrumentation import (
    IncompletePass,
    PassEvent,
    PassEventObserver,
    PassInstrumentationTool,
    StackedPassInstrument,
    pass_phase,
    register_pass_instrumentation_tool,
)

USER_PASS = "user.PhasedLayoutInference"
USER_PHASE = "user-layout"

tilelang.disable_cache()
mode = sys.argv[1]
target = tvm.target.Target(kernels.SM90)


class Observer(PassEventObserver):  # type: ignore[misc]
    """Writes down every callback, tagged with where it was attached and which compile it saw."""

    def __init__(self, log: list[list[Any]], tag: str) -> None:
        self.log = log
        self.tag = tag

    def enter_pass_context(self) -> None:
        self.log.append([self.tag, "enter"])

    def exit_pass_context(self) -> None:
        self.log.append([self.tag, "exit"])

    def pass_started(self, mod: Any, event: PassEvent) -> int:
        self.log.append(
            [self.tag, "start", event.name, event.sequence, event.depth, event.parent_sequence, event.phase]
        )
        return event.sequence

    def pass_finished(self, mod: Any, event: PassEvent, state: Any) -> None:
        self.log.append([self.tag, "finish", event.name, event.sequence, state])

    def passes_incomplete(self, passes: Sequence[IncompletePass], error: BaseException | None) -> None:
        self.log.append([self.tag, "incomplete", [p.name for p in passes], None if error is None else repr(error)])

    def callback_mismatch(self, actual: str, expected: str | None) -> None:
        self.log.append([self.tag, "mismatch", actual, expected])


def in_phase(factory: Callable[..., Any], phase: str) -> Callable[..., Any]:
    """``factory``'s pass, run inside a pass of the user's that sets a phase of its own around it."""

    def make(*args: Any, **kwargs: Any) -> Any:
        inner = factory(*args, **kwargs)

        def run(mod: Any, _ctx: Any) -> Any:
            with pass_phase(phase):
                return inner(mod)

        return tvm.transform.module_pass(run, opt_level=0, name=USER_PASS)

    return make


def lower_failing() -> None:
    try:
        kernels.lower(kernels.layout_conflict())
    except Exception as exc:
        print(f"layout_conflict failed: {type(exc).__name__}", flush=True)


if mode == "trace":
    kernels.lower(kernels.gemm())
    lower_failing()
elif mode == "profile":
    tilelang.compile(kernels.add(), target=target)
elif mode == "observer":
    log: list[list[Any]] = []
    # The user's instrument in the user's own PassContext, with no other tool registered.
    context_observer = StackedPassInstrument(Observer(log, "context"))
    with target, tvm.transform.PassContext(instruments=[context_observer]):
        kernels.lower(kernels.gemm())
        lower_failing()

    # The user's instrument as a TileLang tool, over lowerings under nested phases.
    compiles = iter(range(1, 100))

    class UserTool(PassInstrumentationTool):  # type: ignore[misc]
        def __init__(self) -> None:
            self.tag = f"tool {next(compiles)}"

        def create_pass_instrument(self) -> Any:
            return StackedPassInstrument(Observer(log, self.tag))

    register_pass_instrumentation_tool("user", UserTool)
    real_layout_inference = tilelang.transform.LayoutInference
    with pass_phase("outer"):
        kernels.lower(kernels.gemm())
        with pass_phase("inner"):
            tilelang.transform.LayoutInference = in_phase(real_layout_inference, USER_PHASE)
            try:
                kernels.lower(kernels.add())
            finally:
                tilelang.transform.LayoutInference = real_layout_inference
        lower_failing()
    with open(sys.argv[2], "w") as out:
        json.dump(log, out)
else:
    raise SystemExit(f"unknown mode {mode!r}")
print("instruments done", flush=True)
