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
    """A ring of 256 regions of 1024 records, in a file."""
    ring = MappedRing.create(tmp_path / "ring", RingGeometry(256, 1024))
    yield ring
    ring.close()


@pytest.fixture
def tables() -> EventTables:
    return EventTables([synthetic_table()])


@pytest.fixture(params=["native", "numpy"])
def drain_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with every RingDrain it builds on the native drain pass, then on numpy."""
    from iket_tui.ring import native_drain
    from iket_tui.ring.drain import RingDrain

    native = request.param == "native"
    if native:
        built, why = native_drain.load(announce=False)
        if built is None:
            pytest.skip(f"no native drain pass here: {why}")
    defaults = dict(RingDrain.__init__.__kwdefaults__ or {})
    monkeypatch.setattr(RingDrain.__init__, "__kwdefaults__", {**defaults, "native": native})
    return str(request.param)
