"""The two messages that carry kernel events to clients, built and read back.

``kernel_module`` carries a module's event table, sent when the module is compiled (before any
launch); ``kernel_records`` carries one drain batch: the drained chunks as one binary field,
the layout that reads them, and the drain's counters. Both are plain msgpack maps like every
other message; docs/ring.md lists their fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from iket_tui.protocol.messages import KERNEL_MODULE, KERNEL_RECORDS
from iket_tui.ring.counters import LOSS_DTYPE, LOSS_REASONS, DrainBatch, RingCounters
from iket_tui.ring.events import EventTableError, ModuleEvents
from iket_tui.ring.layout import (
    DRAINED_EVENTS_PER_CHUNK,
    FLAG_PAYLOAD_EVERY_EVENT,
    ID_BITS_MAX,
    ID_BITS_MIN,
    LAYOUTS,
    WARP_SLOTS,
    ChunkLayout,
)

_COUNTER_FIELDS: Final = tuple(RingCounters().to_fields())
_OPTIONAL_COUNTERS: Final = frozenset({"warps_lost", "warps_unread"})
"""Counters a drain of a ring before version 3 did not send (read as 0)."""
_MAX_LOSSES: Final = 1 << 20
_COUNTER_END: Final = 1 << 63
_RING_ID_END: Final = 1 << 64
_WARP_SLOTS_END: Final = 257
_SMS: Final = 256
"""SMs a chunk's segment may name: ``sm`` is one byte of a decoded event."""


class RecordsError(ValueError):
    """A ``kernel_records`` message that cannot be read; the message is one line."""


def kernel_module(
    events: ModuleEvents, *, ring_id: int | None, layout: ChunkLayout, t_ns: int, compile: int | None = None
) -> dict[str, Any]:
    """The ``kernel_module`` message for a freshly instrumented module."""
    return {
        "type": KERNEL_MODULE,
        **events.to_fields(),
        "ring_id": ring_id,
        "layout": layout.layout_id,
        "compile": compile,
        "t_ns": t_ns,
    }


def module_from_message(msg: Mapping[str, Any]) -> ModuleEvents:
    """The event table of a ``kernel_module`` message (raises :class:`EventTableError`)."""
    if msg.get("type") != KERNEL_MODULE:
        raise EventTableError(f"expected a {KERNEL_MODULE} message, got {msg.get('type')!r}")
    return ModuleEvents.from_fields(msg)


def kernel_records(batch: DrainBatch, *, t_ns: int) -> dict[str, Any]:
    """The ``kernel_records`` message for one drain batch (split big batches first, see
    :meth:`DrainBatch.split`: a frame holds at most 16 MiB). ``t_ns`` is the agent's clock when
    it is sent; ``device_now_ns`` the device's clock estimated at the drain's pass (``None``
    where unknown), against which a client tells how long ago a warp's last event ran."""
    return {
        "type": KERNEL_RECORDS,
        "ring_id": batch.ring_id,
        "layout": batch.layout.layout_id,
        "warp_slots": WARP_SLOTS,
        "count": len(batch.chunks),
        "chunks": batch.chunks.tobytes(),
        "generation_changed": batch.generation_changed,
        "counters": batch.counters.to_fields(),
        "t_ns": t_ns,
        "device_now_ns": batch.device_now_ns,
        "losses": batch.losses.tobytes(),
    }


def _no_losses() -> np.ndarray[Any, np.dtype[np.void]]:
    return np.zeros(0, dtype=LOSS_DTYPE)


@dataclass(frozen=True)
class Records:
    """A ``kernel_records`` message read back: chunks ready for :func:`~iket_tui.ring.decode.decode`."""

    chunks: np.ndarray[Any, np.dtype[np.void]]
    layout: ChunkLayout
    counters: RingCounters
    ring_id: int
    warp_slots: int
    generation_changed: bool
    device_now_ns: int | None = None
    """The device's clock at the drain's pass, where the agent knew it."""
    losses: np.ndarray[Any, np.dtype[np.void]] = field(default_factory=_no_losses)
    """The warps of the batch's pass that lost events, named (:data:`~iket_tui.ring.counters.LOSS_DTYPE`)."""


