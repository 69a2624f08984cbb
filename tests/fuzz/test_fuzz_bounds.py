"""The fuzz targets' memory bound measures each input's own peak: an input that takes more than
the bound is caught even after something earlier took the process higher."""

from __future__ import annotations

import fuzz_targets
import pytest
from fuzz_targets import within_bounds
from peak_memory import PeakMemory

MIB = 1 << 20
FLOOR = 16 * MIB
FRESH = 40 * MIB
SLACK = 4 * MIB
"""What else the process takes or gives back meanwhile."""


def _touched(size: int) -> bytes:
    """``size`` bytes, every page written."""
    return b"\x01" * size


@pytest.fixture
def small_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fuzz_targets, "MEMORY_FLOOR", FLOOR)


@pytest.mark.usefixtures("small_floor")
def test_an_input_over_the_bound_is_caught_after_an_earlier_larger_peak() -> None:
    earlier = PeakMemory()
    earlier.start()
    big = _touched(3 * FRESH)  # the process's peak, raised well above what follows
    del big
    assert earlier.grew() > 3 * FRESH - SLACK
    with (
        pytest.raises(AssertionError, match=rf"peak memory grew .* \(at most {FLOOR:,}, by tracemalloc\)"),
        within_bounds(0),
    ):
        later = _touched(FRESH)
        del later
    with within_bounds(0):  # and one under the bound passes
        small = _touched(FLOOR // 4)
        del small


def test_each_stretch_has_a_peak_of_its_own() -> None:
    first = PeakMemory()
    first.start()
    big = _touched(2 * FRESH)
    del big
    assert first.grew() > 2 * FRESH - SLACK  # held, then freed: still its peak
    second = PeakMemory()
    second.start()
    small = _touched(FRESH)
    assert FRESH - SLACK < second.grew() < FRESH + SLACK
    del small
