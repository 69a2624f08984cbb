# mypy: disable-error-code="valid-type, untyped-decorator"
"""Real TileLang kernels that use every IKET frontend call, instrumented through TileLang's CUDA
post-processing callback, lowered and compiled by nvcc for sm_90a (no GPU needed)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tilelang")

import tilelang
import tilelang.language as T
import tvm_ffi
from tilelang import tvm
from tilelang.tools.cuda import iket

from iket_tui.ring.buffer import RingView
from iket_tui.ring.cpu_producer import WarpWriter
from iket_tui.ring.decode import EventTables
from iket_tui.ring.device import MARKER, WARP_VARIABLE, RingTarget, runtime_cuh
from iket_tui.ring.drain import RingDrain
from iket_tui.ring.events import EventInfo, ModuleEvents
from iket_tui.ring.layout import CLAIM_STRIPES, DEFAULT_LAYOUT, EVENT_WARP_ROW, RingGeometry
from iket_tui.ring.runtime import CALLBACK_NAME, DeviceRuntime, installed
from iket_tui.ring.wire import kernel_module, module_from_message

pytestmark = pytest.mark.tilelang


def _gpu_script(name: str = "gpu_ring_check") -> Any:
    """A script the H200 runs (benchmarks/<name>.py), imported by path."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


gpu = _gpu_script()
heavy = _gpu_script("gpu_heavy_check")

RING = RingTarget(0x7F0000000000, gpu.agent_geometry(), ring_id=77)
TARGET = {"kind": "cuda", "arch": "sm_90a"}


def every_call_kernel() -> Any:
    """mark, range, range_push/pop, range_start/end, and payloads of all three types."""
    iket.reset()
    n = 256

    @T.prim_func
    def every_call(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)) -> None:
        with T.Kernel(n // 128, threads=128) as bx:
            T.evaluate(iket.mark("enter"))
            T.evaluate(iket.mark("block", payload=iket.payload(bx, "int32")))
            with iket.range("copy", payload=iket.payload(bx, "uint32")):
                for i in T.Parallel(128):
                    B[bx * 128 + i] = A[bx * 128 + i] * 2.0
            T.evaluate(iket.range_push("pushed"))
            T.evaluate(iket.mark("first", payload=iket.payload(A[bx * 128], "float32")))
            T.evaluate(iket.range_pop("pushed"))
            T.evaluate(iket.range_start("started"))
            T.evaluate(iket.range_end())
            T.evaluate(iket.mark("enter"))

    return every_call


def _lower(func: Any) -> str:
    tilelang.disable_cache()
    target = tvm.target.Target(dict(TARGET))
    with target:
        return str(tilelang.lower(func, target=target, enable_device_compile=False).kernel_source)


def test_generated_cuda_of_every_frontend_call_holds_the_runtime_and_its_table() -> None:
    tables: list[ModuleEvents] = []
    runtime = DeviceRuntime(RING, on_module=lambda table, ring: tables.append(table))
    func = every_call_kernel()
    declared = iket.event_table()
    with installed(runtime):
        code = _lower(func)

    assert MARKER in code and f"iket_tui::Warp {WARP_VARIABLE}(0u);" in code
    assert "#define TL_IKET_EVENT_PAYLOAD_F32" in code
    (table,) = tables
    assert table.kernels == ("every_call_kernel",)
    assert [(e.name, e.kind, e.payload_type) for e in table.events] == [
        (str(d["name"]), str(d["kind"]), "none" if d["payload_type"] == "NoPayload" else str(d["payload_type"]))
        for d in declared
    ]
    assert [e.event_id for e in table.events] == [int(d["event_id"]) for d in declared]
    assert runtime.modules == {1: table}
    message = kernel_module(table, ring_id=RING.ring_id, layout=DEFAULT_LAYOUT, t_ns=0)
    assert module_from_message(message) == table


def test_nvcc_compiles_the_instrumented_kernel_and_the_callback_is_restored() -> None:
    before = tvm_ffi.get_global_func(CALLBACK_NAME, allow_missing=True)
    runtime = DeviceRuntime(RING)
    tilelang.disable_cache()
    with installed(runtime), iket.session():  # the user's own IKET session must not take the callback back
        kernel = tilelang.compile(every_call_kernel(), target=dict(TARGET))
    source = str(kernel.get_kernel_source())
    assert MARKER in source and "0x7f0000000000ull" in source
    after = tvm_ffi.get_global_func(CALLBACK_NAME, allow_missing=True)
    assert (after is None) == (before is None)


def test_without_a_gpu_the_kernels_compile_with_events_that_do_nothing() -> None:
    tables: list[ModuleEvents] = []
    tilelang.disable_cache()
    with installed(DeviceRuntime(None, on_module=lambda table, ring: tables.append(table))):
        kernel = tilelang.compile(every_call_kernel(), target=dict(TARGET))
    assert "events compile to nothing" in str(kernel.get_kernel_source())
    assert [e.name for e in tables[0].events] == ["enter", "block", "copy", "pushed", "first", "started"]


@pytest.mark.parametrize("variant", gpu.GEMM_VARIANTS)
def test_the_gpu_checks_gemms_compile_with_the_runtime(variant: str) -> None:
    runtime = DeviceRuntime(RING)
    kernel = gpu.compile_kernel(runtime, gpu.gemm_kernel(variant))
    source = str(kernel.get_kernel_source())
    if variant == "plain":
        assert MARKER not in source and runtime.modules == {}
        return
    (table,) = runtime.modules.values()
    names = {"ksteps": ["load", "mma"], "block": ["block"]}[variant]
    assert [e.name for e in table.events] == names
    assert f"iket_tui::Warp {WARP_VARIABLE}(0u);" in source


def test_the_runtime_variants_the_h200_measures_still_apply_and_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))
    variants = importlib.import_module("benchmarks.gpu_ring_variants")
    jobs = []
    for name, edits, _, chunks in variants.VARIANTS:
        cuda_runtime = variants.edited(edits)
        assert (cuda_runtime == runtime_cuh()) == (not edits), name
        runtime = DeviceRuntime(
            RingTarget(0x7F0000000000, variants.geometry(chunks), ring_id=77), cuda_runtime=cuda_runtime
        )
        iket.reset()
        jobs.append((name, runtime, gpu.gemm_kernel("ksteps")))
    kernels = variants.compile_all(jobs)  # on threads, each with its own runtime, as on the H200
    assert list(kernels) == [name for name, *_ in variants.VARIANTS]
    for name, runtime, _ in jobs:
        source = str(kernels[name].get_kernel_source())
        assert MARKER in source and runtime.cuda_runtime in source, name


