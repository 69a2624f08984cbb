"""The ring's binary layout, described once: numpy dtypes for the reader, the CPU producer and
the wire, and the constants the CUDA runtime is compiled with.

A ring (version 3) is one buffer in device memory: a 256-byte header, one 64-byte descriptor
per region, then the records, ``records_per_region`` of them per region. A warp claims a region
of its own when it begins (one atomic add on the header's claim counter: the claims go round
the regions in order; see :data:`CLAIM_STRIPES`), writes who it is into the region's descriptor,
and then one 16-byte record per event into the region, each carrying a stamp that names the
claim and the record's position.
A warp that writes more records than its region holds laps its own region, so its newest events
stay; its name stays in the descriptor, which its events never overwrite. When claims come
round again the oldest region goes to a new warp: a burst faster than the reader loses whole
warps, the oldest first, never pieces of them. The agent copies the ring to the host with a DMA
engine.

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
RING_VERSION: Final = 3
"""The ring's own version: a region claimed per warp, 16-byte stamped records in device memory."""
MAGIC: Final = b"IKETRING"
LANES: Final = 32
"""Threads in a warp: a chunk is stored by the whole warp, one word per lane per store."""
WARP_SLOTS: Final = 64
"""Warp slots per SM on Hopper: a drained chunk's ``segment`` is ``SM * WARP_SLOTS + warp % WARP_SLOTS``."""
RING_HEADER_BYTES: Final = 256
CHUNK_ALIGN: Final = 4096
ID_BITS_MIN: Final = 5
"""Event ids share the timestamp's low bits; ``%globaltimer`` steps in 32 ns, so 5 bits cost nothing."""
ID_BITS_MAX: Final = 8
RANGE_END_TOKENLESS_ID: Final = 31
"""The id TileLang's frontend gives every range end (``TL_IKET_EVENT(31)``)."""
RECORD_BYTES: Final = 16
RECORDS_PER_CHUNK: Final = 16
"""Region sizes are given in 256-byte units of 16 records (``--ring-chunks``)."""
MIN_RECORDS_PER_REGION: Final = 16
DESCRIPTOR_BYTES: Final = 64
"""A region's descriptor: four 16-byte parts, each stored whole and naming its claim."""
STAMP_LAP_SHIFT: Final = 20
"""A record's stamp is ``(lap << STAMP_LAP_SHIFT) + position + 1`` (modulo 2**32), ``lap`` the
number of times claims went round the regions before its warp's claim: records a region kept
from its earlier warps never carry a stamp its current warp's positions expect."""
MAX_REGION_BITS: Final = 32 - 12
"""At most 2**20 regions: a stamp's lap is the 12 claim bits above the region's, which the device
reads from the claim's low 32 bits."""
CLAIM_STRIPES: Final = 1
"""Claim counters: a warp on SM ``s`` claims from counter ``s % CLAIM_STRIPES``, whose claims take
every ``CLAIM_STRIPES``-th region. One: on the H200, eight counters (132 SMs sharing them 16 or 17
to a counter) cost the GEMMs the same as one (``gpu_ring_variants.py``, ``oneclaim``), and the
uneven share of SMs left a stripe of eight unable to hold what the others held."""
DEFAULT_REGIONS: Final = 16384
"""Regions of the agent's default ring: as many warps (of a block each) as it holds at once."""
DEFAULT_RECORDS_PER_REGION: Final = 512
"""Records per region of the agent's default ring (8 KiB): the events one warp of one block
keeps whole; a warp that writes more keeps its newest this many. ``--ring-chunks N`` gives ``16 N``."""

END_PARTIAL: Final = 1
"""In a descriptor's end flags: not all 32 lanes were active when the warp ended."""
END_DIVERGED: Final = 2
"""In a descriptor's end flags: the lanes disagreed on their position (some events ran on part of the warp)."""
END_COUNT_BITS: Final = 30
"""A descriptor's end word holds the warp's record count in its low 30 bits, its flags above."""
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
FLAG_WARP_LAPPED: Final = 32
"""Events of this warp written before this chunk's first were overwritten before they were read
(the warp wrote more than its region holds, or the drain fell behind it): the warp is not whole."""

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

