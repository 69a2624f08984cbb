"""Fixtures of the export tests: the H200 recording, and a small kernel stream written through
the CPU producer with every kind of range a warp can leave."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from export_helpers import EXAMPLE, SMALL_TABLE, as_json

from iket_tui.export import chrome_trace, recording_session, speedscope
from iket_tui.protocol import messages as m
from iket_tui.ring.buffer import MappedRing
from iket_tui.ring.cpu_producer import WarpWriter
from iket_tui.ring.drain import RingDrain
from iket_tui.ring.layout import RingGeometry
from iket_tui.ring.wire import kernel_module, kernel_records
from iket_tui.sources.reading import read_recording


@pytest.fixture(scope="session")
def example_messages() -> list[m.Message]:
    messages, _ = read_recording(EXAMPLE)
    return messages


@pytest.fixture(scope="session")
def example_chrome(example_messages: list[m.Message]) -> Any:
    return as_json(chrome_trace(recording_session(example_messages)))


@pytest.fixture(scope="session")
def example_speedscope(example_messages: list[m.Message]) -> Any:
    return as_json(speedscope(recording_session(example_messages)))


def _never() -> int:
    raise AssertionError("every event time is given")


@pytest.fixture
def small_kernel_stream(tmp_path: Path) -> Iterator[list[m.Message]]:
    """One launch (number 7) of ``small_kernel``, block (1,0,0), as the drain delivers it.

    Warp 0: a ``tick`` mark (float32 1.5) at 3200 ns, an end without a start at 3232, ``outer``
    3264..3360 holding ``inner`` (int32 -5) 3296..3328, then ``outer`` from 3392, never ended.
    Warp 1: ``inner`` (int32 7) 3424..3456, the launch's last event.
    """
    ring = MappedRing.create(tmp_path / "ring", RingGeometry(64, 256))
    try:
        common: dict[str, Any] = {"module": 1, "launch": 7, "block": (1, 0, 0), "clock": _never}
        with WarpWriter(ring.view, warp=0, start_ns=3200, **common) as warp:
            warp.event(2, 1.5, t_ns=3200)
            warp.end(t_ns=3232)
            warp.event(1, t_ns=3264)
            warp.event(3, -5, t_ns=3296)
            warp.end(t_ns=3328)
            warp.end(t_ns=3360)
            warp.event(1, t_ns=3392)
        with WarpWriter(ring.view, warp=1, start_ns=3424, **common) as warp:
            warp.event(3, 7, t_ns=3424)
            warp.end(t_ns=3456)
        batch = RingDrain(ring.view).drain()
        yield [
            kernel_module(SMALL_TABLE, ring_id=batch.ring_id, layout=batch.layout, t_ns=0),
            kernel_records(batch, t_ns=1),
        ]
    finally:
        ring.close()
