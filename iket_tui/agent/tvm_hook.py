"""Attach the plain Apache TVM watcher as soon as TVM exists in this process, never sooner.

Like the TileLang hook (:mod:`~iket_tui.agent.tilelang_hook`), this never imports TVM itself: if
``tvm`` is already imported the watcher (:mod:`~iket_tui.agent.tvm_tool`) is registered at once,
otherwise a one-shot import hook registers it right after the package has finished importing.

TileLang bundles its own TVM and imports it as ``tvm`` too. Its compiles are watched through
TileLang's own instrumentation, so the plain-TVM watcher stays out of any process where TileLang
is imported: a second instrument in TileLang's pass contexts would show every compile twice.

The hook keeps no state of its own: the finder on ``sys.meta_path`` and the patched TVM functions
mark themselves, so installing twice does nothing more.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Final, ParamSpec

from iket_tui.agent.import_watch import ImportWatcher, fully_imported, watchers_of
from iket_tui.agent.registry import Registry

if TYPE_CHECKING:
    from iket_tui.agent.lifecycle import Agent

PACKAGE: Final = "tvm"
TILELANG: Final = "tilelang"

_P = ParamSpec("_P")


def watching_tvm(start: Callable[_P, Agent]) -> Callable[_P, Agent]:
    """``start``, which starts the agent, then has it watch plain TVM compiles too. Once the agent
    stops, what is wrapped in TVM stays and does nothing until an agent runs again."""

    @functools.wraps(start)
    def start_watching_tvm(*args: _P.args, **kwargs: _P.kwargs) -> Agent:
        agent = start(*args, **kwargs)
        try:
            install(agent.registry)
        except Exception as exc:
            print(f"iket-tui agent: cannot watch TVM compiles: {exc}", file=sys.stderr)
        return agent

    return start_watching_tvm


def install(registry: Registry) -> None:
    """Watch plain TVM compiles from now on: at once if TVM is imported, else when it is."""
    if TILELANG in sys.modules:
        return
    module = sys.modules.get(PACKAGE)
    if module is not None and fully_imported(module):
        _register(registry)
        return
    if not watchers_of(PACKAGE):
        sys.meta_path.insert(0, ImportWatcher(PACKAGE, lambda: _register(registry), watching="TVM compiles"))


def remove() -> None:
    """Stop watching: take the import hook out and put TVM's own functions back."""
    for finder in watchers_of(PACKAGE):
        sys.meta_path.remove(finder)
    if PACKAGE in sys.modules and is_plain_tvm(sys.modules[PACKAGE]):
        from iket_tui.agent import tvm_tool

        tvm_tool.unregister()


def is_plain_tvm(module: ModuleType) -> bool:
    """Whether ``module`` (the imported ``tvm``) is Apache TVM itself, not the TVM TileLang bundles."""
    if TILELANG in sys.modules:
        return False
    path = str(getattr(module, "__file__", "") or "")
    return f"/{TILELANG}/" not in path.replace("\\", "/")


def _register(registry: Registry) -> None:
    module = sys.modules.get(PACKAGE)
    if module is None or not is_plain_tvm(module):
        return
    try:
        from iket_tui.agent import tvm_tool

        tvm_tool.register(registry)
    except Exception as exc:
        print(f"iket-tui agent: cannot watch TVM compiles: {exc}", file=sys.stderr)
