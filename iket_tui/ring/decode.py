"""Drained chunks to events, vectorised with numpy: no Python runs per event.

A chunk holds its warp's identity once and one 32-bit word per event, ``timestamp | id`` with
the id in the low ``id_bits`` bits; payloads fill the chunk from the back in event order. An
event's time is ``t_base`` (rounded down to the id's granularity) plus the 32-bit difference
of the low words, exact because a drain puts in one chunk only events whose times share their
bits 31 and up.
Kinds and payload types come from the modules' event tables.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from iket_tui.ring.events import ModuleEvents
from iket_tui.ring.layout import (
    DRAINED_EVENTS_PER_CHUNK,
    EVENT_DTYPE,
    EVENT_UNRELIABLE,
    EVENT_WARP_BEGIN,
    EVENT_WARP_END,
    EVENT_WARP_ROW,
    FLAG_DIVERGED,
    FLAG_PARTIAL_WARP,
    FLAG_PAYLOAD_EVERY_EVENT,
    FLAG_WARP_BEGIN,
    FLAG_WARP_END,
    KIND_END,
    KIND_MARK,
    KIND_START,
    KIND_UNKNOWN,
    PAYLOAD_NAMES,
    WARP_SLOTS,
    ChunkLayout,
)

_MASK32 = np.uint64(0xFFFFFFFF)


class EventTables:
    """Kind and payload type of every (module, event id), as one lookup array of code words
    (``id | kind << 8 | payload_type << 16``, as in bytes 12..14 of a decoded event)."""

    def __init__(self, modules: Iterable[ModuleEvents] = ()) -> None:
        self._modules: dict[int, ModuleEvents] = {}
        self.row = np.zeros(1 << 16, dtype=np.uint32)
        """Offset into ``codes`` of each module id's row; row 0 is the unknown module."""
        self.codes = _codes_row(None)
        for module in modules:
            self.add(module)

    def add(self, module: ModuleEvents) -> None:
        """Know ``module``'s table (replacing an earlier table of the same id)."""
        self._modules[module.module] = module
        codes = _codes_row(module)
        offset = int(self.row[module.module])
        if offset == 0:
            self.row[module.module] = len(self.codes)
            self.codes = np.concatenate([self.codes, codes])
        else:
            self.codes[offset : offset + 256] = codes

    def module(self, module: int) -> ModuleEvents | None:
        return self._modules.get(module)

    def __len__(self) -> int:
        return len(self._modules)


def _codes_row(module: ModuleEvents | None) -> np.ndarray[Any, np.dtype[np.uint32]]:
    ids = np.arange(256, dtype=np.uint32)
    kinds = np.full(256, KIND_UNKNOWN, dtype=np.uint32)
    payloads = np.zeros(256, dtype=np.uint32)
    if module is not None:
        for event in module.events:
            kinds[event.event_id] = KIND_MARK if event.kind == "mark" else KIND_START
            payloads[event.event_id] = PAYLOAD_NAMES.index(event.payload_type)
        kinds[module.range_end_id] = KIND_END
    codes: np.ndarray[Any, np.dtype[np.uint32]] = ids | kinds << np.uint32(8) | payloads << np.uint32(16)
    return codes


