"""The kernel timeline and the flame view at scale, built from the real H200 recording.

The chunks of ``examples/h200-demo.msgpack`` (three launches of a 64-block GEMM, 126,720 events)
are replicated with new launch numbers or block coordinates, so the records are real device
output, only more of them:

- ingest: ``kernel_records`` messages holding 10,000,000 events into ``KernelTimeline``
  (decode, grouping by launch, packing each launch's events), as a ratio to decoding alone in
  the same run;
- memory: the process's resident set with those 10,000,000 events retained, above the same
  process before it read anything (the interpreter with the same imports);
- frame: one launch of 1,024 blocks (all in view, grouped by SM; and by block), every line of a
  160x48 screen painted into strips from a cold cache, as the flame view does.
"""

from __future__ import annotations

import asyncio
import gc
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.results import Figure, median
from iket_tui.model.kernels import KernelTimeline
from iket_tui.protocol import messages as m
from iket_tui.ring.decode import EventTables, decode
from iket_tui.ring.wire import module_from_message, records_from_message
from iket_tui.sources.reading import read_recording

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "h200-demo.msgpack"
INGEST_EVENTS = 10_000_000
FRAME_BLOCKS = 1024


def _example() -> tuple[dict[str, Any], dict[str, Any]]:
    messages, _ = read_recording(EXAMPLE)
    module = next(msg for msg in messages if msg["type"] == m.KERNEL_MODULE)
    records = next(msg for msg in messages if msg["type"] == m.KERNEL_RECORDS)
    return module, records


def _with_chunks(records: dict[str, Any], chunks: np.ndarray[Any, Any]) -> dict[str, Any]:
    return {**records, "count": len(chunks), "chunks": chunks.tobytes()}


def ingest_messages(module: dict[str, Any], records: dict[str, Any], events: int) -> list[dict[str, Any]]:
    """``kernel_records`` messages of about ``events`` events: the example's, launch numbers shifted."""
    base = records_from_message(records).chunks
    per_copy = int(base["n_events"].sum())
    out = []
    for copy in range(-(-events // per_copy)):
        chunks = base.copy()
        chunks["launch"] += np.uint32(1000 * (copy + 1))
        out.append(_with_chunks(records, chunks))
    return out


def frame_messages(records: dict[str, Any], blocks: int) -> dict[str, Any]:
    """One launch of ``blocks`` blocks: the first launch of the example (64 blocks on 64 SMs),
    repeated in waves, each wave's blocks at new x coordinates and 25 µs later on the same SMs,
    as a grid larger than the GPU runs."""
    base = records_from_message(records).chunks
    first = base[base["launch"] == base["launch"].min()]
    copies = []
    layout = records_from_message(records).layout
    columns = np.arange(layout.chunk_words)
    event_words = (columns >= layout.first_event) & (columns < layout.first_event + first["n_events"][:, None])
    for wave in range(blocks // 64):
        chunks = first.copy()
        chunks["block_x"] += np.uint32(8 * wave)
        shift = 256 * 98 * wave  # about 25 µs; a multiple of 256 leaves the ids in the low bits alone
        chunks["t_base"] += np.uint64(shift)
        words = chunks.view("<u4").reshape(len(chunks), layout.chunk_words)
        words[event_words] += np.uint32(shift)
        copies.append(chunks)
    return _with_chunks(records, np.concatenate(copies))


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def measure_ingest() -> tuple[float, float, float, int]:
    """Seconds to ingest, seconds to decode alone, MB resident above the process before it read
    anything, events."""
    gc.collect()
    rss_before = _rss_mb()
    module, records = _example()
    messages = ingest_messages(module, records, INGEST_EVENTS)
    table = module_from_message(module)
    t0 = time.perf_counter()
    decoded = 0
    for msg in messages:
        batch = records_from_message(msg)
        decoded += len(decode(batch.chunks, EventTables([table]), batch.layout))
    decode_s = time.perf_counter() - t0
    gc.collect()
    timeline = KernelTimeline(max_events=INGEST_EVENTS + 1_000_000)
    t0 = time.perf_counter()
    timeline.apply(module)
    for msg in messages:
        timeline.apply(msg)
    ingest_s = time.perf_counter() - t0
    del messages
    gc.collect()
    rss_after = _rss_mb()
    assert timeline.retained == decoded
    return ingest_s, decode_s, rss_after - rss_before, decoded


async def _frame_ms(by_sm: bool, rounds: int = 5) -> tuple[float, int, float]:
    from textual.app import App

    from iket_tui.model.session import Session
    from iket_tui.ui.flame_view import FlameView
    from iket_tui.ui.kernels_screen import KernelsScreen

    module, records = _example()
    session = Session()
    session.apply(
        [
            {"type": m.KERNEL_TRACING, "enabled": True, "device": "NVIDIA H200", "t_ns": 0},
            module,
            frame_messages(records, FRAME_BLOCKS),
        ]
    )

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(KernelsScreen(session))

    app = Host()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause(0.3)
        view = app.screen.query_one(FlameView)
        if by_sm:
            await pilot.press("m")
        await pilot.pause(0.1)
        assert view.launch is not None
        t0 = time.perf_counter()
        layout_built = view._layout(view.launch)
        layout_s = time.perf_counter() - t0
        times = []
        for _ in range(rounds):
            view._cache.clear()
            t0 = time.perf_counter()
            for y in range(view.size.height):
                view.render_line(y)
            times.append(time.perf_counter() - t0)
        on_screen = set()
        for y in range(view.size.height):
            row = layout_built.rows[view.scroll_offset.y + y] if y < len(layout_built.rows) else None
            if row is not None:
                runs = layout_built.paint(row, view.window, view.launch.event_name)
                on_screen.update(
                    (run.what[0], row.block if run.what[0] != "block" else 0, run.what[1]) for run in runs if run.what
                )
        blocks = (
            len({key for key in on_screen if key[0] == "block"})
            if by_sm
            else len({row.block for row in layout_built.rows[: view.size.height]})
        )
        return median(times) * 1000, blocks, layout_s * 1000


def run() -> list[Figure]:
    ingest_s, decode_s, rss_mb, events = measure_ingest()
    by_sm_ms, blocks, layout_ms = asyncio.run(_frame_ms(by_sm=True))
    by_block_ms, blocks_by_block, _ = asyncio.run(_frame_ms(by_sm=False))
    return [
        Figure(
            "ingest 10M kernel records into the timeline / decoding alone",
            ingest_s / decode_s,
            "x",
            1.5,
            f"{ingest_s:.2f} s; decoding alone {decode_s:.2f} s; {events:,} real H200 events in "
            f"{events // 126_720} messages",
        ),
        Figure(
            "resident memory with 10M records retained, above the interpreter",
            rss_mb,
            "MB",
            360.0,
            "after ingest, against the process before it read anything",
        ),
        Figure(
            "flame frame of a 1,024-block launch, by SM",
            by_sm_ms,
            "ms",
            16.0,
            f"{blocks} blocks on screen (160x48), every line painted from a cold cache; "
            f"layout built in {layout_ms:.0f} ms",
        ),
        Figure(
            "flame frame of the same launch, by block and warp",
            by_block_ms,
            "ms",
            16.0,
            f"{blocks_by_block} blocks on screen",
        ),
    ]
