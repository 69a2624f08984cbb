"""The ring's binary layout: sizes, offsets, and refusing memory that is not a ring."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from iket_tui.agent.kernel_options import DEFAULT_RING_BYTES, KernelOptions
from iket_tui.ring.buffer import MappedRing, RingFormatError, RingView
from iket_tui.ring.device import RingTarget
from iket_tui.ring.layout import (
    DESCRIPTOR_DTYPE,
    EVENT_DTYPE,
    HEADER_BYTES,
    LAYOUTS,
    RECORD_DTYPE,
    RECORDS_PER_CHUNK,
    RING_HEADER_DTYPE,
    ChunkLayout,
    RingGeometry,
    claim_number,
    id_bits_for,
    layout_by_id,
    stripe_share,
)


@pytest.mark.parametrize("words_per_lane", [1, 2, 4])
def test_a_drained_chunk_is_whole_128_byte_rows(words_per_lane: int) -> None:
    layout = ChunkLayout(words_per_lane)
    assert layout.chunk_dtype.itemsize == layout.chunk_bytes == 128 * words_per_lane
    assert layout.drained_dtype.itemsize == layout.chunk_bytes
    assert layout.chunk_dtype.fields["t_base"][1] == 32  # type: ignore[index]
    assert layout.chunk_dtype.fields["words"][1] == HEADER_BYTES  # type: ignore[index]
    assert layout.chunk_dtype.fields["tail"][1] == layout.chunk_bytes - 4  # type: ignore[index]
    # a drained chunk's launch shape lies where a ring of version 1 kept its tags
    assert layout.drained_dtype.fields["grid_x"][1] == 4  # type: ignore[index]
    assert layout.drained_dtype.fields["grid_yz"][1] == 8  # type: ignore[index]
    assert layout.drained_dtype.fields["block_warps"][1] == layout.chunk_bytes - 4  # type: ignore[index]
    assert layout.body_words == layout.chunk_words - 11
    assert layout_by_id(layout.layout_id) == layout


def test_decoded_events_and_the_ring_header_have_fixed_sizes() -> None:
    assert EVENT_DTYPE.itemsize == 32
    assert EVENT_DTYPE.fields["event"][1] == 12  # type: ignore[index]
    assert EVENT_DTYPE.fields["launch"][1] == 16  # type: ignore[index]
    assert RING_HEADER_DTYPE.itemsize == 256
    assert len(LAYOUTS) == 3


def test_geometry_places_descriptors_then_page_aligned_records() -> None:
    geometry = RingGeometry(8192, 64 * RECORDS_PER_CHUNK)
    assert geometry.records_per_region == 1024 and geometry.region_bits == 13
    assert geometry.descriptors_offset == 256
    assert DESCRIPTOR_DTYPE.itemsize == 64
    assert geometry.records_offset % 4096 == 0
    assert geometry.records_offset >= 256 + 64 * geometry.regions
    assert geometry.total_bytes == geometry.records_offset + 8192 * 1024 * 16
    assert geometry.capacity_records == 8_388_608
    assert RECORD_DTYPE.itemsize == 16 and RECORD_DTYPE.fields["stamp"][1] == 12  # type: ignore[index]


@pytest.mark.parametrize("cap", [0, 8, 24])
def test_geometry_refuses_capacities_that_are_not_powers_of_two_of_16_or_more(cap: int) -> None:
    with pytest.raises(ValueError, match=f"power of two >= 16, not {cap}$"):
        RingGeometry(8, cap)


@pytest.mark.parametrize("regions", [0, 3, 12, 1 << 21])
def test_geometry_refuses_region_counts_that_are_not_powers_of_two_up_to_2_20(regions: int) -> None:
    with pytest.raises(ValueError, match=f"regions must be a power of two between 1 and 1048576, not {regions}$"):
        RingGeometry(regions, 16)


def test_a_claims_stamps_name_its_lap_of_the_regions() -> None:
    geometry = RingGeometry(64, 16)
    assert [geometry.stamp_base(claim) for claim in (0, 63, 64, 128)] == [1, 1, (1 << 20) + 1, (2 << 20) + 1]
    # the fifth claim, and the claim that takes the same region next
    assert claim_number(4, 0) == 4 and claim_number(4 + stripe_share(64), 0) == 4 + 64
    assert geometry.stamp_base(4096 * 64) == 1  # 12 bits of laps: the same region's claims 4,096 laps apart


def test_the_agents_default_ring_holds_the_events_it_says_in_at_most_256_mib() -> None:
    options = KernelOptions()
    geometry = RingGeometry(options.regions, options.records_per_region)
    assert (options.regions, options.records_per_region) == (16384, 512)
    assert geometry.total_bytes <= 256 << 20 and DEFAULT_RING_BYTES == 128 << 20
    assert geometry.capacity_records == 8_388_608  # the 4096^3 GEMM's k-step ranges: 2,097,152 a launch
    small = KernelOptions(chunks_per_region=1, ring_bytes=3 << 20)  # regions: the power of two that fits
    assert (small.regions, small.records_per_region) == (8192, 16)
    assert KernelOptions(chunks_per_region=64).regions == 8192  # 1,024 events a warp, half the regions
    with pytest.raises(ValueError, match=r"ring chunks must be a power of two, at least 1, got 3$"):
        KernelOptions(chunks_per_region=3)
    with pytest.raises(ValueError, match="the ring size must be between 1 MiB and 64 GiB"):
        KernelOptions(ring_bytes=4096)


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
    geometry = RingGeometry(8, 16)
    memory = np.zeros(geometry.total_bytes, dtype=np.uint8)
    RingView.format(memory, geometry)
    with pytest.raises(RingFormatError, match=r"holds 4096 bytes, its header says"):
        RingView(memory[:4096])
    memory[8] = 9
    with pytest.raises(RingFormatError, match=r"^ring version 9, this iket-tui reads 3$"):
        RingView(memory)
    (tmp_path / "short").write_bytes(b"IKETRING")
    with pytest.raises(RingFormatError, match="too small to hold a ring"):
        MappedRing.open(tmp_path / "short")


def test_a_ring_file_is_the_same_ring_for_every_process_that_opens_it(tmp_path: Path) -> None:
    created = MappedRing.create(tmp_path / "ring", RingGeometry(8, 16), ring_id=1234)
    opened = MappedRing.open(tmp_path / "ring")
    created.view.descriptor_words[3, :4] = (5, 77, 1, 2)
    assert opened.view.ring_id == 1234
    assert opened.view.descriptor_words[3, :4].tolist() == [5, 77, 1, 2]
    assert opened.view.geometry == RingGeometry(8, 16)


def test_the_ring_size_a_program_is_started_with_sets_its_regions(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from iket_tui.agent import autostart

    monkeypatch.setenv("IKET_TUI_KERNELS", "1")
    monkeypatch.setenv("IKET_TUI_RING_SIZE", "256M")
    monkeypatch.setenv("IKET_TUI_RING_CHUNKS", "128")
    options = autostart._kernel_options()
    assert options is not None and (options.regions, options.records_per_region) == (8192, 2048)
    monkeypatch.delenv("IKET_TUI_RING_SIZE")
    monkeypatch.delenv("IKET_TUI_RING_CHUNKS")
    options = autostart._kernel_options()
    assert options is not None and (options.regions, options.records_per_region) == (16384, 512)
    monkeypatch.setenv("IKET_TUI_RING_CHUNKS", "128")
    monkeypatch.setenv("IKET_TUI_RING_SIZE", "plenty")
    options = autostart._kernel_options()
    assert options is not None and options.ring_bytes == DEFAULT_RING_BYTES
    assert "IKET_TUI_RING_SIZE='plenty'" in capsys.readouterr().err
