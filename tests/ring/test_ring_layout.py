"""The ring's binary layout: sizes, offsets, and refusing memory that is not a ring."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from iket_tui.agent.kernel_options import MIN_RING_CHUNKS, KernelOptions
from iket_tui.ring.buffer import MappedRing, RingFormatError, RingView
from iket_tui.ring.device import RingTarget
from iket_tui.ring.layout import (
    EVENT_DTYPE,
    HEADER_BYTES,
    LAYOUTS,
    MIN_RECORDS_PER_SEGMENT,
    RECORD_DTYPE,
    RECORDS_PER_CHUNK,
    RING_HEADER_DTYPE,
    ChunkLayout,
    RingGeometry,
    id_bits_for,
    layout_by_id,
)


@pytest.mark.parametrize("words_per_lane", [1, 2, 4])
def test_a_drained_chunk_is_whole_128_byte_rows(words_per_lane: int) -> None:
    layout = ChunkLayout(words_per_lane)
    assert layout.chunk_dtype.itemsize == layout.chunk_bytes == 128 * words_per_lane
    assert layout.drained_dtype.itemsize == layout.chunk_bytes
    assert layout.chunk_dtype.fields["t_base"][1] == 32  # type: ignore[index]
    assert layout.chunk_dtype.fields["words"][1] == HEADER_BYTES  # type: ignore[index]
    assert layout.chunk_dtype.fields["tail"][1] == layout.chunk_bytes - 4  # type: ignore[index]
    assert layout.body_words == layout.chunk_words - 11
    assert layout_by_id(layout.layout_id) == layout


def test_decoded_events_and_the_ring_header_have_fixed_sizes() -> None:
    assert EVENT_DTYPE.itemsize == 32
    assert EVENT_DTYPE.fields["event"][1] == 12  # type: ignore[index]
    assert EVENT_DTYPE.fields["launch"][1] == 16  # type: ignore[index]
    assert RING_HEADER_DTYPE.itemsize == 256
    assert len(LAYOUTS) == 3


def test_geometry_places_counters_then_page_aligned_records() -> None:
    geometry = RingGeometry.for_sms(132, 32)
    assert geometry.segments == 132 * 64
    assert geometry.records_per_segment == 32 * RECORDS_PER_CHUNK == 512
    assert geometry.counters_offset == 256
    assert geometry.records_offset % 4096 == 0
    assert geometry.records_offset >= 256 + 8 * geometry.segments
    assert geometry.total_bytes == geometry.records_offset + 132 * 64 * 512 * 16
    assert RECORD_DTYPE.itemsize == 16 and RECORD_DTYPE.fields["stamp"][1] == 12  # type: ignore[index]


@pytest.mark.parametrize("cap", [0, 8, 24])
def test_geometry_refuses_capacities_that_are_not_powers_of_two_of_16_or_more(cap: int) -> None:
    with pytest.raises(ValueError, match=f"power of two >= 16, not {cap}$"):
        RingGeometry(8, cap)


def test_the_agents_ring_size_is_checked_without_numpy_to_the_same_bound() -> None:
    assert MIN_RING_CHUNKS * RECORDS_PER_CHUNK >= MIN_RECORDS_PER_SEGMENT
    with pytest.raises(ValueError, match=f"at least {MIN_RING_CHUNKS}, got 8$"):
        KernelOptions(chunks_per_segment=8)
    assert RingGeometry.for_sms(1, MIN_RING_CHUNKS).records_per_segment == 256


def test_a_device_ring_is_page_aligned() -> None:
    with pytest.raises(ValueError, match="page-aligned"):
        RingTarget(0x7F0000000010, RingGeometry(8, 16), ring_id=1)


def test_event_ids_widen_only_when_a_module_needs_it() -> None:
    assert id_bits_for(0) == id_bits_for(30) == 5
    assert id_bits_for(31) == id_bits_for(62) == 6
    assert id_bits_for(254) == 8
    with pytest.raises(ValueError, match="too many IKET events"):
        id_bits_for(255)


def test_memory_that_is_not_a_ring_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(RingFormatError, match=r"^not an iket-tui ring \(bad magic\)$"):
        RingView(np.zeros(4096, dtype=np.uint8))
    geometry = RingGeometry(4, 16)
    memory = np.zeros(geometry.total_bytes, dtype=np.uint8)
    RingView.format(memory, geometry)
    with pytest.raises(RingFormatError, match=r"holds 4096 bytes, its header says"):
        RingView(memory[:4096])
    memory[8] = 9
    with pytest.raises(RingFormatError, match=r"^ring version 9, this iket-tui reads 2$"):
        RingView(memory)
    (tmp_path / "short").write_bytes(b"IKETRING")
    with pytest.raises(RingFormatError, match="too small to hold a ring"):
        MappedRing.open(tmp_path / "short")


def test_a_ring_file_is_the_same_ring_for_every_process_that_opens_it(tmp_path: Path) -> None:
    created = MappedRing.create(tmp_path / "ring", RingGeometry(8, 16), ring_id=1234)
    opened = MappedRing.open(tmp_path / "ring")
    created.view.counters[3] = (5, 77)
    assert opened.view.ring_id == 1234
    assert tuple(opened.view.counters[3].tolist()) == (5, 77)
    assert opened.view.geometry == RingGeometry(8, 16)
