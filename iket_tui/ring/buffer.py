"""Numpy views of a ring laid in memory: a file mapping shared between processes, or the host
copy of a ring in device memory (any writable memory, by address).

The views are the one way every part touches a ring: the CPU producer writes through them,
the drain reads through them, and the ring's owner formats and resets it through them.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import secrets
import threading
from pathlib import Path
from typing import Any

import numpy as np

from iket_tui.ring.layout import (
    DESCRIPTOR_BYTES,
    DESCRIPTOR_DTYPE,
    DESCRIPTOR_WORDS,
    MAGIC,
    RECORD_BYTES,
    RECORD_DTYPE,
    RING_HEADER_BYTES,
    RING_HEADER_DTYPE,
    RING_LAYOUT,
    RING_VERSION,
    RingGeometry,
)

_fence_lock = threading.Lock()


def store_fence() -> None:
    """Order this thread's earlier stores before its later ones, as the device's
    ``__threadfence_system()`` does; a locked instruction is a full barrier on x86 (also for
    the non-temporal stores a large ``memcpy`` may use)."""
    with _fence_lock:
        pass


class RingFormatError(ValueError):
    """Memory that does not hold a ring this version reads; the message is one line."""


class RingView:
    """A ring in ``memory`` (a writable one-dimensional ``uint8`` array): its header, its
    region descriptors and its records, as numpy views (no copies)."""

    def __init__(self, memory: np.ndarray[Any, np.dtype[np.uint8]]) -> None:
        if memory.ndim != 1 or memory.dtype != np.uint8 or len(memory) < RING_HEADER_BYTES:
            raise RingFormatError("ring memory must be at least one header of bytes")
        header = memory[:RING_HEADER_BYTES].view(RING_HEADER_DTYPE)
        if bytes(header["magic"][0]) != MAGIC:
            raise RingFormatError("not an iket-tui ring (bad magic)")
        if int(header["version"][0]) != RING_VERSION or int(header["layout"][0]) != RING_LAYOUT:
            raise RingFormatError(f"ring version {int(header['version'][0])}, this iket-tui reads {RING_VERSION}")
        try:
            geometry = RingGeometry(int(header["regions"][0]), int(header["records_per_region"][0]))
        except ValueError as exc:
            raise RingFormatError(str(exc)) from None
        if (
            int(header["descriptors_offset"][0]) != geometry.descriptors_offset
            or int(header["records_offset"][0]) != geometry.records_offset
            or int(header["total_bytes"][0]) != geometry.total_bytes
            or int(header["record_bytes"][0]) != RECORD_BYTES
            or int(header["descriptor_bytes"][0]) != DESCRIPTOR_BYTES
        ):
            raise RingFormatError("ring header does not match its own geometry")
        if len(memory) < geometry.total_bytes:
            raise RingFormatError(f"ring memory holds {len(memory)} bytes, its header says {geometry.total_bytes}")
        self.memory = memory
        self.geometry = geometry
        self.header = header
        descriptors_end = geometry.descriptors_offset + geometry.regions * DESCRIPTOR_BYTES
        self.descriptors = memory[geometry.descriptors_offset : descriptors_end].view(DESCRIPTOR_DTYPE)
        """One per region: who holds it (see :data:`~iket_tui.ring.layout.DESCRIPTOR_DTYPE`)."""
        self.descriptor_words = self.descriptors.view("<u4").reshape(geometry.regions, DESCRIPTOR_WORDS)
        area = memory[geometry.records_offset : geometry.total_bytes]
        self.records = area.view(RECORD_DTYPE).reshape(geometry.regions, geometry.records_per_region)
        """Shape (regions, records_per_region): a warp's position ``p`` lies in slot ``p % records_per_region``."""
        self.record_words = area.view("<u4").reshape(geometry.regions, geometry.records_per_region, 4)

    @classmethod
    def format(
        cls, memory: np.ndarray[Any, np.dtype[np.uint8]], geometry: RingGeometry, ring_id: int | None = None
    ) -> RingView:
        """Lay an empty ring of ``geometry`` into ``memory`` (generation 0) and view it."""
        if len(memory) < geometry.total_bytes:
            raise RingFormatError(f"{geometry.total_bytes} bytes needed for this ring, {len(memory)} given")
        memory[: geometry.total_bytes] = 0
        header = memory[:RING_HEADER_BYTES].view(RING_HEADER_DTYPE)
        header["magic"] = MAGIC
        header["version"] = RING_VERSION
        header["layout"] = RING_LAYOUT
        header["record_bytes"] = RECORD_BYTES
        header["regions"] = geometry.regions
        header["records_per_region"] = geometry.records_per_region
        header["descriptor_bytes"] = DESCRIPTOR_BYTES
        header["ring_id"] = secrets.randbits(63) if ring_id is None else ring_id
        header["descriptors_offset"] = geometry.descriptors_offset
        header["records_offset"] = geometry.records_offset
        header["total_bytes"] = geometry.total_bytes
        return cls(memory)

    @property
    def ring_id(self) -> int:
        return int(self.header["ring_id"][0])

    @property
    def generation(self) -> int:
        return int(self.header["generation"][0])

    @property
    def retired(self) -> tuple[int, int]:
        """Records and events written in all earlier generations."""
        return int(self.header["retired_records"][0]), int(self.header["retired_events"][0])

    @property
    def warps(self) -> tuple[int, int, int]:
        """Warps that claimed a region, warps that ended, and the records those wrote (this
        generation)."""
        header = self.header
        claims = int(header["claims"][0].sum(dtype=np.uint64))
        return claims, int(header["warps_ended"][0]), int(header["events_ended"][0])

    @property
    def stripe_claims(self) -> list[int]:
        """Each claim stripe's count of claims (this generation)."""
        return [int(count) for count in self.header["claims"][0].reshape(-1)]

    def begin_generation(self) -> int:
        """Empty the ring for a new generation and return its number; the owner calls this
        only while no writer is active. Readers see an odd generation while it runs and count
        whatever the old generation wrote and they had not read as lost."""
        generation = self.generation
        self.header["generation"] = generation + 1
        store_fence()
        _, _, events = self.warps
        self.memory[self.geometry.descriptors_offset : self.geometry.total_bytes] = 0
        old_records, old_events = self.retired
        self.header["retired_records"] = old_records + events
        self.header["retired_events"] = old_events + events
        for name in ("claims", "warps_ended", "events_ended"):
            self.header[name] = 0
        store_fence()
        self.header["generation"] = generation + 2
        return generation + 2


