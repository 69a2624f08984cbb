"""The ring's binary layout, described once: numpy dtypes for the reader and the CPU producer,
and the per-word packing that the CUDA runtime's generator turns into C.

A ring is one buffer: a 256-byte header, one 8-byte write counter per segment, then the
chunks, ``chunks_per_segment`` of them per segment. A segment belongs to one hardware warp
slot (an SM and a warp slot on it), so it has a single writer at a time. A chunk is what one
warp writes in one go: ``32 * words_per_lane`` little-endian 32-bit words, a header of
:data:`HEADER_WORDS` words, the warp's events from the front, their payloads from the back,
and a copy of the sequence stamp in its last word. ``docs/ring.md`` tells the full story.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Final

import numpy as np

VERSION: Final = 1
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
PUBLISH_EVERY: Final = 4
"""A warp publishes its chunks this many at a time (one fence for all of them): a reader may
see the tags of one such batch arrive in any order."""
DEVICE_MIN_CHUNKS: Final = 4 * PUBLISH_EVERY
"""The fewest chunks per segment of a ring the device runtime writes: a warp announces up to
``2 * PUBLISH_EVERY + 1`` slots ahead of its newest published chunk, and a reader waits for a
batch's late tags only where no announcement can have reached their slots."""
DEFAULT_FLUSH_NS: Final = 1 << 22
"""A staged event older than this (about 4 ms) makes the warp flush at its next event."""

# Chunk flags.
FLAG_WARP_END: Final = 1
"""The warp's last chunk: the warp has finished."""
FLAG_PARTIAL_WARP: Final = 2
"""Not all 32 lanes were active when the chunk was stored: words of missing lanes are stale."""
FLAG_DIVERGED: Final = 4
"""The lanes disagreed on the staging position: some events ran on part of the warp only."""

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
            "chunk_bytes",
            "segments",
            "chunks_per_segment",
            "warp_slots",
            "generation",
            "ring_id",
            "retired_chunks",
            "retired_events",
            "counters_offset",
            "chunks_offset",
            "total_bytes",
        ],
        "formats": ["S8", "<u4", "<u4", "<u4", "<u4", "<u4", "<u4", "<u4", "<u8", "<u8", "<u8", "<u8", "<u8", "<u8"],
        "offsets": [0, 8, 12, 16, 20, 24, 28, 32, 40, 48, 56, 64, 72, 80],
        "itemsize": RING_HEADER_BYTES,
    }
)
"""The ring header. ``generation`` is odd while the owner resets the ring; ``retired_*`` are
the totals written in all earlier generations."""

SEGMENT_COUNTER_DTYPE: Final = np.dtype([("next_chunk", "<u4"), ("events", "<u4")])
"""Per segment: chunks and events written so far, stored by a warp when it finishes so the
next warp in that slot carries on from there."""

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
class WordPart:
    """One header field's bits inside one 32-bit header word."""

    field: str
    shift: int
    """Where the part starts in the word, in bits."""
    bits: int
    field_shift: int
    """Which bits of the field this part holds (0 for fields of 4 bytes or less)."""


@dataclass(frozen=True)
class ChunkLayout:
    """The chunk geometry for ``words_per_lane`` 32-bit registers per lane (a chunk of
    ``128 * words_per_lane`` bytes, stored by the warp as that many coalesced 128-byte rows)."""

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

    def header_words(self) -> list[list[WordPart]]:
        """For each header word, the field parts packed in it, low bits first: what the CUDA
        runtime's generator turns into the expressions of each lane's header word."""
        dtype = self.chunk_dtype
        words: list[list[WordPart]] = [[] for _ in range(HEADER_WORDS)]
        for name, _ in CHUNK_HEADER_FIELDS:
            ftype, offset = dtype.fields[name][:2]  # type: ignore[index]
            size = ftype.itemsize
            if size <= 4:
                if offset // 4 != (offset + size - 1) // 4:
                    raise AssertionError(f"chunk field {name} straddles a word")
                words[offset // 4].append(WordPart(name, 8 * (offset % 4), 8 * size, 0))
            else:
                for part in range(size // 4):
                    words[offset // 4 + part].append(WordPart(name, 0, 32, 32 * part))
        return words


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

    ``segments`` is normally ``SMs * WARP_SLOTS``; ``chunks_per_segment`` is a power of two,
    at least 4 (the CPU producer holds three slots of its segment at once: the chunk it
    publishes, the one it writes and the one it has announced); a ring the device runtime
    writes needs at least :data:`DEVICE_MIN_CHUNKS`.
    """

    segments: int
    chunks_per_segment: int
    layout: ChunkLayout = DEFAULT_LAYOUT

    def __post_init__(self) -> None:
        cap = self.chunks_per_segment
        if cap < 4 or cap & (cap - 1):
            raise ValueError(f"chunks per segment must be a power of two >= 4, not {cap}")
        if not 1 <= self.segments < 1 << 24:
            raise ValueError(f"segments must be between 1 and {1 << 24}, not {self.segments}")

    @classmethod
    def for_sms(cls, sms: int, chunks_per_segment: int, layout: ChunkLayout = DEFAULT_LAYOUT) -> RingGeometry:
        """A ring with one segment for every warp slot of ``sms`` multiprocessors."""
        return cls(sms * WARP_SLOTS, chunks_per_segment, layout)

    @property
    def counters_offset(self) -> int:
        return RING_HEADER_BYTES

    @property
    def chunks_offset(self) -> int:
        end = self.counters_offset + self.segments * SEGMENT_COUNTER_DTYPE.itemsize
        return -(-end // CHUNK_ALIGN) * CHUNK_ALIGN

    @property
    def total_bytes(self) -> int:
        return self.chunks_offset + self.segments * self.chunks_per_segment * self.layout.chunk_bytes

    @property
    def capacity_chunks(self) -> int:
        return self.segments * self.chunks_per_segment


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