def decode(
    chunks: np.ndarray[Any, np.dtype[np.void]],
    tables: EventTables,
    layout: ChunkLayout,
    warp_slots: int = WARP_SLOTS,
    scratch: np.ndarray[Any, np.dtype[np.void]] | None = None,
) -> np.ndarray[Any, np.dtype[np.void]]:
    """The events of drained ``chunks`` (``layout.drained_dtype``), in chunk order, with a warp
    row (:data:`~iket_tui.ring.layout.EVENT_WARP_ROW`) where a warp began or ended with no event
    beside it in its chunk.

    Works on (chunk, word) planes, so a chunk's own fields broadcast along its row; the
    unused words of chunks that are not full are dropped at the end. With ``scratch`` (an
    :data:`EVENT_DTYPE` array of at least ``len(chunks) * layout.body_words`` events) the
    result may be a view of it, valid until ``scratch`` is used again: a drain loop that reuses
    it saves the page faults of a fresh array each pass."""
    chunks = np.ascontiguousarray(chunks)
    n_chunks, width = len(chunks), layout.body_words
    counts = chunks["n_events"].astype(np.intp)
    if n_chunks:
        width = int(counts.max())
    raw = chunks.view("<u4").reshape(n_chunks, layout.chunk_words)
    words = raw[:, layout.first_event : layout.first_event + width]
    if scratch is not None and len(scratch) >= n_chunks * width:
        out = scratch[: n_chunks * width].reshape(n_chunks, width)
    else:
        out = np.empty((n_chunks, width), dtype=EVENT_DTYPE)
    as32 = out.view("<u4").reshape(n_chunks, width, 8)
    as64 = out.view("<u8").reshape(n_chunks, width, 4)

    id_mask = ((np.uint32(1) << chunks["id_bits"].astype(np.uint32)) - np.uint32(1))[:, None]
    base = chunks["t_base"] & ~id_mask[:, 0].astype(np.uint64)
    low = words - (base & _MASK32).astype(np.uint32)[:, None]
    low &= ~id_mask
    np.add(low, base[:, None], out=as64[:, :, 0])

    index = words & id_mask
    index += tables.row[chunks["module"]][:, None]
    codes = tables.codes[index]
    codes |= (chunks["kernel"].astype(np.uint32) << 24)[:, None]
    _mark_chunk_flags(codes, chunks["flags"], counts)
    as32[:, :, 3] = codes

    payload_types = (codes >> 16) & 0xFF
    every = (chunks["flags"] & FLAG_PAYLOAD_EVERY_EVENT) != 0
    if n_chunks and every.all() and width <= DRAINED_EVENTS_PER_CHUNK:  # version 2: a slice, no lookup
        first_payload = layout.first_event + DRAINED_EVENTS_PER_CHUNK
        np.multiply(raw[:, first_payload : first_payload + width], payload_types != 0, out=as32[:, :, 2])
    elif chunks["n_payloads"].any():
        has_payload = payload_types != 0
        before = np.cumsum(has_payload, axis=1, dtype=np.intp) - has_payload
        where = layout.last_payload - before
        if every.any():
            after_events = layout.first_event + DRAINED_EVENTS_PER_CHUNK + np.arange(width, dtype=np.intp)
            where = np.where(every[:, None], after_events, where)
        # Columns past a chunk's own events (a batch mixing both kinds of chunk) point anywhere:
        # kept inside the chunk, their words are read and never used.
        np.clip(where, 0, layout.chunk_words - 1, out=where)
        payloads = np.take_along_axis(raw, where, axis=1)
        as32[:, :, 2] = np.where(has_payload, payloads, 0)
    else:
        as32[:, :, 2] = 0

    identity = np.empty((n_chunks, 2), dtype=np.uint64)
    identity[:, 0] = chunks["launch"].astype(np.uint64) | chunks["block_x"].astype(np.uint64) << 32
    identity[:, 1] = (
        chunks["block_y"].astype(np.uint64)
        | chunks["block_z"].astype(np.uint64) << 16
        | chunks["module"].astype(np.uint64) << 32
        | (chunks["segment"] // warp_slots).astype(np.uint64) << 48
        | chunks["warp"].astype(np.uint64) << 56
    )
    out.view("V16").reshape(n_chunks, width, 2)[:, :, 1] = identity.view("V16")[:, 0][:, None]
    if n_chunks and (counts == width).all():
        events = out.reshape(-1)
    else:  # compacted as plain words: a boolean index over a structured array is far slower
        kept = out.view("<u8").reshape(n_chunks, width, 4)[np.arange(width) < counts[:, None]]
        events = kept.reshape(-1).view(EVENT_DTYPE)
    return _with_warp_rows(events, chunks, counts, identity)


def _with_warp_rows(
    events: np.ndarray[Any, np.dtype[np.void]],
    chunks: np.ndarray[Any, np.dtype[np.void]],
    counts: np.ndarray[Any, np.dtype[np.intp]],
    identity: np.ndarray[Any, np.dtype[np.uint64]],
) -> np.ndarray[Any, np.dtype[np.void]]:
    """``events`` with a row for each warp begin or end of a chunk that holds no event, each in
    its chunk's place: the begin at ``t_base`` (when the warp began), the end at ``t_base`` too."""
    flags = chunks["flags"]
    empty = counts == 0
    begin = np.flatnonzero(empty & ((flags & FLAG_WARP_BEGIN) != 0))
    end = np.flatnonzero(empty & ((flags & FLAG_WARP_END) != 0))
    if not len(begin) and not len(end):
        return events
    at = np.concatenate([begin, end])
    order = np.argsort(at, kind="stable")  # a begin before an end of the same chunk
    at = at[order]
    state = np.concatenate([np.full(len(begin), EVENT_WARP_BEGIN), np.full(len(end), EVENT_WARP_END)])[order]
    rows = np.zeros(len(at), dtype=EVENT_DTYPE)
    rows["t_ns"] = chunks["t_base"][at]
    rows["kind"] = KIND_UNKNOWN | EVENT_WARP_ROW | state
    rows["kernel"] = chunks["kernel"][at]
    rows.view("V16").reshape(len(at), 2)[:, 1] = identity[at].view("V16")[:, 0]
    chunk_of = np.concatenate([np.repeat(np.arange(len(chunks)), counts), at])
    merged = np.concatenate([events, rows])
    return merged[np.argsort(chunk_of, kind="stable")]


def _mark_chunk_flags(
    codes: np.ndarray[Any, np.dtype[np.uint32]],
    flags: np.ndarray[Any, np.dtype[np.uint8]],
    counts: np.ndarray[Any, np.dtype[np.intp]],
) -> None:
    """Set the kind's flag bits: unreliable on every event of a partial or diverged warp's
    chunk, warp begin on the first event of a warp, warp end on its last."""
    unreliable = np.flatnonzero(flags & (FLAG_PARTIAL_WARP | FLAG_DIVERGED))
    if len(unreliable):
        codes[unreliable] |= np.uint32(EVENT_UNRELIABLE << 8)
    begun = np.flatnonzero((flags & FLAG_WARP_BEGIN) != 0)
    begun = begun[counts[begun] > 0]
    if len(begun):
        codes[begun, 0] |= np.uint32(EVENT_WARP_BEGIN << 8)
    ended = np.flatnonzero((flags & FLAG_WARP_END) != 0)
    ended = ended[counts[ended] > 0]
    codes[ended, counts[ended] - 1] |= np.uint32(EVENT_WARP_END << 8)


def payload_values(events: np.ndarray[Any, np.dtype[np.void]]) -> np.ndarray[Any, np.dtype[np.object_]]:
    """Each event's payload as a Python value of its type (``None`` without one); for display
    of a few events, not for bulk work (use ``events["payload"].view(...)`` there)."""
    raw = np.ascontiguousarray(events["payload"])
    as_int = raw.view("<i4")
    as_float = raw.view("<f4")
    values = np.empty(len(events), dtype=object)
    for index, kind in enumerate(events["payload_type"]):
        if kind == 1:
            values[index] = int(as_int[index])
        elif kind == 2:
            values[index] = int(raw[index])
        elif kind == 3:
            values[index] = float(as_float[index])
        else:
            values[index] = None
    return values
