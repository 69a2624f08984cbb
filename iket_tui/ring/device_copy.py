"""A ring in a GPU's device memory and the host copy a drain reads: the records reach the host
through a DMA engine, on a non-blocking stream of the agent's own, while kernels run.

:class:`DeviceRing` allocates the ring with ``cudaMalloc`` (through CuPy) and a pinned host
mirror of it; it is the drain's :class:`~iket_tui.ring.drain.RecordSource`. Each pass copies the
header first (its warp counters say whether any warp ran since the last passes, so an idle ring
is not copied at all), then, for the claims the drain asks about (one run of consecutive claims,
so at most two spans of regions), their descriptors, their records, and their descriptors again
into a buffer of their own: the copying is the DMA engine's, not the drain's, and only the
regions of warps that ran since the drain last finished with them cross the bus. It also
estimates the device's ``%globaltimer`` against the host's monotonic clock once, with a
one-thread kernel between two host clock reads.

CuPy and a CUDA device are needed to construct one; importing this module needs neither.
"""

from __future__ import annotations

import time
from typing import Any, Final

import numpy as np

from iket_tui.ring.buffer import RingView, memory_at
from iket_tui.ring.drain import RegionCopy
from iket_tui.ring.layout import DESCRIPTOR_BYTES, DESCRIPTOR_WORDS, RingGeometry

QUIET_PASSES: Final = 2
"""Passes that must see the same warp counters, with every warp that claimed a region ended,
before no region is copied (the first such pass may still miss records of the last warps)."""

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
            descriptors_bytes = geometry.regions * DESCRIPTOR_BYTES
            self.check = int(runtime.hostAlloc(descriptors_bytes, 0))
            self._check_words = memory_at(self.check, descriptors_bytes).view("<u4").reshape(-1, DESCRIPTOR_WORDS)
            runtime.memcpy(self.address, self.mirror, geometry.records_offset, runtime.memcpyHostToDevice)
            runtime.memset(self.address + geometry.records_offset, 0, size - geometry.records_offset)
            self.stream = cupy.cuda.Stream(non_blocking=True)
            self.clock_offset_ns = self._calibrate()
        self._last_warps: tuple[int, int, int] | None = None
        self._quiet = 0
        self.copies = 0
        """Passes whose regions were copied."""
        self.bytes_copied = 0
        """Bytes of descriptors and records copied, in all."""

    def _copy(self, spans: list[tuple[int, int, int]]) -> None:
        """Copy each (device offset, size, host address) on the ring's stream, then wait once."""
        runtime = self._runtime
        with self._cupy.cuda.Device(self.device):
            for offset, size, target in spans:
                runtime.memcpyAsync(target, self.address + offset, size, runtime.memcpyDeviceToHost, self.stream.ptr)
                self.bytes_copied += size
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
        self._copy([(0, 256, self.mirror)])
        warps = self.view.warps
        if warps == self._last_warps and warps[0] == warps[1]:
            self._quiet += 1
        else:
            self._quiet = 0
        self._last_warps = warps
        return self._quiet < QUIET_PASSES

    def read(self, claims: np.ndarray[Any, Any]) -> RegionCopy:
        geometry = self.geometry
        regions = claims & (geometry.regions - 1)
        first, count = int(regions[0]), min(int(claims[-1] - claims[0]) + 1, geometry.regions)
        runs = [(first, min(count, geometry.regions - first))]
        if runs[0][1] < count:
            runs.append((0, count - runs[0][1]))
        region_bytes = geometry.region_bytes
        before, records, after = [], [], []
        for start, n in runs:
            at = geometry.descriptors_offset + start * DESCRIPTOR_BYTES
            before.append((at, n * DESCRIPTOR_BYTES, self.mirror + at))
            after.append((at, n * DESCRIPTOR_BYTES, self.check + start * DESCRIPTOR_BYTES))
            at = geometry.records_offset + start * region_bytes
            records.append((at, n * region_bytes, self.mirror + at))
        self._copy(before + records + after)
        self.copies += 1
        view = self.view  # read in place: the mirror stays as copied until the next pass
        return RegionCopy(view.descriptor_words[regions], view.record_words, self._check_words[regions], rows=regions)

    def device_now_ns(self) -> int | None:
        return None if self.clock_offset_ns is None else time.monotonic_ns() + self.clock_offset_ns