class MappedRing:
    """A ring in a file mapped into memory: shared by every process that opens the path."""

    def __init__(self, path: Path, mapping: mmap.mmap) -> None:
        self.path = path
        self._mapping = mapping
        self.view = RingView(np.frombuffer(mapping, dtype=np.uint8))

    @classmethod
    def create(cls, path: str | os.PathLike[str], geometry: RingGeometry, ring_id: int | None = None) -> MappedRing:
        """A new, empty ring in a new file at ``path``."""
        path = Path(path)
        with path.open("xb+") as file:
            file.truncate(geometry.total_bytes)
            mapping = mmap.mmap(file.fileno(), geometry.total_bytes)
        RingView.format(np.frombuffer(mapping, dtype=np.uint8), geometry, ring_id)
        return cls(path, mapping)

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> MappedRing:
        """The ring another process created at ``path``."""
        path = Path(path)
        with path.open("rb+") as file:
            size = os.fstat(file.fileno()).st_size
            if size < RING_HEADER_BYTES:
                raise RingFormatError(f"{path} is too small to hold a ring")
            mapping = mmap.mmap(file.fileno(), size)
        return cls(path, mapping)

    def close(self) -> None:
        """Unmap now if no array refers to the mapping any more, else when the last one goes."""
        with contextlib.suppress(BufferError):
            self._mapping.close()


def memory_at(address: int, size: int) -> np.ndarray[Any, np.dtype[np.uint8]]:
    """``size`` bytes of this process's memory at ``address`` as a writable array, for a ring
    in memory allocated elsewhere (``cudaHostAlloc``); the caller keeps the allocation alive."""
    if address <= 0 or size <= 0:
        raise ValueError("a ring needs a non-null address and a positive size")
    raw = (ctypes.c_uint8 * size).from_address(address)
    return np.ctypeslib.as_array(raw)
