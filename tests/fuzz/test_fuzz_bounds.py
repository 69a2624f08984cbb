"""The fuzz targets' memory bound measures each input's own peak: an input that takes more than
the bound is caught even after something earlier took the process higher, read by the resident
set's high-water mark and by the tracemalloc stand-in alike."""

from __future__ import annotations

import fuzz_targets
import peak_memory
import pytest
from fuzz_targets import within_bounds
from peak_memory import PeakMemory, Way, best_way

MIB = 1 << 20
FLOOR = 16 * MIB
FRESH = 40 * MIB
"""Above glibc's largest mmap threshold (32 MiB): an allocation this size always takes fresh
pages, never memory the allocator kept resident from before, so the resident set rises by it."""
SLACK = 4 * MIB
"""What else the process takes or gives back meanwhile (the interpreter's own pages)."""

WAYS = [
    pytest.param(
        "VmHWM",
        marks=pytest.mark.skipif(best_way() != "VmHWM", reason="this kernel lets no process reset its peak"),
    ),
    "tracemalloc",
]


def _touched(size: int) -> bytes:
    """``size`` bytes, every page written (resident, not merely reserved)."""
    return b"\x01" * size


@pytest.fixture
def small_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fuzz_targets, "MEMORY_FLOOR", FLOOR)


@pytest.mark.usefixtures("small_floor")
@pytest.mark.parametrize("way", WAYS)
def test_an_input_over_the_bound_is_caught_after_an_earlier_larger_peak(
    way: Way, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fuzz_targets, "MEMORY_BY", way)
    earlier = _touched(3 * FRESH)  # the process's all-time peak, raised well above what follows
    del earlier
    with (
        pytest.raises(AssertionError, match=rf"peak memory grew .* \(at most {FLOOR:,}, by {way}\)"),
        within_bounds(0),
    ):
        later = _touched(FRESH)
        del later
    with within_bounds(0):  # and one under the bound passes
        small = _touched(FLOOR // 4)
        del small


@pytest.mark.parametrize("way", WAYS)
def test_each_stretch_has_a_peak_of_its_own(way: Way) -> None:
    first = PeakMemory(way)
    first.start()
    big = _touched(2 * FRESH)
    del big
    assert first.grew() > 2 * FRESH - SLACK  # held, then freed: still its peak
    second = PeakMemory(way)
    second.start()
    small = _touched(FRESH)
    assert FRESH - SLACK < second.grew() < FRESH + SLACK
    del small


def test_a_reset_the_kernel_takes_and_ignores_means_tracemalloc(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sandboxed kernel may accept the write to ``clear_refs`` and keep the mark: then each
    stretch would read the process's old peak, so the stand-in is used."""
    monkeypatch.setattr(peak_memory, "_reset_high_water_mark", lambda: None)
    peak_memory.best_way.cache_clear()
    try:
        assert best_way() == "tracemalloc"
    finally:
        peak_memory.best_way.cache_clear()
