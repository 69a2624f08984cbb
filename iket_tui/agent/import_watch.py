"""A callback run right after a package has finished importing, without the agent importing it.

A one-shot finder put first on ``sys.meta_path`` finds the package through the other finders
and wraps its loader; once the package's module has executed, the callback runs and the
original loader is put back, so nothing after the import can tell the wrapper was there. The
finder and loader are plain classes that follow the import protocols: importing
``importlib.abc`` would slow the start of every program run with ``IKET_TUI=1``.
"""

from __future__ import annotations

import importlib.machinery
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import importlib.abc


def fully_imported(module: ModuleType) -> bool:
    """Whether ``module`` has finished executing (not a module still being imported)."""
    spec = getattr(module, "__spec__", None)
    return not getattr(spec, "_initializing", False)


class ImportWatcher:
    """Finds ``package`` through the other finders, takes itself off ``sys.meta_path`` and runs
    ``on_import`` once the package's import completes; a failing callback is one line on stderr
    naming ``watching`` (what the agent could then not watch)."""

    def __init__(self, package: str, on_import: Callable[[], None], *, watching: str) -> None:
        self.package = package
        self._on_import = on_import
        self._watching = watching
        self._searching = threading.local()

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.package or getattr(self._searching, "active", False):
            return None
        self._searching.active = True
        try:
            spec = self._find_elsewhere(fullname, path, target)
        finally:
            self._searching.active = False
        if spec is None or spec.loader is None:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)  # one shot: the next import finds the module already there
        spec.loader = cast("importlib.abc.Loader", _NotifyingLoader(spec.loader, self._notify))
        return spec

    def _notify(self) -> None:
        try:
            self._on_import()
        except Exception as exc:
            print(f"iket-tui agent: cannot watch {self._watching}: {exc}", file=sys.stderr)

    def _find_elsewhere(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None
    ) -> importlib.machinery.ModuleSpec | None:
        for other in list(sys.meta_path):
            if other is self:
                continue
            find_spec = getattr(other, "find_spec", None)
            if find_spec is None:
                continue
            spec: importlib.machinery.ModuleSpec | None = find_spec(fullname, path, target)
            if spec is not None:
                return spec
        return None


def watchers_of(package: str) -> list[ImportWatcher]:
    """The watchers of ``package`` still waiting on ``sys.meta_path``."""
    return [finder for finder in sys.meta_path if isinstance(finder, ImportWatcher) and finder.package == package]


class _NotifyingLoader:
    """The package's own loader, plus a callback after the module has executed."""

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
        self._on_import()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)
