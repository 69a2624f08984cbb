"""Attach the TileLang watcher as soon as TileLang exists in this process, never sooner.

The agent must not import TileLang itself: a process that never uses it should not pay its
import time, and the agent must work where TileLang is not installed. If TileLang is already
imported the watcher is registered at once; otherwise a one-shot import hook on the
``tilelang`` package (:mod:`~iket_tui.agent.import_watch`) registers it right after the package
has finished importing.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

from iket_tui.agent.import_watch import ImportWatcher, fully_imported
from iket_tui.agent.registry import Registry

PACKAGE = "tilelang"


class TileLangHook:
    """Registration of the watcher with TileLang, now or at TileLang's import, undone by :meth:`remove`."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        self._finder: ImportWatcher | None = None
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
        if module is not None and fully_imported(module):
            self._register()
            return
        self._finder = ImportWatcher(PACKAGE, self._on_import, watching="TileLang compiles")
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
