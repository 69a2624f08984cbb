"""Fixtures of the ring tests: a ring file shared by processes, and the event table of the synthetic stream."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from iket_tui.ring.buffer import MappedRing
from iket_tui.ring.cpu_producer import synthetic_table
from iket_tui.ring.decode import EventTables
from iket_tui.ring.layout import RingGeometry


@pytest.fixture
def ring_file(tmp_path: Path) -> Iterator[MappedRing]:
    """A ring of 4 SMs' warp slots, 1024 records each, in a file."""
    ring = MappedRing.create(tmp_path / "ring", RingGeometry.for_sms(4, 64))
    yield ring
    ring.close()


@pytest.fixture
def tables() -> EventTables:
    return EventTables([synthetic_table()])
