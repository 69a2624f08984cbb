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
import importlib.machinery
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, ParamSpec, cast

from iket_tui.agent.registry import Registry

if TYPE_CHECKING:
    import importlib.abc

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
    if module is not None and _fully_imported(module):
        _register(registry)
        return
    if not any(isinstance(finder, _ImportWatcher) for finder in sys.meta_path):
        sys.meta_path.insert(0, _ImportWatcher(lambda: _register(registry)))


def remove() -> None:
    """Stop watching: take the import hook out and put TVM's own functions back."""
    for finder in [finder for finder in sys.meta_path if isinstance(finder, _ImportWatcher)]:
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


def _fully_imported(module: ModuleType) -> bool:
    spec = getattr(module, "__spec__", None)
    return not getattr(spec, "_initializing", False)


class _ImportWatcher:
    """Finds ``tvm`` through the other finders and runs a callback once its import completes."""

    def __init__(self, on_import: Callable[[], None]) -> None:
        self._on_import = on_import
        self._searching = threading.local()

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != PACKAGE or getattr(self._searching, "active", False):
            return None
        self._searching.active = True
        try:
            spec = _find_elsewhere(self, fullname, path, target)
        finally:
            self._searching.active = False
        if spec is None or spec.loader is None:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)  # one shot: the next import of tvm is the module already there
        spec.loader = cast("importlib.abc.Loader", _NotifyingLoader(spec.loader, self._on_import))
        return spec


def _find_elsewhere(
    finder: _ImportWatcher, fullname: str, path: Sequence[str] | None, target: ModuleType | None
) -> importlib.machinery.ModuleSpec | None:
    for other in list(sys.meta_path):
        if other is finder:
            continue
        find_spec = getattr(other, "find_spec", None)
        if find_spec is None:
            continue
        spec: importlib.machinery.ModuleSpec | None = find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


class _NotifyingLoader:
    """The package's own loader, plus a callback after the module has executed; the original
    loader is put back on the module and its spec first, so nothing can tell this was there."""

    def __init__(self, loader: Any, on_import: Callable[[], None]) -> None:
        self._loader = loader
        self._on_import = on_import

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        create: Callable[[importlib.machinery.ModuleSpec], ModuleType | None] | None = getattr(
            self._loader, "create_module", None
        )
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        try:
            self._on_import()
        except Exception as exc:
            print(f"iket-tui agent: cannot watch TVM compiles: {exc}", file=sys.stderr)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)