_HEADER_FIELDS: Final = (
    ("magic", "S8", 0),
    ("version", "<u4", 8),
    ("layout", "<u4", 12),
    ("record_bytes", "<u4", 16),
    ("regions", "<u4", 20),
    ("records_per_region", "<u4", 24),
    ("descriptor_bytes", "<u4", 28),
    ("generation", "<u4", 32),
    ("ring_id", "<u8", 40),
    ("retired_records", "<u8", 48),
    ("retired_events", "<u8", 56),
    ("descriptors_offset", "<u8", 64),
    ("records_offset", "<u8", 72),
    ("total_bytes", "<u8", 80),
    ("warps_ended", "<u8", 96),
    ("events_ended", "<u8", 104),
    ("claims", ("<u8", (CLAIM_STRIPES,)), 128),
)

RING_HEADER_DTYPE: Final = np.dtype(
    {
        "names": [name for name, _, _ in _HEADER_FIELDS],
        "formats": [form for _, form, _ in _HEADER_FIELDS],
        "offsets": [offset for _, _, offset in _HEADER_FIELDS],
        "itemsize": RING_HEADER_BYTES,
    }
)
"""The ring header. ``generation`` is odd while the owner resets the ring; ``retired_*`` are
the totals written in all earlier generations. The warps count themselves: ``claims`` (one
atomic add per warp when it begins, on the counter of its SM's stripe: see :func:`claim_number`),
``warps_ended`` and ``events_ended`` (the records of the warps that ended), so a reader tells an
idle ring from a busy one, and what it has not read yet, by copying the header alone."""

RING_LAYOUT: Final = (RING_VERSION << 16) | RECORD_BYTES
"""The ring's layout id: version and record size."""
CLAIMS_OFFSET: Final = 128
WARPS_ENDED_OFFSET: Final = 96
EVENTS_ENDED_OFFSET: Final = 104

DESCRIPTOR_WORDS: Final = DESCRIPTOR_BYTES // 4
DESCRIPTOR_DTYPE: Final = np.dtype(
    [
        ("tag_a", "<u4"),
        ("launch", "<u4"),  # low 32 bits of %gridid
        ("block_x", "<u4"),
        ("block_yz", "<u4"),  # block_y | block_z << 16
        ("tag_b", "<u4"),
        ("code", "<u4"),  # module << 16 | kernel << 8 | warp
        ("begin_lo", "<u4"),
        ("begin_hi", "<u4"),
        ("tag_c", "<u4"),
        ("shape", "<u4"),  # SM | id_bits << 8 | warps per block << 16
        ("grid_x", "<u4"),
        ("grid_yz", "<u4"),  # gridDim.y | gridDim.z << 16
        ("tag_d", "<u4"),
        ("end_lo", "<u4"),
        ("end_hi", "<u4"),
        ("end_count", "<u4"),  # records written | end flags << END_COUNT_BITS
    ]
)
"""A region's descriptor, four 16-byte parts, each stored whole by one instruction and beginning
with the tag of the claim it belongs to (``claim + 1`` modulo 2**32, so that memory never written
names no claim): three when the warp begins (who it is, when it
began, its launch's shape) and one when it ends (when, how many records, the end flags). A part
whose claim is not the region's current one is not (or no longer) that warp's."""

RECORD_DTYPE: Final = np.dtype([("word", "<u4"), ("hi", "<u4"), ("payload", "<u4"), ("stamp", "<u4")])
"""One ring record, one event: ``word`` = ``(time_lo & ~id_mask) | id`` (id >= 1), ``hi`` = the
time's high half, ``payload`` = the raw payload bits; ``stamp`` = :func:`stamp_base` of the warp's
claim + its position among the warp's records (modulo 2**32), stored with the rest: a reader
takes the record in slot ``p % records_per_region`` as the warp's position ``p`` only when its
stamp says so."""

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


