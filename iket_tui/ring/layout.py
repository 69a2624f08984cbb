"""The ring's binary layout, described once: numpy dtypes for the reader, the CPU producer and
the wire, and the constants the CUDA runtime is compiled with.

A ring (version 2) is one buffer in device memory: a 256-byte header, one 8-byte counter pair
per segment, then the records, ``records_per_segment`` of them per segment. A segment belongs
to one hardware warp slot (an SM and a warp slot on it), so it has a single writer at a time.
A record is 16 bytes, stored by the warp in one instruction, and carries its own sequence stamp:
an event (time and id, payload), or one of the records a warp writes when it begins (its
identity) and ends. The agent copies the ring to the host with a DMA engine.

What a drain hands on, and what travels to clients, is a *drained chunk* (:class:`ChunkLayout`):
a warp's identity once, then its events' time words and payloads; ``docs/ring.md`` tells the
full story.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Final

import numpy as np

VERSION: Final = 1
"""The drained chunk format's version (part of its layout id on the wire)."""
RING_VERSION: Final = 2
"""The ring's own version: 16-byte stamped records in device memory."""
MAGIC: Final = b"IKETRING"
LANES: Final = 32
"""Threads in a warp: a chunk is stored by the whole warp, one word per lane per store."""
WARP_SLOTS: Final = 64
"""Warp slots per SM on Hopper: segment = SM * WARP_SLOTS + warp slot."""
RING_HEADER_BYTES: Final = 256
CHUNK_ALIGN: Final = 4096
ID_BITS_MIN: Final = 5
"""Event ids share the timestamp's low bits; ``%globaltimer`` steps in 32 ns, so 5 bits cost nothing."""
ID_BITS_MAX: Final = 8
RANGE_END_TOKENLESS_ID: Final = 31
"""The id TileLang's frontend gives every range end (``TL_IKET_EVENT(31)``)."""
RECORD_BYTES: Final = 16
RECORDS_PER_CHUNK: Final = 16
"""Ring sizes are given in 256-byte units of 16 records (``--ring-chunks``)."""
MIN_RECORDS_PER_SEGMENT: Final = 16
BEGIN_RECORDS: Final = 3
"""Records a warp writes when it begins: :data:`RECORD_BEGIN`, :data:`RECORD_LAUNCH`, :data:`RECORD_BLOCK`."""

# Record types: a record whose word has its low 8 bits zero is a warp's own record (no event id
# is 0), its type in bits 8..11.
RECORD_EVENT: Final = 0
RECORD_BEGIN: Final = 1
"""word: type | id_bits << 12 | kernel << 16 | warp << 24; hi, payload: the begin time (high, low)."""
RECORD_LAUNCH: Final = 2
"""word: type | module << 16; hi: launch (low 32 bits of %gridid); payload: block_x."""
RECORD_BLOCK: Final = 3
"""word: type | SM << 16; hi: block_y | block_z << 16; payload: the segment's events before this warp."""
RECORD_END: Final = 4
"""word: type | end flags << 12; hi, payload: the end time (high, low)."""
END_PARTIAL: Final = 1
"""In an end record's flags: not all 32 lanes were active when the warp ended."""
END_DIVERGED: Final = 2
"""In an end record's flags: the lanes disagreed on their position (some events ran on part of the warp)."""
DRAINED_EVENTS_PER_CHUNK: Final = 26
"""Events in one drained chunk at most: 26 event words then 26 payload words, 52 of a 256-byte
chunk's 53 body words."""

# Chunk flags.
FLAG_WARP_END: Final = 1
"""The warp's last chunk: the warp has finished."""
FLAG_PARTIAL_WARP: Final = 2
"""Not all 32 lanes were active when the chunk was stored: words of missing lanes are stale."""
FLAG_DIVERGED: Final = 4
"""The lanes disagreed on their position: some events ran on part of the warp only."""
FLAG_WARP_BEGIN: Final = 8
"""The warp's first chunk: ``t_base`` is the time the warp began."""
FLAG_PAYLOAD_EVERY_EVENT: Final = 16
"""Every event has a payload word, used or not: event ``k``'s in word ``HEADER_WORDS +
DRAINED_EVENTS_PER_CHUNK + k``, after the (at most :data:`DRAINED_EVENTS_PER_CHUNK`) events."""

# Event kinds, as decoded.
KIND_MARK: Final = 0
KIND_START: Final = 1
KIND_END: Final = 2
KIND_UNKNOWN: Final = 3
"""An id the module's event table does not know (or a chunk from an unknown module)."""
KIND_MASK: Final = 3
EVENT_WARP_END: Final = 0x80
"""Set in ``kind`` on the last event of a warp."""
EVENT_UNRELIABLE: Final = 0x40
"""Set in ``kind`` on every event of a chunk with :data:`FLAG_PARTIAL_WARP` or :data:`FLAG_DIVERGED`."""
EVENT_WARP_BEGIN: Final = 0x20
"""Set in ``kind`` on the first row of a warp: its first event, or a warp row at the time it began."""
EVENT_WARP_ROW: Final = 0x10
"""Set in ``kind`` on a row that is no IKET event but a warp beginning or ending with no event of
its own beside it (``event`` 0, ``kind & KIND_MASK`` unknown, with :data:`EVENT_WARP_BEGIN` or
:data:`EVENT_WARP_END`): a warp that began and has written nothing yet shows this way."""
KIND_NAMES: Final = ("mark", "start", "end", "unknown")

