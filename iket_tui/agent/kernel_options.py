"""Kernel tracing options, importable without numpy (the agent loads the tracer only when it is on)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Final

DEFAULT_DRAIN_HZ: Final = 20.0
DEFAULT_RING_CHUNKS: Final = 32
"""Chunks per segment: 32 x 256 bytes of pinned host memory per warp slot of the device (the
H200's ring size is in BENCHMARKS.md)."""
MIN_RING_CHUNKS: Final = 16
"""The fewest chunks per segment a GPU ring may have (``iket_tui.ring.layout.DEVICE_MIN_CHUNKS``)."""


@dataclass(frozen=True)
class KernelOptions:
    """How kernel tracing runs: drain rate, ring size, and where the ring lives."""

    drain_hz: float = DEFAULT_DRAIN_HZ
    chunks_per_segment: int = DEFAULT_RING_CHUNKS
    ring_file: Path | None = None
    """A ring file (see :class:`~iket_tui.ring.buffer.MappedRing`) to drain instead of a GPU ring."""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.drain_hz) and 0 < self.drain_hz <= 1000):
            raise ValueError(f"drain rate must be between 0 and 1000 Hz, got {self.drain_hz:g}")
        cps = self.chunks_per_segment
        if cps < MIN_RING_CHUNKS or cps & (cps - 1):
            raise ValueError(f"chunks per segment must be a power of two, at least {MIN_RING_CHUNKS}, got {cps}")