def test_the_gpu_checks_known_count_and_long_running_kernels_compile_with_the_runtime() -> None:
    runtime = DeviceRuntime(RING)
    gpu.compile_kernel(runtime, gpu.known_count_kernel(blocks=8, steps=3))
    gpu.compile_kernel(runtime, gpu.long_running_kernel(blocks=2, outer=3, inner=10))
    known, long_running = runtime.modules.values()
    assert [(e.name, e.payload_type) for e in known.events] == [
        ("begin", "int32"),
        ("step", "uint32"),
        ("tick", "none"),
        ("scale", "float32"),
    ]
    assert [(e.name, e.payload_type) for e in long_running.events] == [("beat", "int32")]
    code = gpu.lower_kernel(DeviceRuntime(RING), gpu.known_count_kernel(blocks=8, steps=3))
    kernels = code[code.index('extern "C"') :]
    assert kernels.count("TL_IKET_EVENT(31)") == 1 and kernels.count("TL_IKET_EVENT_PAYLOAD_U32(") == 2


def test_the_waiting_kernel_of_the_demo_and_the_gpu_checks_compiles_with_the_runtime() -> None:
    from iket_tui.demo import kernels as demo

    runtime = DeviceRuntime(RING)
    kernel = gpu.compile_kernel(runtime, demo.waiting_steps())
    (table,) = runtime.modules.values()
    assert [(e.name, e.kind) for e in table.events] == [
        ("tile", "range"),
        ("k_step", "mark"),
        ("work", "range"),
        ("wait", "range"),
    ]
    source = str(kernel.get_kernel_source())
    # the wait, between the wait range's start and its end, reads the flag atomically
    spin = source.index("atomicAdd")
    assert source.rindex("TL_IKET_EVENT(4", 0, spin) < spin < source.index("TL_IKET_EVENT(31)", spin)
    blocks = demo.WAITING_BLOCKS
    assert sum(gpu.waiting_expected(block) for block in range(blocks)) == blocks * 98 + 2


def test_the_gpu_checks_rings_are_the_agents_and_one_whose_warps_lap_their_regions() -> None:
    assert gpu.agent_geometry() == RingGeometry.default()
    lapping = gpu.lapping_geometry(16 * 132 * 4)  # the lapping check's warps on the H200
    assert lapping.records_per_region == 16 and lapping.regions >= 2 * 16 * 132 * 4 > lapping.regions // 2
    assert gpu.known_count_per_warp(800) > lapping.records_per_region