def _chunk_dtype(names: tuple[str, str, str, str], chunk_words: int) -> np.dtype[np.void]:
    first, second, third, last = names
    fields: list[tuple[Any, ...]] = [
        (first, "<u4"),
        (second, "<u4"),
        (third, "<u4"),
        *CHUNK_HEADER_FIELDS[3:],
        ("words", "<u4", (chunk_words - HEADER_WORDS - 1,)),
        (last, "<u4"),
    ]
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
        return _chunk_dtype(("tag", "stamp", "events_before", "tail"), self.chunk_words)

    @cached_property
    def drained_dtype(self) -> np.dtype[np.void]:
        """A chunk as a drain hands it on: the tag word, checked and no longer needed, holds
        the warp's SM and warp slot (``segment``: SM = segment // WARP_SLOTS); the stamp,
        ``events_before`` and tail words hold its launch's shape (``grid_x``, ``grid_yz`` =
        ``gridDim.y | gridDim.z << 16``, ``block_warps`` = warps per block), all 0 where unknown
        (drains of rings before version 3)."""
        return _chunk_dtype(("segment", "grid_x", "grid_yz", "block_warps"), self.chunk_words)


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
    """How big a ring is and where its parts lie: ``regions`` regions (a power of two, at least
    :data:`CLAIM_STRIPES`, so that each region is one stripe's; each one warp's of one block at a
    time) of ``records_per_region`` records (a power of two, at least :data:`MIN_RECORDS_PER_REGION`)."""

    regions: int
    records_per_region: int

    def __post_init__(self) -> None:
        cap = self.records_per_region
        if cap < MIN_RECORDS_PER_REGION or cap & (cap - 1) or cap > 1 << END_COUNT_BITS - 2:
            raise ValueError(f"records per region must be a power of two >= {MIN_RECORDS_PER_REGION}, not {cap}")
        if not CLAIM_STRIPES <= self.regions <= 1 << MAX_REGION_BITS or self.regions & (self.regions - 1):
            raise ValueError(
                f"regions must be a power of two between {CLAIM_STRIPES} and {1 << MAX_REGION_BITS}, not {self.regions}"
            )

    @classmethod
    def default(cls, chunks_per_region: int | None = None) -> RingGeometry:
        """The agent's ring: :data:`DEFAULT_REGIONS` regions of :data:`DEFAULT_RECORDS_PER_REGION`
        records, or of ``chunks_per_region`` 256-byte units (:data:`RECORDS_PER_CHUNK` records)."""
        records = DEFAULT_RECORDS_PER_REGION if chunks_per_region is None else chunks_per_region * RECORDS_PER_CHUNK
        return cls(DEFAULT_REGIONS, records)

    @property
    def region_bits(self) -> int:
        """``regions == 1 << region_bits``: a claim's lap is ``claim >> region_bits``."""
        return self.regions.bit_length() - 1

    @property
    def descriptors_offset(self) -> int:
        return RING_HEADER_BYTES

    @property
    def records_offset(self) -> int:
        end = self.descriptors_offset + self.regions * DESCRIPTOR_BYTES
        return -(-end // CHUNK_ALIGN) * CHUNK_ALIGN

    @property
    def region_bytes(self) -> int:
        return self.records_per_region * RECORD_BYTES

    @property
    def total_bytes(self) -> int:
        return self.records_offset + self.regions * self.region_bytes

    @property
    def capacity_records(self) -> int:
        return self.regions * self.records_per_region

    def stamp_base(self, claim: int) -> int:
        """The stamp of the first record of the warp holding ``claim`` (its next records count
        up from there, modulo 2**32)."""
        return stamp_base(claim, self.region_bits)


def claim_number(stripe_claim: int, stripe: int) -> int:
    """The claim a warp holds when its stripe's counter gave it ``stripe_claim``: ``stripe_claim *
    CLAIM_STRIPES + stripe``. Its region is ``claim % regions`` (every ``CLAIM_STRIPES``-th region
    is the stripe's), its tag ``claim + 1`` and its lap ``claim // regions``, so that two claims of
    one region differ in tag and lap."""
    return stripe_claim * CLAIM_STRIPES + stripe


def stripe_share(regions: int) -> int:
    """Claims of one stripe a ring holds at once: a stripe's claim is lost once its counter is
    this far past it."""
    return regions // CLAIM_STRIPES


def stamp_base(claim: int, region_bits: int) -> int:
    """``((claim >> region_bits) << STAMP_LAP_SHIFT) + 1`` modulo 2**32: what the device's
    runtime starts a warp's stamps at."""
    return (((claim >> region_bits) << STAMP_LAP_SHIFT) + 1) & 0xFFFFFFFF


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
