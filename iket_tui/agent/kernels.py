"""Kernel tracing in the agent: the ring, TileLang's CUDA post-processing callback, the drain.

When tracing is on, the first import of TileLang (or :meth:`KernelTracer.attach_tilelang` if it
is already imported) does four things, in this order:

1. Opens one ring per CUDA device: device memory (CuPy's ``cudaMalloc``) that the drain copies
   with a DMA engine (:class:`~iket_tui.ring.device_copy.DeviceRing`), or ring files made by
   :class:`~iket_tui.ring.buffer.MappedRing` when they are configured (the CPU producer writes
   them; this is how CI exercises the whole path without a GPU). Without a device, tracing goes
   on without a ring: that is said once on stderr and in a ``kernel_tracing`` message, and
   nothing fails.
2. Installs :class:`~iket_tui.ring.runtime.DeviceRuntime` as TileLang's CUDA post-processing
   callback, so every module with IKET events gets the runtime of the current device's ring
   compiled in and its event table is sent (``kernel_module``) the moment it is generated,
   before any launch.
3. Turns TileLang's kernel cache off while tracing: a module built for this ring has the ring's
   address and id compiled in and must never be loaded where that ring does not exist, and a
   module built without tracing (from the cache) would run without events.
4. Starts a drain thread per ring, which sends what the ring holds as ``kernel_records``
   batches, each with the device's clock (``device_now_ns``) estimated at its pass.

The ring is never freed while the process lives: a module compiled for it may be launched at
any time, and it would then write into freed memory.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, Final

from iket_tui.agent import compiling
from iket_tui.agent.kernel_options import KernelOptions
from iket_tui.agent.registry import Registry
from iket_tui.protocol import messages as m
from iket_tui.ring.buffer import MappedRing, RingFormatError, RingView
from iket_tui.ring.device import RingTarget
from iket_tui.ring.drain import DrainBatch, RecordSource, RingDrain
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
    """A ring the agent drains: where the device writes (``None``: no device writes it), the
    device, and where the drain reads it (``None``: the ring's own memory)."""

    view: RingView
    target: RingTarget | None
    device: str | None
    device_index: int = 0
    source: RecordSource | None = None
    keep: object = None  # what keeps the memory alive (a mapping); device memory is never freed


def open_device_rings(geometry: RingGeometry) -> list[OpenedRing]:
    """A new ring of ``geometry`` in device memory for every CUDA device."""
    try:
        import cupy
    except ImportError:
        from iket_tui.agent.cuda_driver import driver_state, without_cupy

        raise RingUnavailable(without_cupy(driver_state())) from None
    from iket_tui.ring.device_copy import DeviceRing

    runtime: Any = cupy.cuda.runtime
    rings = []
    try:
        count = runtime.getDeviceCount()
        if count < 1:
            raise RingUnavailable("no CUDA device")
        for index in range(count):
            props = runtime.getDeviceProperties(index)
            ring = DeviceRing(geometry, index)
            name = props.get("name", b"CUDA device")
            rings.append(
                OpenedRing(
                    ring.view,
                    RingTarget(ring.address, geometry, ring.view.ring_id),
                    name.decode() if isinstance(name, bytes) else str(name),
                    index,
                    ring,
                )
            )
    except RingUnavailable:
        raise
    except Exception as exc:  # CuPy raises its own error types for every CUDA failure
        raise RingUnavailable(f"no CUDA device ({_one_line(exc)})") from None
    return rings


def open_ring_files(paths: str) -> list[OpenedRing]:
    """The rings in existing ring files (``os.pathsep``-separated, one per device); no device
    writes into them."""
    rings = []
    for index, path in enumerate(paths.split(os.pathsep)):
        try:
            mapped = MappedRing.open(path)
        except (OSError, RingFormatError) as exc:
            raise RingUnavailable(f"cannot open ring file {path}: {_one_line(exc)}") from None
        rings.append(OpenedRing(mapped.view, None, None, index, keep=mapped))
    return rings


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


class KernelTracer:
    """Kernel tracing for one agent (see the module docstring)."""

    def __init__(self, registry: Registry, options: KernelOptions) -> None:
        self.registry = registry
        self.options = options
        self.rings: list[OpenedRing] = []
        self.reason: str | None = None
        """Why there is no ring, once TileLang is attached without one."""
        self.attached = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._undo = ExitStack()

    @property
    def ring(self) -> OpenedRing | None:
        """The first device's ring."""
        return self.rings[0] if self.rings else None

    def attach_tilelang(self) -> None:
        """Open the rings, install the runtime into TileLang, start draining (once)."""
        with self._lock:
            if self.attached:
                return
            self.attached = True
            try:
                self.rings = self._open_rings()
            except RingUnavailable as exc:
                self.reason = str(exc)
            from iket_tui.ring.runtime import DeviceRuntime, installed

            runtime = DeviceRuntime(self._current_target, on_module=self._on_module)
            self._undo.enter_context(installed(runtime))
            self._undo.callback(_cache_off())
            for message in self._tracing_messages():
                self.registry.emit_kept(message, key=(m.KERNEL_TRACING, message.get("device_index")))
            if not self.rings:
                _warn(
                    f"kernel tracing without a ring: {self.reason}; kernels compile with their event tables, "
                    "no kernel events will be recorded"
                )
                return
            for ring in self.rings:
                drain = RingDrain(ring.view, period_s=1.0 / self.options.drain_hz, source=ring.source)
                self._threads.append(drain.run(self._on_batch, self._stop))

    def stop(self, timeout_s: float = 5.0) -> None:
        """Drain one last time, then take the runtime out of TileLang; the rings stay allocated."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout_s)
        with self._lock:
            self._undo.close()

    def _open_rings(self) -> list[OpenedRing]:
        if self.options.ring_file is not None:
            return open_ring_files(str(self.options.ring_file))
        options = self.options
        return open_device_rings(RingGeometry(options.regions, options.records_per_region))

    def _current_target(self) -> RingTarget | None:
        """The ring of the device current in the compiling thread (where its kernels will run)."""
        targets = [ring for ring in self.rings if ring.target is not None]
        if len(targets) <= 1:
            return targets[0].target if targets else None
        import cupy

        device = int(cupy.cuda.runtime.getDevice())
        return next((ring.target for ring in targets if ring.device_index == device), targets[0].target)

    def _tracing_messages(self) -> list[m.Message]:
        common = {
            "type": m.KERNEL_TRACING,
            "enabled": True,
            "drain_hz": self.options.drain_hz,
            "t_ns": time.monotonic_ns(),
        }
        if not self.rings:
            no_ring = {"device": None, "device_index": None, "ring_id": None, "ring_bytes": 0, "ring_events": 0}
            return [{**common, **no_ring, "regions": 0, "records_per_region": 0, "reason": self.reason}]
        return [
            {
                **common,
                "device": ring.device,
                "device_index": ring.device_index,
                "ring_id": ring.view.ring_id,
                "ring_bytes": ring.view.geometry.total_bytes,
                "ring_events": ring.view.geometry.capacity_records,
                "regions": ring.view.geometry.regions,
                "records_per_region": ring.view.geometry.records_per_region,
                "reason": None,
            }
            for ring in self.rings
        ]

    def _ring_id_of(self, target: RingTarget | None) -> int | None:
        """The ring a module's launches write: the device ring it was compiled for or, for ring
        files (no device writes them, so no module is compiled for one), the first file's,
        where a program's kernels on its first device would write; ``None`` without a ring."""
        if target is not None:
            return target.ring_id
        files = [ring for ring in self.rings if ring.target is None]
        return files[0].view.ring_id if files else None

    def _on_module(self, events: ModuleEvents, target: RingTarget | None) -> None:
        msg = kernel_module(
            events,
            ring_id=self._ring_id_of(target),
            layout=DEFAULT_LAYOUT,
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
