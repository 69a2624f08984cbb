"""Attach the TileLang watcher as soon as TileLang exists in this process, never sooner.

The agent must not import TileLang itself: a process that never uses it should not pay its
import time, and the agent must work where TileLang is not installed. If TileLang is already
imported the watcher is registered at once; otherwise a one-shot import hook on the
``tilelang`` package registers it right after the package has finished importing. The finder
and loader here are plain classes that follow the import protocols: importing ``importlib.abc``
would slow the start of every program run with ``IKET_TUI=1``.
"""

from __future__ import annotations

import importlib.machinery
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from iket_tui.agent.registry import Registry

if TYPE_CHECKING:
    import importlib.abc

PACKAGE = "tilelang"


class TileLangHook:
    """Registration of the watcher with TileLang, now or at TileLang's import, undone by :meth:`remove`."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        self._finder: _ImportWatcher | None = None
        self._registered = False
        self._lock = threading.Lock()
        self._also: list[Callable[[], None]] = []

    def also(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once TileLang is there (now, if it already is), after the watcher."""
        with self._lock:
            if not self._registered:
                self._also.append(callback)
                return
        _run_also(callback)

    def install(self) -> None:
        module = sys.modules.get(PACKAGE)
        if module is not None and _fully_imported(module):
            self._register()
            return
        self._finder = _ImportWatcher(self._on_import)
        sys.meta_path.insert(0, self._finder)

    def remove(self) -> None:
        with self._lock:
            if self._finder is not None and self._finder in sys.meta_path:
                sys.meta_path.remove(self._finder)
            self._finder = None
            if self._registered:
                from iket_tui.agent import tilelang_tool

                tilelang_tool.unregister()
                self._registered = False

    @property
    def registered(self) -> bool:
        return self._registered

    def _on_import(self) -> None:
        with self._lock:
            if self._finder is not None and self._finder in sys.meta_path:
                sys.meta_path.remove(self._finder)
            self._finder = None
        self._register()

    def _register(self) -> None:
        with self._lock:
            if self._registered:
                return
            from iket_tui.agent import tilelang_tool

            tilelang_tool.register(self._registry)
            self._registered = True
            also, self._also = self._also, []
        for callback in also:
            _run_also(callback)


def _run_also(callback: Callable[[], None]) -> None:
    try:
        callback()
    except Exception as exc:
        print(f"iket-tui agent: {exc}", file=sys.stderr)


def _fully_imported(module: ModuleType) -> bool:
    spec = getattr(module, "__spec__", None)
    return not getattr(spec, "_initializing", False)


class _ImportWatcher:
    """Finds ``tilelang`` through the other finders and runs a callback once its import completes."""

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
    """The package's own loader, plus a callback after the module has executed.

    Once the module has run, the original loader is put back on the module and its spec, so
    nothing after the import can tell this wrapper was there.
    """

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
            print(f"iket-tui agent: cannot watch TileLang compiles: {exc}", file=sys.stderr)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)
