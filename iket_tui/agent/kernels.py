"""Kernel tracing in the agent: the ring, TileLang's CUDA post-processing callback, the drain.

When tracing is on, the first import of TileLang (or :meth:`KernelTracer.attach_tilelang` if it
is already imported) does four things, in this order:

1. Opens the ring: host-mapped memory from ``cudaHostAlloc`` (CuPy) on the current device, or a
   ring file made by :class:`~iket_tui.ring.buffer.MappedRing` when one is configured (the CPU
   producer writes it; this is how CI exercises the whole path without a GPU). Without a
   device, tracing goes on without a ring: that is said once on stderr and in a
   ``kernel_tracing`` message, and nothing fails.
2. Installs :class:`~iket_tui.ring.runtime.DeviceRuntime` as TileLang's CUDA post-processing
   callback, so every module with IKET events gets the ring runtime compiled in and its event
   table is sent (``kernel_module``) the moment it is generated, before any launch.
3. Turns TileLang's kernel cache off while tracing: a module built for this ring has the ring's
   address and id compiled in and must never be loaded where that ring does not exist, and a
   module built without tracing (from the cache) would run without events.
4. Starts the drain thread, which sends what the ring holds as ``kernel_records`` batches.

The ring is never freed while the process lives: a module compiled for it may be launched at
any time, and it would then write into freed memory.
"""

from __future__ import annotations

import sys
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from iket_tui.agent import compiling
from iket_tui.agent.kernel_options import KernelOptions
from iket_tui.agent.registry import Registry
from iket_tui.protocol import messages as m
from iket_tui.ring.buffer import MappedRing, RingFormatError, RingView, memory_at
from iket_tui.ring.device import RingTarget
from iket_tui.ring.drain import DrainBatch, RingDrain
from iket_tui.ring.events import ModuleEvents
from iket_tui.ring.layout import DEFAULT_LAYOUT, RingGeometry
from iket_tui.ring.wire import kernel_module, kernel_records

MAX_RECORDS_BYTES: Final = 4 * 1024 * 1024
"""Chunk bytes in one ``kernel_records`` message (a drain that copied more sends several)."""


def _warn(text: str) -> None:
    print(f"iket-tui agent: {text}", file=sys.stderr)


class RingUnavailable(Exception):
    """No ring can be opened here; the message says why in one line."""


@dataclass(frozen=True)
class OpenedRing:
    """A ring the agent drains, and where the device writes (``None``: no device writes it)."""

    view: RingView
    target: RingTarget | None
    device: str | None
    keep: object = None  # what keeps the memory alive (a mapping); device memory is never freed


def open_device_ring(chunks_per_segment: int) -> OpenedRing:
    """A new ring in host-mapped memory for the current CUDA device."""
    try:
        import cupy
    except ImportError:
        raise RingUnavailable("CuPy is not installed") from None
    runtime: Any = cupy.cuda.runtime
    try:
        if runtime.getDeviceCount() < 1:
            raise RingUnavailable("no CUDA device")
        props = runtime.getDeviceProperties(runtime.getDevice())
        geometry = RingGeometry.for_sms(int(props["multiProcessorCount"]), chunks_per_segment, DEFAULT_LAYOUT)
        address = int(runtime.hostAlloc(geometry.total_bytes, runtime.hostAllocMapped | runtime.hostAllocPortable))
    except RingUnavailable:
        raise
    except Exception as exc:  # CuPy raises its own error types for every CUDA failure
        raise RingUnavailable(f"no CUDA device ({_one_line(exc)})") from None
    name = props.get("name", b"CUDA device")
    view = RingView.format(memory_at(address, geometry.total_bytes), geometry)
    return OpenedRing(
        view, RingTarget(address, geometry, view.ring_id), name.decode() if isinstance(name, bytes) else str(name)
    )


def open_ring_file(path: Path) -> OpenedRing:
    """The ring in an existing ring file; no device writes into it."""
    try:
        mapped = MappedRing.open(path)
    except (OSError, RingFormatError) as exc:
        raise RingUnavailable(f"cannot open ring file {path}: {_one_line(exc)}") from None
    return OpenedRing(mapped.view, None, None, keep=mapped)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


