"""The two messages that carry kernel events to clients, built and read back.

``kernel_module`` carries a module's event table, sent when the module is compiled (before any
launch); ``kernel_records`` carries one drain batch: the drained chunks as one binary field,
the layout that reads them, and the drain's counters. Both are plain msgpack maps like every
other message; docs/ring.md lists their fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from iket_tui.protocol.messages import KERNEL_MODULE, KERNEL_RECORDS
from iket_tui.ring.counters import DrainBatch, RingCounters
from iket_tui.ring.events import EventTableError, ModuleEvents
from iket_tui.ring.layout import WARP_SLOTS, ChunkLayout, layout_by_id

_COUNTER_FIELDS: Final = tuple(RingCounters().to_fields())


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
    :meth:`DrainBatch.split`: a frame holds at most 16 MiB)."""
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
    }


@dataclass(frozen=True)
class Records:
    """A ``kernel_records`` message read back: chunks ready for :func:`~iket_tui.ring.decode.decode`."""

    chunks: np.ndarray[Any, np.dtype[np.void]]
    layout: ChunkLayout
    counters: RingCounters
    ring_id: int
    warp_slots: int
    generation_changed: bool


def records_from_message(msg: Mapping[str, Any]) -> Records:
    """Check and read a ``kernel_records`` message without copying its chunks."""
    try:
        layout = layout_by_id(msg["layout"])
        count, blob = msg["count"], msg["chunks"]
        counters = msg["counters"]
        if type(count) is not int or not isinstance(blob, bytes | bytearray | memoryview):
            raise RecordsError("kernel_records without a count and chunk bytes")
        if len(blob) != count * layout.chunk_bytes:
            raise RecordsError(f"kernel_records holds {len(blob)} bytes for {count} chunks of {layout.chunk_bytes}")
        if not isinstance(counters, Mapping) or not all(type(counters.get(k)) is int for k in _COUNTER_FIELDS):
            raise RecordsError("kernel_records without its counters")
        chunks = np.frombuffer(blob, dtype=layout.drained_dtype, count=count)
        return Records(
            chunks=chunks,
            layout=layout,
            counters=RingCounters(**{k: counters[k] for k in _COUNTER_FIELDS}),
            ring_id=int(msg.get("ring_id") or 0),
            warp_slots=int(msg.get("warp_slots") or WARP_SLOTS),
            generation_changed=bool(msg.get("generation_changed")),
        )
    except (KeyError, TypeError) as exc:
        raise RecordsError(f"malformed kernel_records ({type(exc).__name__}: {exc})") from None
    except ValueError as exc:
        raise RecordsError(str(exc)) from None
