"""A launch keeps its events in 25 bytes each, not the 32 of a decoded event: the module, kernel
and launch number are the same for all of them and live in its key. What it gives back
(:meth:`Launch.events`, :meth:`Launch.release`) is every decoded event as it arrived."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from iket_tui.model.kernels import KernelTimeline
from iket_tui.protocol import messages as m
from iket_tui.ring.decode import EventTables, decode
from iket_tui.ring.layout import EVENT_DTYPE
from iket_tui.ring.wire import module_from_message, records_from_message
from iket_tui.sources.reading import read_recording

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"


def _recorded() -> tuple[KernelTimeline, np.ndarray]:
    """The H200 recording's kernel messages in a timeline, and its events decoded alone."""
    messages, _ = read_recording(EXAMPLE)
    kernel = [msg for msg in messages if msg["type"] in (m.KERNEL_MODULE, m.KERNEL_RECORDS)]
    timeline = KernelTimeline()
    tables = EventTables()
    decoded = []
    for msg in kernel:
        timeline.apply(msg)
        if msg["type"] == m.KERNEL_MODULE:
            tables.add(module_from_message(msg))
        else:
            records = records_from_message(msg)
            decoded.append(decode(records.chunks, tables, records.layout, records.warp_slots))
    return timeline, np.concatenate(decoded)


def _of(events: np.ndarray, key: tuple[int, int, int, int]) -> np.ndarray:
    _, module, kernel, launch = key
    return events[(events["module"] == module) & (events["kernel"] == kernel) & (events["launch"] == launch)]


def test_the_timeline_keeps_25_bytes_an_event() -> None:
    timeline, decoded = _recorded()
    held = sum(part.nbytes for launch in timeline.launches.values() for part in launch.parts)
    assert timeline.retained == len(decoded) == 126_720
    assert held == 25 * len(decoded)


def test_a_launch_gives_back_every_decoded_event_as_it_arrived() -> None:
    timeline, decoded = _recorded()
    assert len(timeline.launches) == 3
    for launch in timeline.launches.values():
        events = launch.events()
        assert events.dtype == EVENT_DTYPE
        assert events.tobytes() == _of(decoded, launch.key).tobytes()
        x, y, z = launch.grid()
        assert (x, y, z) == (int(events["block_x"].max()) + 1, int(events["block_y"].max()) + 1, 1)
    first = min(timeline.launches.values(), key=lambda launch: launch.order)
    (released,) = timeline.release(first)
    assert released.tobytes() == _of(decoded, first.key).tobytes()
    assert (first.parts, first.grid(), len(first.events())) == ([], (0, 0, 0), 0)