# Payload types, as decoded.
PAYLOAD_NONE: Final = 0
PAYLOAD_INT32: Final = 1
PAYLOAD_UINT32: Final = 2
PAYLOAD_FLOAT32: Final = 3
PAYLOAD_NAMES: Final = ("none", "int32", "uint32", "float32")

CHUNK_HEADER_FIELDS: Final[tuple[tuple[str, str], ...]] = (
    ("tag", "<u4"),  # seq + 1 once published; 0 while being written or never written
    ("stamp", "<u4"),  # seq + 1, written with the body: a body older than its tag is caught
    ("events_before", "<u4"),  # events of this segment in earlier chunks, modulo 2**32
    ("module", "<u2"),
    ("kernel", "u1"),  # the kernel's index in its module
    ("flags", "u1"),
    ("launch", "<u4"),  # low 32 bits of %gridid
    ("block_x", "<u4"),
    ("block_y", "<u2"),
    ("block_z", "<u2"),
    ("warp", "u1"),  # warp index in its block
    ("n_events", "u1"),
    ("n_payloads", "u1"),
    ("id_bits", "u1"),
    ("t_base", "<u8"),  # %globaltimer (ns) no later than any event in the chunk
)
"""The chunk header, in order; :data:`HEADER_WORDS` 32-bit words."""

HEADER_BYTES: Final = 40
HEADER_WORDS: Final = HEADER_BYTES // 4

RING_HEADER_DTYPE: Final = np.dtype(
    {
        "names": [
            "magic",
            "version",
            "layout",
            "record_bytes",
            "segments",
            "records_per_segment",
            "warp_slots",
            "generation",
            "ring_id",
            "retired_records",
            "retired_events",
            "counters_offset",
            "records_offset",
            "total_bytes",
            "warps_started",
            "warps_ended",
        ],
        "formats": [
            "S8",
            "<u4",
            "<u4",
            "<u4",
            "<u4",
            "<u4",
            "<u4",
            "<u4",
            "<u8",
            "<u8",
            "<u8",
            "<u8",
            "<u8",
            "<u8",
            "<u8",
            "<u8",
        ],
        "offsets": [0, 8, 12, 16, 20, 24, 28, 32, 40, 48, 56, 64, 72, 80, 88, 96],
        "itemsize": RING_HEADER_BYTES,
    }
)
"""The ring header. ``generation`` is odd while the owner resets the ring; ``retired_*`` are
the totals written in all earlier generations; ``warps_started`` and ``warps_ended`` are counted
by the warps (one atomic each per warp), so a reader tells an idle ring from a busy one by
copying the header alone."""

RING_LAYOUT: Final = (RING_VERSION << 16) | RECORD_BYTES
"""The ring's layout id: version and record size."""
WARPS_STARTED_OFFSET: Final = 88
WARPS_ENDED_OFFSET: Final = 96

SEGMENT_COUNTER_DTYPE: Final = np.dtype([("next", "<u4"), ("events", "<u4")])
"""Per segment: records and events written so far (modulo 2**32), stored by a warp when it
finishes so the next warp in that slot carries on from there."""

RECORD_DTYPE: Final = np.dtype([("word", "<u4"), ("hi", "<u4"), ("payload", "<u4"), ("stamp", "<u4")])
"""One ring record. An event: ``word`` = ``(time_lo & ~id_mask) | id`` (id >= 1), ``hi`` = the
time's high half, ``payload`` = the raw payload bits; a warp's own record has ``word & 0xff == 0``
(see ``RECORD_*``). ``stamp`` = position in the segment + 1 (modulo 2**32), stored with the
rest: a reader takes the record at position ``p`` only when its stamp is ``p + 1``."""

EVENT_DTYPE: Final = np.dtype(
    [
        ("t_ns", "<u8"),
        ("payload", "<u4"),
        ("event", "u1"),
        ("kind", "u1"),
        ("payload_type", "u1"),
        ("kernel", "u1"),
        ("launch", "<u4"),
        ("block_x", "<u4"),
        ("block_y", "<u2"),
        ("block_z", "<u2"),
        ("module", "<u2"),
        ("sm", "u1"),
        ("warp", "u1"),
    ]
)
"""One decoded event (32 bytes). ``kind & KIND_MASK`` is the kind; ``payload`` holds the raw
32 bits, read as ``payload_type`` says. Bytes 12..15 are the event's code word (event, kind,
payload type, kernel) and bytes 16..31 the warp's identity, so a decoder fills them in one
store each."""


