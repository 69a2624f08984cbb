"""Kernel tracing options, importable without numpy (the agent loads the tracer only when it is on)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Final

DEFAULT_DRAIN_HZ: Final = 20.0
DEFAULT_RING_CHUNKS: Final = 32
"""The ring's region (what one warp of one block writes into) in 256-byte units of 16 records:
32 is 512 records, 8 KiB; a warp that writes more keeps its newest 512 events."""
MIN_RING_CHUNKS: Final = 1
"""The fewest 256-byte units a region may have (16 records)."""
DEFAULT_RING_BYTES: Final = 128 << 20
"""The ring's records in all: 128 MiB is 16,384 regions of 8 KiB, 8,388,608 events (plus 1 MiB of
region descriptors and a header)."""
MIN_RING_BYTES: Final = 1 << 20
MAX_RING_BYTES: Final = 64 << 30


@dataclass(frozen=True)
class KernelOptions:
    """How kernel tracing runs: drain rate, ring size, and where the rings live."""

    drain_hz: float = DEFAULT_DRAIN_HZ
    chunks_per_region: int = DEFAULT_RING_CHUNKS
    ring_bytes: int = DEFAULT_RING_BYTES
    """The records' size: the ring has the most regions (a power of two) that fit in it."""
    ring_file: Path | None = None
    """Ring files (see :class:`~iket_tui.ring.buffer.MappedRing`) to drain instead of GPU rings,
    one per device, separated by ``os.pathsep``."""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.drain_hz) and 0 < self.drain_hz <= 1000):
            raise ValueError(f"drain rate must be between 0 and 1000 Hz, got {self.drain_hz:g}")
        cps = self.chunks_per_region
        if cps < MIN_RING_CHUNKS or cps & (cps - 1) or cps > 1 << 16:
            raise ValueError(f"ring chunks must be a power of two, at least {MIN_RING_CHUNKS}, got {cps}")
        if not MIN_RING_BYTES <= self.ring_bytes <= MAX_RING_BYTES:
            raise ValueError(f"the ring size must be between 1 MiB and 64 GiB, got {self.ring_bytes} bytes")
        if self.ring_bytes < 8 * cps * 256:
            raise ValueError(f"a ring of {self.ring_bytes} bytes holds fewer than 8 regions of {cps * 256} bytes")

    @property
    def regions(self) -> int:
        """Regions of the ring: the largest power of two whose records fit in :attr:`ring_bytes`."""
        return 1 << ((self.ring_bytes // (256 * self.chunks_per_region)).bit_length() - 1)

    @property
    def records_per_region(self) -> int:
        return 16 * self.chunks_per_region
