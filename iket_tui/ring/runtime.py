"""DeviceRuntime: the CUDA post-processing callback that puts the ring runtime into every
module TileLang generates, numbers the modules, and reports each module's event table.

TileLang calls ``tilelang_callback_cuda_postproc(code, target)`` on every CUDA module it
generates (with and without nvcc). :func:`installed` registers :meth:`DeviceRuntime.postprocess`
there, also for compiles inside ``iket.session(...)`` (which would otherwise register
TileLang's own callback), and restores what was there before.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final

from iket_tui.ring.device import RingTarget, inject
from iket_tui.ring.events import ModuleEvents

CALLBACK_NAME: Final = "tilelang_callback_cuda_postproc"

ModuleListener = Callable[[ModuleEvents, RingTarget | None], None]
"""Told each instrumented module's event table and the ring it was compiled for."""
RingChooser = Callable[[], RingTarget | None]
"""The ring of the device the module being compiled will run on (one ring per device)."""


class DeviceRuntime:
    """Instruments generated CUDA for a ring (or for none, where there is no GPU): one ring, or
    the ring a chooser names for each module."""

    def __init__(
        self,
        ring: RingTarget | RingChooser | None,
        on_module: ModuleListener | None = None,
        first_module: int = 1,
        cuda_runtime: str | None = None,
    ) -> None:
        self.ring = ring
        self.on_module = on_module
        self.cuda_runtime = cuda_runtime
        """The runtime's CUDA text to put in (None: the package's own; another only to measure variants)."""
        self._lock = threading.Lock()
        self._next_module = first_module
        self.modules: dict[int, ModuleEvents] = {}
        """Every module instrumented so far, by id."""

    def postprocess(self, code: str, target: Any = None) -> str:
        """The callback: ``code`` with the runtime in it. Modules without IKET events come back
        unchanged and get no id."""
        if "TL_IKET_EVENT" not in code:
            return code
        with self._lock:
            module = self._next_module
            self._next_module += 1
        target = self.ring() if callable(self.ring) else self.ring
        injected = inject(code, target, module, self.cuda_runtime)
        with self._lock:
            self.modules[module] = injected.events
        if self.on_module is not None:
            self.on_module(injected.events, target)
        return injected.code


@contextmanager
def installed(runtime: DeviceRuntime) -> Iterator[DeviceRuntime]:
    """Make ``runtime`` TileLang's CUDA post-processing callback inside the block."""
    import tvm_ffi

    def callback(code: str, target: Any) -> str:
        return runtime.postprocess(str(code), target)

    previous = tvm_ffi.get_global_func(CALLBACK_NAME, allow_missing=True)
    session_module = _iket_session_module()
    previous_session_callback = getattr(session_module, "_cuda_postproc", None)
    tvm_ffi.register_global_func(CALLBACK_NAME, f=callback, override=True)
    if session_module is not None:
        session_module._cuda_postproc = callback
    try:
        yield runtime
    finally:
        if session_module is not None and previous_session_callback is not None:
            session_module._cuda_postproc = previous_session_callback
        if previous is not None:
            tvm_ffi.register_global_func(CALLBACK_NAME, f=previous, override=True)
        else:
            tvm_ffi.remove_global_func(CALLBACK_NAME)


def _iket_session_module() -> Any:
    """TileLang's ``iket.session`` module, whose ``enable`` registers its ``_cuda_postproc``."""
    try:
        return importlib.import_module("tilelang.tools.cuda.iket.session")  # the package's ``session`` is a function
    except ImportError:
        return None