def _chunk_dtype(first_name: str, chunk_words: int) -> np.dtype[np.void]:
    fields: list[tuple[Any, ...]] = [(first_name, CHUNK_HEADER_FIELDS[0][1]), *CHUNK_HEADER_FIELDS[1:]]
    fields.append(("words", "<u4", (chunk_words - HEADER_WORDS - 1,)))
    fields.append(("tail", "<u4"))
    return np.dtype(fields)


@dataclass(frozen=True)
class ChunkLayout:
    """The drained chunk geometry: ``128 * words_per_lane`` bytes (the ring of version 1 staged
    a chunk in ``words_per_lane`` registers per lane; drains of version 2 write 256-byte chunks)."""

    words_per_lane: int = 2

    def __post_init__(self) -> None:
        if self.words_per_lane not in (1, 2, 4):
            raise ValueError(f"words per lane must be 1, 2 or 4, not {self.words_per_lane}")

    @property
    def chunk_words(self) -> int:
        return LANES * self.words_per_lane

    @property
    def chunk_bytes(self) -> int:
        return 4 * self.chunk_words

    @property
    def first_event(self) -> int:
        """Word index of a chunk's first event."""
        return HEADER_WORDS

    @property
    def last_payload(self) -> int:
        """Word index of a chunk's first payload; later payloads go downwards."""
        return self.chunk_words - 2

    @property
    def tail(self) -> int:
        """Word index of the tail stamp."""
        return self.chunk_words - 1

    @property
    def body_words(self) -> int:
        """Words shared by events (from the front) and payloads (from the back)."""
        return self.chunk_words - HEADER_WORDS - 1

    @property
    def layout_id(self) -> int:
        """Names this layout on the wire: version, header words, chunk words."""
        return (VERSION << 16) | (HEADER_WORDS << 8) | self.chunk_words

    @cached_property
    def chunk_dtype(self) -> np.dtype[np.void]:
        """A chunk as it lies in the ring."""
        return _chunk_dtype("tag", self.chunk_words)

    @cached_property
    def drained_dtype(self) -> np.dtype[np.void]:
        """A chunk as a drain hands it on: the tag word, checked and no longer needed, holds
        the segment the chunk came from (SM = segment // WARP_SLOTS)."""
        return _chunk_dtype("segment", self.chunk_words)


DEFAULT_LAYOUT: Final = ChunkLayout()

LAYOUTS: Final = {layout.layout_id: layout for layout in (ChunkLayout(1), ChunkLayout(2), ChunkLayout(4))}
"""Every layout this version reads, by id."""


def layout_by_id(layout_id: int) -> ChunkLayout:
    """The layout named ``layout_id``; a one-line ``ValueError`` for any other."""
    try:
        return LAYOUTS[layout_id]
    except KeyError:
        raise ValueError(f"unknown ring layout 0x{layout_id:x}") from None


@dataclass(frozen=True)
class RingGeometry:
    """How big a ring is and where its parts lie.

    ``segments`` is normally ``SMs * WARP_SLOTS``; ``records_per_segment`` is a power of two,
    at least :data:`MIN_RECORDS_PER_SEGMENT`.
    """

    segments: int
    records_per_segment: int

    def __post_init__(self) -> None:
        cap = self.records_per_segment
        if cap < MIN_RECORDS_PER_SEGMENT or cap & (cap - 1):
            raise ValueError(f"records per segment must be a power of two >= {MIN_RECORDS_PER_SEGMENT}, not {cap}")
        if not 1 <= self.segments < 1 << 24:
            raise ValueError(f"segments must be between 1 and {1 << 24}, not {self.segments}")

    @classmethod
    def for_sms(cls, sms: int, chunks_per_segment: int) -> RingGeometry:
        """A ring with one segment for every warp slot of ``sms`` multiprocessors, of
        ``chunks_per_segment`` 256-byte units (:data:`RECORDS_PER_CHUNK` records) each."""
        return cls(sms * WARP_SLOTS, chunks_per_segment * RECORDS_PER_CHUNK)

    @property
    def counters_offset(self) -> int:
        return RING_HEADER_BYTES

    @property
    def records_offset(self) -> int:
        end = self.counters_offset + self.segments * SEGMENT_COUNTER_DTYPE.itemsize
        return -(-end // CHUNK_ALIGN) * CHUNK_ALIGN

    @property
    def segment_bytes(self) -> int:
        return self.records_per_segment * RECORD_BYTES

    @property
    def total_bytes(self) -> int:
        return self.records_offset + self.segments * self.segment_bytes

    @property
    def capacity_records(self) -> int:
        return self.segments * self.records_per_segment


def id_bits_for(max_event_id: int) -> int:
    """The fewest id bits (at least :data:`ID_BITS_MIN`) whose range-end id, all ones, lies
    above ``max_event_id``; a one-line ``ValueError`` when no width up to 8 bits will do."""
    bits = ID_BITS_MIN
    while (1 << bits) - 1 <= max_event_id:
        bits += 1
    if bits > ID_BITS_MAX:
        raise ValueError(f"too many IKET events in one module (largest id {max_event_id}, at most 253 events)")
    return bits


def range_end_id(id_bits: int) -> int:
    """The id a range end carries in a module with ``id_bits`` id bits."""
    return (1 << id_bits) - 1