def test_the_heavy_checks_accounting_names_whole_launches_and_shreds() -> None:
    """Launches as the CPU producer writes them, drained: a launch whose warps all arrive is
    whole; one whose warp lapped its region is not, and its share of events in whole warps says
    how much; one the ring went round is not whole either."""
    geometry = RingGeometry(16, 16)
    ring = RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry)
    drain = RingDrain(ring)
    chunks: list[np.ndarray[Any, Any]] = []
    losses: list[np.ndarray[Any, Any]] = []

    warps_written: list[WarpWriter] = []

    def launch(number: int, blocks: int, events: dict[tuple[int, int], int]) -> None:
        for block in range(blocks):
            for warp in range(2):
                sm = len(warps_written) % CLAIM_STRIPES  # the SMs' claim counters take turns
                writer = WarpWriter(
                    ring,
                    module=1,
                    launch=number,
                    block=(block, 0, 0),
                    warp=warp,
                    sm=sm,
                    grid=(blocks, 1, 1),
                    block_warps=2,
                )
                warps_written.append(writer)
                for _ in range(events.get((block, warp), 10)):
                    writer.event(1)
                writer.close()

    def drained() -> None:
        batch = drain.drain()
        chunks.append(batch.chunks)
        losses.append(batch.losses)

    launch(1, 2, {})
    drained()
    launch(2, 2, {(0, 0): 40})  # laps its region of 16 records
    drained()
    launch(3, 10, {})  # 20 warps in a ring of 16 regions: 4 are claimed again before they are read
    drained()
    accounts = heavy.launch_accounts(
        np.concatenate(chunks), np.concatenate(losses), {(b, w): 10 for b in range(10) for w in range(2)}
    )

    first, lapped, round_ = accounts[1], accounts[2], accounts[3]
    assert first.whole and first.warps_expected == 4 and first.blocks_whole == 2 and first.kept_whole_share == 1.0
    assert first.counts == {(0, 0): 10, (0, 1): 10, (1, 0): 10, (1, 1): 10}
    assert not lapped.whole and lapped.warps_whole == 3 and lapped.blocks_whole == 1
    assert lapped.events_kept == 30 + 16 and lapped.kept_whole_share == 30 / 46
    assert lapped.events_lost_named == 40 - 16 and lapped.warps_lost_named == 1
    assert not round_.whole and round_.warps_expected == 20 and round_.warps_seen == round_.warps_whole == 16
    assert round_.kept_whole_share == 1.0
    assert heavy.ring_capacity_in_launches(geometry.regions, first.warps_expected) == 4
    assert drain.counters.balanced and drain.counters.warps_unread == 4


def test_the_lapping_check_passes_on_what_a_lapping_ring_keeps_and_fails_on_a_shred() -> None:
    """The known-count kernel's warps, written by the CPU producer into the lapping ring: the
    check finds each warp's newest 16 events under its name and each warp named overwritten; a
    warp missing from what was read fails it."""
    blocks, steps = 3, 20
    warps = blocks * gpu.THREADS // 32
    geometry = gpu.lapping_geometry(warps)
    ring = RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry)
    drain = RingDrain(ring)
    table = ModuleEvents(
        1,
        5,
        ("known_count",),
        (
            EventInfo(1, "begin", "mark", "int32"),
            EventInfo(2, "step", "range", "uint32"),
            EventInfo(3, "tick", "mark"),
            EventInfo(4, "scale", "mark", "float32"),
        ),
    )
    tables = EventTables([table])
    t = 1 << 40
    for index in range(warps):
        block, warp = divmod(index, gpu.THREADS // 32)
        writer = WarpWriter(ring, module=1, block=(block, 0, 0), warp=warp, sm=index, clock=lambda: t)
        writer.event(1, block, t_ns=t)
        for step in range(steps):
            writer.event(2, step, t_ns=t + 100 * step)
            writer.event(3, t_ns=t + 100 * step + 10)
            writer.end(t_ns=t + 100 * step + 20)
        writer.event(4, gpu.SCALE, t_ns=t + 100 * steps)
        writer.close()
    batch = drain.drain()
    events = batch.decode(tables)
    events = events[(events["kind"] & EVENT_WARP_ROW) == 0]

    rows = gpu._check_lapped_warps(events, batch.losses, drain.counters, blocks, steps, "lapping ring")
    assert [(row.check, row.ok) for row in rows if not row.ok] == []
    assert len(events) == warps * gpu.LAPPING_RECORDS

    shredded = events[(events["block_x"] != 1) | (events["warp"] != 2)]
    rows = gpu._check_lapped_warps(shredded, batch.losses, drain.counters, blocks, steps, "lapping ring")
    assert [row.check for row in rows if not row.ok] == [
        "lapping ring: each warp's newest 16 events, named by its block and warp",
        "lapping ring: the kept events are each warp's last, in order, with their payloads",
    ]