def records_from_message(msg: Mapping[str, Any]) -> Records:
    """Check and read a ``kernel_records`` message without copying its chunks.

    Every field must be one a drain can have sent: a known layout, a chunk count that matches
    the bytes, counters that are integers in 0..2**63, a ring id in 0..2**64 and warp slots in
    1..256 (null or absent read as 0 and 64), and chunks that the drain's own checks pass (no more
    events and payloads than a chunk has words, 5 to 8 id bits, fewer than 256 SMs). Anything
    else raises :class:`RecordsError`: the batch is damaged, and decoding it could only mislead.
    """
    layout_id, count, blob, counters = msg.get("layout"), msg.get("count"), msg.get("chunks"), msg.get("counters")
    if type(layout_id) is not int or layout_id not in LAYOUTS:
        shown = f"0x{layout_id:x}" if type(layout_id) is int else _shown(layout_id)
        raise RecordsError(f"kernel_records of an unknown ring layout {shown}")
    layout = LAYOUTS[layout_id]
    if type(count) is not int or not isinstance(blob, bytes | bytearray | memoryview):
        raise RecordsError("kernel_records without a count and chunk bytes")
    if count < 0 or len(blob) != count * layout.chunk_bytes:
        raise RecordsError(f"kernel_records holds {len(blob)} bytes for {count} chunks of {layout.chunk_bytes}")
    if not isinstance(counters, Mapping) or not all(
        _in_range(_optional(counters.get(k), 0) if k in _OPTIONAL_COUNTERS else counters.get(k), 0, _COUNTER_END)
        for k in _COUNTER_FIELDS
    ):
        raise RecordsError("kernel_records without its counters (integers from 0 to 2**63)")
    lost_blob = msg.get("losses")
    if lost_blob is None:
        losses = _no_losses()
    elif not isinstance(lost_blob, bytes | bytearray | memoryview) or len(lost_blob) % LOSS_DTYPE.itemsize:
        raise RecordsError("kernel_records whose losses are not whole loss records")
    elif len(lost_blob) > _MAX_LOSSES * LOSS_DTYPE.itemsize:
        raise RecordsError(f"kernel_records naming more than {_MAX_LOSSES} lost warps")
    else:
        losses = np.frombuffer(lost_blob, dtype=LOSS_DTYPE)
        if len(losses) and (~np.isin(losses["reason"], list(LOSS_REASONS)) | (losses["events"] < -1)).any():
            raise RecordsError("kernel_records naming a loss of no reason there is")
    ring_id = _optional(msg.get("ring_id"), 0)
    if not _in_range(ring_id, 0, _RING_ID_END):
        raise RecordsError(f"kernel_records of an impossible ring id {_shown(ring_id)}")
    warp_slots = _optional(msg.get("warp_slots"), WARP_SLOTS)
    if not _in_range(warp_slots, 1, _WARP_SLOTS_END):
        raise RecordsError(f"kernel_records with an impossible warp_slots {_shown(warp_slots)}")
    device_now = msg.get("device_now_ns")
    if device_now is not None and not _in_range(device_now, 0, _COUNTER_END):
        raise RecordsError(f"kernel_records with an impossible device_now_ns {_shown(device_now)}")
    chunks = np.frombuffer(blob, dtype=layout.drained_dtype, count=count)
    why = _impossible_chunks(chunks, layout, warp_slots)
    if why:
        raise RecordsError(f"kernel_records holds {why}")
    return Records(
        chunks=chunks,
        layout=layout,
        counters=RingCounters(**{k: _optional(counters.get(k), 0) for k in _COUNTER_FIELDS}),
        ring_id=ring_id,
        warp_slots=warp_slots,
        generation_changed=bool(msg.get("generation_changed")),
        device_now_ns=device_now,
        losses=losses,
    )


def _optional(value: Any, default: int) -> Any:
    return default if value is None else value


def _in_range(value: Any, low: int, end: int) -> bool:
    return type(value) is int and low <= value < end


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _impossible_chunks(chunks: np.ndarray[Any, np.dtype[np.void]], layout: ChunkLayout, warp_slots: int) -> str:
    """Why some chunk could not have come from a drain (its own sanity checks), or ``""``."""
    if not len(chunks):
        return ""
    n_events = chunks["n_events"].astype(np.int64)
    if (n_events + chunks["n_payloads"] > layout.body_words).any():
        return f"a chunk with more events and payloads than its {layout.body_words} words"
    every = (chunks["flags"] & FLAG_PAYLOAD_EVERY_EVENT) != 0
    if (every & (n_events > DRAINED_EVENTS_PER_CHUNK)).any():
        return f"a chunk with a payload word for each of more than {DRAINED_EVENTS_PER_CHUNK} events"
    id_bits = chunks["id_bits"]
    if ((id_bits < ID_BITS_MIN) | (id_bits > ID_BITS_MAX)).any():
        return f"a chunk whose events have fewer than {ID_BITS_MIN} or more than {ID_BITS_MAX} id bits"
    if int(chunks["segment"].max()) // warp_slots >= _SMS:
        return f"a chunk of an SM beyond the {_SMS} an event can name"
    return ""
