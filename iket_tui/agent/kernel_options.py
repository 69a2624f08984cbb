"""Kernel tracing options, importable without numpy (the agent loads the tracer only when it is on)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Final

DEFAULT_DRAIN_HZ: Final = 20.0
DEFAULT_RING_CHUNKS: Final = 32
"""Ring size per warp slot of the device, in 256-byte units of 16 records: 32 is 512 records,
8 KiB of device memory per warp slot (the H200's ring size is in BENCHMARKS.md)."""
MIN_RING_CHUNKS: Final = 16
"""The fewest 256-byte units per warp slot a ring may have (256 records)."""


@dataclass(frozen=True)
class KernelOptions:
    """How kernel tracing runs: drain rate, ring size, and where the rings live."""

    drain_hz: float = DEFAULT_DRAIN_HZ
    chunks_per_segment: int = DEFAULT_RING_CHUNKS
    ring_file: Path | None = None
    """Ring files (see :class:`~iket_tui.ring.buffer.MappedRing`) to drain instead of GPU rings,
    one per device, separated by ``os.pathsep``."""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.drain_hz) and 0 < self.drain_hz <= 1000):
            raise ValueError(f"drain rate must be between 0 and 1000 Hz, got {self.drain_hz:g}")
        cps = self.chunks_per_segment
        if cps < MIN_RING_CHUNKS or cps & (cps - 1):
            raise ValueError(f"chunks per segment must be a power of two, at least {MIN_RING_CHUNKS}, got {cps}")