class KernelTracer:
    """Kernel tracing for one agent (see the module docstring)."""

    def __init__(self, registry: Registry, options: KernelOptions) -> None:
        self.registry = registry
        self.options = options
        self.ring: OpenedRing | None = None
        self.reason: str | None = None
        """Why there is no ring, once TileLang is attached without one."""
        self.attached = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._undo = ExitStack()
        self._drain: RingDrain | None = None

    def attach_tilelang(self) -> None:
        """Open the ring, install the runtime into TileLang, start draining (once)."""
        with self._lock:
            if self.attached:
                return
            self.attached = True
            try:
                self.ring = self._open_ring()
            except RingUnavailable as exc:
                self.reason = str(exc)
            from iket_tui.ring.runtime import DeviceRuntime, installed

            runtime = DeviceRuntime(self.ring.target if self.ring is not None else None, on_module=self._on_module)
            self._undo.enter_context(installed(runtime))
            self._undo.callback(_cache_off())
            self.registry.emit_kept(self._tracing_message(), key=(m.KERNEL_TRACING,))
            if self.ring is None:
                hint = " (pip install 'iket-tui[cuda]')" if self.reason == "CuPy is not installed" else ""
                _warn(
                    f"kernel tracing without a ring: {self.reason}{hint}; kernels compile with their event tables, "
                    "no kernel events will be recorded"
                )
                return
            self._drain = RingDrain(self.ring.view, period_s=1.0 / self.options.drain_hz)
            self._thread = self._drain.run(self._on_batch, self._stop)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Drain one last time, then take the runtime out of TileLang; the ring stays allocated."""
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)
        with self._lock:
            self._undo.close()

    def _open_ring(self) -> OpenedRing:
        if self.options.ring_file is not None:
            return open_ring_file(self.options.ring_file)
        return open_device_ring(self.options.chunks_per_segment)

    def _tracing_message(self) -> m.Message:
        ring = self.ring
        return {
            "type": m.KERNEL_TRACING,
            "enabled": True,
            "device": ring.device if ring is not None else None,
            "ring_id": ring.view.ring_id if ring is not None else None,
            "ring_bytes": ring.view.geometry.total_bytes if ring is not None else 0,
            "segments": ring.view.geometry.segments if ring is not None else 0,
            "chunks_per_segment": ring.view.geometry.chunks_per_segment if ring is not None else 0,
            "drain_hz": self.options.drain_hz,
            "reason": self.reason,
            "t_ns": time.monotonic_ns(),
        }

    def _on_module(self, events: ModuleEvents) -> None:
        ring = self.ring
        msg = kernel_module(
            events,
            ring_id=ring.view.ring_id if ring is not None and ring.target is not None else None,
            layout=ring.view.layout if ring is not None else DEFAULT_LAYOUT,
            t_ns=time.monotonic_ns(),
            compile=compiling.current(),
        )
        self.registry.emit_kept(msg, key=(m.KERNEL_MODULE, events.module))

    def _on_batch(self, batch: DrainBatch) -> None:
        max_chunks = max(1, MAX_RECORDS_BYTES // batch.layout.chunk_bytes)
        for part in batch.split(max_chunks):
            msg = kernel_records(part, t_ns=time.monotonic_ns())
            self.registry.emit_bulk(msg, len(msg["chunks"]))


def _cache_off() -> Any:
    """Turn TileLang's kernel cache off and keep it off (a program enabling it meanwhile is told
    once that it stays off); returns what turns it back to how it was."""
    from tilelang.env import CacheState

    was_enabled = CacheState.is_enabled()
    original_enable = CacheState.__dict__["enable"]
    told: list[bool] = []

    def stays_off(cls: type) -> None:
        if not told:
            told.append(True)
            _warn("TileLang's kernel cache stays off while kernels are traced (a traced kernel must not be reused)")

    CacheState.disable()
    CacheState.enable = classmethod(stays_off)

    def restore() -> None:
        CacheState.enable = original_enable
        if was_enabled:
            CacheState.enable()

    return restore
