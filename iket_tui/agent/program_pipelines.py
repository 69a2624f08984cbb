"""Pass pipelines a TileLang program runs itself, outside TileLang's entry points, each seen as a
compile of its own (``kind`` ``"pipeline"``) with every pass, live.

TileLang hands its pass instruments only to the pass contexts of its own compile sessions
(``tilelang.lower``, ``tilelang.compile``, ``@tilelang.jit``), so a ``tvm.transform.Sequential``
or a single pass that the program applies to a module itself, in a ``PassContext`` of its own or
in TVM's default one, reaches no instrument. While the agent watches TileLang, two things of
TVM's are wrapped, and :func:`unregister` puts them back:

- ``PassContext.__init__``: a context made outside a TileLang compile session carries the
  plain-TVM watcher's tap (:class:`~iket_tui.agent.tvm_tool.ContextTap`) after the program's own
  instruments; contexts made inside one carry TileLang's instruments and no tap;
- ``Pass.__call__``: a call made by the program's own code (its caller is not TileLang's, TVM's
  or the agent's), outside a TileLang compile session and outside another such call, is one
  compile, labelled ``pipeline <pass name>``, run where a tap sees its passes exactly as a plain
  TVM compile is (see :mod:`~iket_tui.agent.tvm_tool`).

Calls inside TileLang's compiles and the passes a pipeline runs inside itself cost one
thread-local read and one context-variable read each. Nothing here may raise into the program.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, Final

from tilelang.instrumentation import current_compile_pass_instrumentation
from tvm import transform

from iket_tui.agent import compile_origin, tvm_tool
from iket_tui.agent.registry import Registry
from iket_tui.agent.tvm_compile import TvmCompile
from iket_tui.protocol import messages as m

ENTRY: Final = "pipeline"
"""How a pipeline's label begins."""

_WATCHING: Final = "_iket_tui_watching"


def register(registry: Registry) -> None:
    """Watch the pass pipelines the program runs itself from now on (once: a second call does nothing)."""
    context_class = transform.PassContext
    if not getattr(context_class.__init__, _WATCHING, False):
        context_class.__init__ = tvm_tool._with_tap(context_class.__init__, registry, _outside_tilelang)
    pass_class = transform.Pass
    if not getattr(pass_class.__call__, _WATCHING, False):
        pass_class.__call__ = _pipeline(pass_class.__call__, registry)


def unregister() -> None:
    """Put TVM's own functions back."""
    for owner, name in ((transform.PassContext, "__init__"), (transform.Pass, "__call__")):
        function = getattr(owner, name)
        if getattr(function, _WATCHING, False):
            setattr(owner, name, function.__wrapped__)


def _outside_tilelang() -> bool:
    """Whether no TileLang compile session is active here (its contexts carry TileLang's instruments)."""
    return current_compile_pass_instrumentation() is None


def _pipeline(call: Callable[[Any, Any], Any], registry: Registry) -> Callable[[Any, Any], Any]:
    """``Pass.__call__``, making a call by the program itself, outside any compile, a compile."""

    @functools.wraps(call)
    def run_pass(self: Any, mod: Any) -> Any:
        if (
            getattr(tvm_tool._thread, "compile", None) is not None
            or registry.agent is None
            or current_compile_pass_instrumentation() is not None
            or not compile_origin.is_programs(sys._getframe(1))
        ):
            return call(self, mod)
        compile = _begin(registry, self, mod)
        if compile is None:
            return call(self, mod)
        return tvm_tool._run(compile, call, (self, mod), {})

    setattr(run_pass, _WATCHING, True)
    return run_pass


def _begin(registry: Registry, pass_: Any, mod: Any) -> TvmCompile | None:
    """The pipeline ``pass_`` runs on ``mod``, announced; None if the watcher cannot tell (counted)."""
    try:
        compile = TvmCompile(registry, f"{ENTRY} {pass_.info.name}", mod, None, tvm_tool._phase_now)
        compile.origin = {
            "kind": m.COMPILE_KIND_PIPELINE,
            **compile_origin.origin(sys._getframe(2)),
            **compile_origin.inputs(mod, transform.PassContext.current()),
        }
        compile.announce()
        return compile
    except Exception:
        registry.observer_errors += 1
        return None
