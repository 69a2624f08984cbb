"""What a drain accounts for and hands on: the ring's counters and a batch of drained chunks.

Plain values (numpy only, no ring access), so that whatever receives batches or counters (the
wire, the model) needs neither the drain nor the ring's memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Final

import numpy as np

from iket_tui.ring.decode import EventTables, decode
from iket_tui.ring.layout import ChunkLayout

LOSS_OVERWRITTEN: Final = 1
"""A warp wrote more than its region holds (or the drain fell behind it): its oldest events
unread were overwritten by its own later ones."""
LOSS_LAPPED: Final = 2
"""The warp's region was claimed by a later warp before the warp was read to its end: the ring
went round faster than the host read it."""
LOSS_TORN: Final = 3
"""The warp ended but some of its records never became readable."""
LOSS_REASONS: Final = {LOSS_OVERWRITTEN: "overwritten", LOSS_LAPPED: "lapped", LOSS_TORN: "torn"}

LOSS_DTYPE: Final = np.dtype(
    [
        ("launch", "<u4"),
        ("block_x", "<u4"),
        ("block_y", "<u2"),
        ("block_z", "<u2"),
        ("module", "<u2"),
        ("kernel", "u1"),
        ("warp", "u1"),
        ("sm", "u1"),
        ("reason", "u1"),
        ("pad", "<u2"),
        ("events", "<i4"),
    ]
)
"""One warp's loss that a drain can name (24 bytes): the warp, why (``LOSS_*``), and how many of
its events were lost (-1: not known, the warp had not ended)."""


@dataclass(frozen=True)
class RingCounters:
    """What a drain has accounted for, in chunks and in events, since it started."""

    generation: int = 0
    chunks_written: int = 0
    """Ring records written (chunks in ring version 1): every record is read or lost."""
    chunks_read: int = 0
    chunks_lost: int = 0
    events_written: int = 0
    events_read: int = 0
    events_lost: int = 0
    torn: int = 0
    """Records whose stamp was right but whose content was impossible (counted lost)."""
    resets: int = 0
    """Generation changes seen."""
    warps_lost: int = 0
    """Warps (of one block each) that lost events: overwritten by the ring before they were read
    whole, torn, or never read at all (``warps_unread``)."""
    warps_unread: int = 0
    """Warps the ring went round before the reader read even their names."""

    def plus(self, deltas: dict[str, int]) -> RingCounters:
        """These counters with ``deltas`` added, field by field."""
        return replace(self, **{name: getattr(self, name) + value for name, value in deltas.items()})

    @property
    def balanced(self) -> bool:
        return (
            self.chunks_written == self.chunks_read + self.chunks_lost
            and self.events_written == self.events_read + self.events_lost
        )

    def to_fields(self) -> dict[str, int]:
        return {
            "generation": self.generation,
            "chunks_written": self.chunks_written,
            "chunks_read": self.chunks_read,
            "chunks_lost": self.chunks_lost,
            "events_written": self.events_written,
            "events_read": self.events_read,
            "events_lost": self.events_lost,
            "torn": self.torn,
            "resets": self.resets,
            "warps_lost": self.warps_lost,
            "warps_unread": self.warps_unread,
        }


@dataclass(frozen=True)
class DrainBatch:
    """The drained chunks of one pass (in segment then position order) and the counters after it."""

    chunks: np.ndarray[Any, np.dtype[np.void]]
    counters: RingCounters
    layout: ChunkLayout
    ring_id: int
    generation_changed: bool = False
    device_now_ns: int | None = None
    """The writers' clock (the GPU's ``%globaltimer``) estimated at the pass, where known."""
    losses: np.ndarray[Any, np.dtype[np.void]] = field(default_factory=lambda: np.zeros(0, dtype=LOSS_DTYPE))
    """The warps that lost events in this pass and could be named (:data:`LOSS_DTYPE`)."""

    @property
    def events(self) -> int:
        return int(self.chunks["n_events"].sum(dtype=np.int64))

    def decode(self, tables: EventTables) -> np.ndarray[Any, np.dtype[np.void]]:
        """The batch's events (see :data:`~iket_tui.ring.layout.EVENT_DTYPE`)."""
        return decode(self.chunks, tables, self.layout)

    def split(self, max_chunks: int) -> list[DrainBatch]:
        """The batch cut into batches of at most ``max_chunks`` chunks (to fit in a frame);
        each carries the same counters."""
        if len(self.chunks) <= max_chunks:
            return [self]
        return [
            replace(
                self,
                chunks=self.chunks[start : start + max_chunks],
                losses=self.losses if start == 0 else self.losses[:0],
            )
            for start in range(0, len(self.chunks), max_chunks)
        ]
