"""A ring in a GPU's device memory and the host copy a drain reads: the records reach the host
through a DMA engine, on a non-blocking stream of the agent's own, while kernels run.

:class:`DeviceRing` allocates the ring with ``cudaMalloc`` (through CuPy) and a pinned host
mirror of it; it is the drain's :class:`~iket_tui.ring.drain.RecordSource`. Each pass copies the
header first (its two warp counters say whether any warp ran since the last passes, so an idle
ring is not copied whole), then the records into the mirror, which the drain reads in place,
then the records again into a second buffer for the stamps a drain checks after its copy: the
copying is the DMA engine's, not the drain's. It also estimates the device's ``%globaltimer`` against the host's
monotonic clock once, with a one-thread kernel between two host clock reads.

CuPy and a CUDA device are needed to construct one; importing this module needs neither.
"""

from __future__ import annotations

import time
from typing import Any, Final

import numpy as np

from iket_tui.ring.buffer import RingView, memory_at
from iket_tui.ring.drain import record_words
from iket_tui.ring.layout import RingGeometry

QUIET_PASSES: Final = 2
"""Passes that must see the same warp counters, with every warp that started ended, before the
records are no longer copied (the first such pass may still miss records of the last warps)."""

_NOW_KERNEL: Final = r"""
extern "C" __global__ void iket_tui_globaltimer(unsigned long long* out) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  *out = t;
}
"""


class DeviceRing:
    """A ring in device memory on ``device`` (an index), with its pinned host mirror."""

    def __init__(self, geometry: RingGeometry, device: int = 0, ring_id: int | None = None) -> None:
        import cupy

        self._cupy = cupy
        runtime: Any = cupy.cuda.runtime
        self._runtime = runtime
        self.device = device
        self.geometry = geometry
        size = geometry.total_bytes
        with cupy.cuda.Device(device):
            self.address = int(runtime.malloc(size))
            if self.address % 4096:
                raise RuntimeError(f"cudaMalloc returned 0x{self.address:x}, not a page-aligned pointer")
            self.mirror = int(runtime.hostAlloc(size, 0))
            host = memory_at(self.mirror, size)
            self.view = RingView.format(host, geometry, ring_id)
            records_bytes = size - geometry.records_offset
            self.check = int(runtime.hostAlloc(records_bytes, 0))
            self._check_stamps = (
                memory_at(self.check, records_bytes)
                .view(self.view.records.dtype)
                .reshape(self.view.records.shape)["stamp"]
            )
            runtime.memcpy(self.address, self.mirror, geometry.records_offset, runtime.memcpyHostToDevice)
            runtime.memset(self.address + geometry.records_offset, 0, size - geometry.records_offset)
            self.stream = cupy.cuda.Stream(non_blocking=True)
            self.clock_offset_ns = self._calibrate()
        self._last_warps: tuple[int, int] | None = None
        self._quiet = 0
        self.copies = 0
        """Record copies made (two per pass that copies)."""

    def _copy(self, offset: int, size: int, into: int | None = None) -> None:
        runtime = self._runtime
        target = self.mirror + offset if into is None else into
        with self._cupy.cuda.Device(self.device):
            runtime.memcpyAsync(target, self.address + offset, size, runtime.memcpyDeviceToHost, self.stream.ptr)
            self.stream.synchronize()

    def _calibrate(self) -> int | None:
        """``%globaltimer`` minus ``time.monotonic_ns()``, from the closest of a few reads of
        both; ``None`` where no kernel can be compiled here (no NVRTC)."""
        cupy = self._cupy
        try:
            kernel = cupy.RawKernel(_NOW_KERNEL, "iket_tui_globaltimer")
            out = cupy.zeros(1, dtype=cupy.uint64)
            best: tuple[int, int] | None = None
            for _ in range(8):
                before = time.monotonic_ns()
                with self.stream:
                    kernel((1,), (1,), (out,))
                self.stream.synchronize()
                after = time.monotonic_ns()
                device_ns = int(out.get(stream=self.stream)[0])
                if best is None or after - before < best[0]:
                    best = (after - before, device_ns - (before + after) // 2)
            return None if best is None else best[1]
        except Exception:  # CuPy raises its own error types for a missing NVRTC or a failed launch
            return None

    # The drain's RecordSource.

    def refresh(self) -> bool:
        self._copy(0, self.geometry.records_offset)
        warps = self.view.warps
        if warps == self._last_warps and warps[0] == warps[1]:
            self._quiet += 1
        else:
            self._quiet = 0
        self._last_warps = warps
        return self._quiet < QUIET_PASSES

    def stamps(self) -> np.ndarray[Any, Any]:
        geometry = self.geometry
        self._copy(geometry.records_offset, geometry.total_bytes - geometry.records_offset)
        self.copies += 1
        stamps: np.ndarray[Any, Any] = self.view.records["stamp"]  # the mirror stays as copied until the next pass
        return stamps

    def rows(self, segments: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        return record_words(self.view.records, segments, copy=False)

    def stamps_after(self, segments: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        geometry = self.geometry
        self._copy(geometry.records_offset, geometry.total_bytes - geometry.records_offset, into=self.check)
        self.copies += 1
        stamps = self._check_stamps
        after: np.ndarray[Any, Any] = stamps if len(segments) == len(stamps) else stamps[segments]
        return after

    def device_now_ns(self) -> int | None:
        return None if self.clock_offset_ns is None else time.monotonic_ns() + self.clock_offset_ns
