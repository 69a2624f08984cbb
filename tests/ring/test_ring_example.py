"""The recording brought back from the H200 (``examples/h200-demo.msgpack``): what a real GPU
run of the bundled demo under ``iket-tui run --kernels`` sent, read back exactly."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from iket_tui.demo.sample import TRACED_EVENTS
from iket_tui.model.session import Session
from iket_tui.protocol import messages as m
from iket_tui.ring.decode import EventTables, decode
from iket_tui.ring.layout import KIND_END, KIND_MASK, KIND_START
from iket_tui.ring.wire import module_from_message, records_from_message
from iket_tui.sources.reading import read_recording

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"
LAUNCHES, BLOCKS, K_STEPS = 3, 64, 32  # traced_gemm 1024^3 in 128x128x32 tiles, launched 3 times


@pytest.fixture(scope="module")
def recording() -> list[m.Message]:
    messages, info = read_recording(EXAMPLE)
    assert info.ended and info.cut_at is None and not (info.undecodable or info.unknown)
    return messages


@pytest.fixture(scope="module")
def events(recording: list[m.Message]) -> np.ndarray:
    (module,) = [msg for msg in recording if msg["type"] == m.KERNEL_MODULE]
    tables = EventTables([module_from_message(module)])
    batches = [records_from_message(msg) for msg in recording if msg["type"] == m.KERNEL_RECORDS]
    return np.concatenate([decode(batch.chunks, tables, batch.layout) for batch in batches])


def test_the_table_arrives_before_the_records_and_every_record_is_accounted_for(recording: list[m.Message]) -> None:
    kinds = [msg["type"] for msg in recording]
    (tracing,) = [msg for msg in recording if msg["type"] == m.KERNEL_TRACING]
    assert tracing["device"] == "NVIDIA H200" and tracing["reason"] is None
    assert kinds.index(m.KERNEL_MODULE) < kinds.index(m.KERNEL_RECORDS)
    module = module_from_message(recording[kinds.index(m.KERNEL_MODULE)])
    assert tuple(event.name for event in module.events) == TRACED_EVENTS
    last = records_from_message([msg for msg in recording if msg["type"] == m.KERNEL_RECORDS][-1]).counters
    assert last.balanced and last.events_lost == 0 and last.torn == 0
    assert last.events_read == LAUNCHES * 42_240


def test_every_launch_block_and_warp_wrote_what_the_kernel_says(events: np.ndarray) -> None:
    launches = Counter(int(x) for x in events["launch"])
    assert sorted(launches.values()) == [42_240] * LAUNCHES
    assert len({(int(x), int(y)) for x, y in zip(events["block_x"], events["block_y"], strict=True)}) == BLOCKS
    # TileLang's warp specialization: warps 0-3 load, warps 4-7 compute. The loaders run only the
    # events before the pipelined loop (tile start, first_a); the compute warps run them all.
    per_warp = Counter(int(w) for w in events["warp"])
    loaders = LAUNCHES * BLOCKS * 2
    computers = LAUNCHES * BLOCKS * (2 + K_STEPS * 5 + 1)
    assert per_warp == {
        0: loaders,
        1: loaders,
        2: loaders,
        3: loaders,
        4: computers,
        5: computers,
        6: computers,
        7: computers,
    }


def test_ranges_pair_per_warp_and_payloads_are_the_values_the_kernel_wrote(events: np.ndarray) -> None:
    kinds = events["kind"] & KIND_MASK
    order = np.lexsort((events["t_ns"], events["warp"], events["block_y"], events["block_x"], events["launch"]))
    ordered = events[order]
    warp_of = list(zip(ordered["launch"], ordered["block_x"], ordered["block_y"], ordered["warp"], strict=True))
    open_ranges: dict[tuple[int, int, int, int], list[int]] = {}
    unbalanced: Counter[tuple[bool, tuple[int, ...]]] = Counter()
    for key, event, kind in zip(warp_of, ordered["event"], kinds[order], strict=True):
        launch, block_x, block_y, warp = (int(k) for k in key)
        stack = open_ranges.setdefault((launch, block_x, block_y, warp), [])
        if kind == KIND_START:
            stack.append(int(event))
        elif kind == KIND_END:
            assert stack, "a range end without a start"
            stack.pop()
    for (_, _, _, warp), stack in open_ranges.items():
        unbalanced[(warp >= 4, tuple(stack))] += 1
    # Compute warps close every range; loader warps never reach the end of the tile range.
    tile = TRACED_EVENTS.index("tile") + 1
    assert unbalanced == {(True, ()): LAUNCHES * BLOCKS * 4, (False, (tile,)): LAUNCHES * BLOCKS * 4}

    k_step = events[events["event"] == TRACED_EVENTS.index("k_step") + 1]
    assert Counter(int(v) for v in k_step["payload"]) == {step: LAUNCHES * BLOCKS * 4 for step in range(K_STEPS)}
    tiles = events[(events["event"] == tile) & (kinds == KIND_START)]
    assert np.array_equal(tiles["payload"].view("<i4"), tiles["block_x"].astype("<i4"))
    first_a = events[events["event"] == TRACED_EVENTS.index("first_a") + 1]
    assert np.isfinite(first_a["payload"].view("<f4")).all()


def test_the_model_links_the_module_to_its_compile(recording: list[m.Message]) -> None:
    session = Session()
    session.apply(recording)
    assert session.counters.malformed == 0
    (key,) = session.kernels.modules
    compile_id = session.kernels.module_compile[key]
    traced = [comp for comp in session.tree.compiles if comp.kernel == "traced_gemm"]
    assert [comp.id for comp in traced] == [compile_id]
    assert session.kernels.events_read == LAUNCHES * 42_240 and session.kernels.events_lost == 0
