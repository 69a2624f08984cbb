"""``dump`` says each kernel launch's status after the recording's messages, as the kernels screen
does: complete, or partial with how much arrived whole, which blocks did not, and why."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from cli_helpers import run_iket

from iket_tui.ring.buffer import RingView
from iket_tui.ring.cpu_producer import WarpWriter, synthetic_table
from iket_tui.ring.drain import RingDrain
from iket_tui.ring.layout import DEFAULT_LAYOUT, RingGeometry
from iket_tui.ring.wire import kernel_module, kernel_records
from iket_tui.sources.recorder import RecordingWriter

RING = 9
S = 1_000_000_000


def _recording(path: Path) -> Path:
    """A process killed while launch 4's block 1 still ran, after launch 3, whose block 1's warp
    1 wrote 40 events into a region of 16, and launch 2, read whole."""
    geometry = RingGeometry(64, 16)  # regions of 16 records: a warp of 40 events overwrites its oldest
    ring = RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry, RING)
    t = iter(range(1 << 40, 1 << 41, 64))

    def warp(launch: int, block: int, index: int, grid: int, block_warps: int, events: int) -> WarpWriter:
        writer = WarpWriter(
            ring,
            module=1,
            launch=launch,
            block=(block, 0, 0),
            warp=index,
            grid=(grid, 1, 1),
            block_warps=block_warps,
            clock=lambda: next(t),
        )
        for _ in range(events):
            writer.event(1)
        return writer

    warp(2, 0, 0, 1, 1, 3).close()
    for block in range(2):
        for index in range(2):
            warp(3, block, index, 2, 2, 40 if (block, index) == (1, 1) else 5).close()
    warp(4, 0, 0, 2, 1, 3).close()
    warp(4, 1, 0, 2, 1, 3)  # never ends
    writer = RecordingWriter(path, source="pid 4242: python gemm.py")
    writer.write({"type": "hello", "proto": [1, 1], "role": "agent", "pid": 4242, "argv": ["python"], "t_ns": S})
    writer.write({"type": "kernel_tracing", "enabled": True, "device": "NVIDIA H200", "reason": None, "t_ns": S})
    writer.write(kernel_module(synthetic_table(1), ring_id=RING, layout=DEFAULT_LAYOUT, t_ns=S))
    writer.write(kernel_records(RingDrain(ring).drain(), t_ns=2 * S))
    writer.close("interrupted")
    return path


def test_dump_says_each_launchs_status_and_what_a_partial_one_lost(tmp_path: Path) -> None:
    recording = _recording(tmp_path / "killed.msgpack")
    lines = run_iket("dump", str(recording), "--format", "jsonl")
    assert lines.returncode == 0, lines.stderr
    objects = [json.loads(line) for line in lines.stdout.splitlines()]
    launches = [obj for obj in objects if obj["type"] == "kernel_launch"]
    assert [(obj["launch"], obj["status"]) for obj in launches] == [
        (2, "complete"),
        (3, "partial 75%"),
        (4, "partial 50%"),
    ]
    complete, overwritten, cut = launches
    assert "why" not in complete
    assert [complete[key] for key in ("grid", "warps_whole", "warps_expected", "events", "events_of_whole_warps")] == [
        [1, 1, 1],
        1,
        1,
        3,
        3,
    ]
    assert overwritten["why"] == ["overwritten"]
    assert overwritten["summary"] == (
        "partial: 75% of warps whole, overwritten · 3 of 4 warps whole · not whole: block (1,0)"
        " · lost: 1 warp overwritten (24 events)"
    )
    assert cut["why"] == ["cut by the end of the stream"]
    assert cut["summary"] == (
        "partial: 50% of warps whole, cut by the end of the stream · 1 of 2 warps whole · not whole: block (1,0)"
    )
    assert objects[-1]["type"] == "kernel_unfinished" and objects[-1]["launch"] == 4

    text = run_iket("dump", str(recording)).stdout.splitlines()
    (line,) = [line for line in text if "kernel_launch" in line and "launch=3 " in line]
    assert line.split("kernel_launch")[1].strip() == (
        f"kernel=synthetic ring_id={RING} module=1 launch=3 grid=[2, 1, 1] block_warps=2"
        ' status="partial 75%" warps_whole=3 warps_expected=4 events=31 events_of_whole_warps=15 why=["overwritten"]'
        ' summary="partial: 75% of warps whole, overwritten · 3 of 4 warps whole · not whole: block (1,0)'
        ' · lost: 1 warp overwritten (24 events)"'
    )
