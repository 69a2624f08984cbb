"""Kernel tracing from the command line: ``run --kernels`` records a real TileLang program's
event table before any launch, and ``dump`` shows kernel batches summarised or event by event."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from cli_helpers import run_iket

from iket_tui.protocol import messages as m
from iket_tui.sources.reading import read_recording

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"
TRACED_TARGET = Path(__file__).resolve().parents[1] / "agent" / "targets" / "traced.py"


@pytest.mark.tilelang
def test_run_with_kernels_records_the_event_table_of_a_real_compile(tmp_path: Path) -> None:
    pytest.importorskip("tilelang")
    out = tmp_path / "traced.msgpack"
    result = run_iket("run", "--kernels", "--no-ui", "--record", str(out), "--", sys.executable, str(TRACED_TARGET))
    assert result.returncode == 0, result.stderr
    messages, info = read_recording(out)
    assert info.ended
    kinds = [msg["type"] for msg in messages]
    (tracing,) = [msg for msg in messages if msg["type"] == m.KERNEL_TRACING]
    assert tracing["device"] is None and tracing["reason"]  # no GPU here: said, not failed
    (module,) = [msg for msg in messages if msg["type"] == m.KERNEL_MODULE]
    assert [event["name"] for event in module["events"]] == ["tile", "first_a", "k_step", "load", "mma"]
    begin = next(msg for msg in messages if msg["type"] == m.COMPILE_BEGIN)
    assert module["compile"] == begin["compile"]
    assert kinds.index(m.COMPILE_BEGIN) < kinds.index(m.KERNEL_MODULE) < kinds.index(m.COMPILE_END)


def test_dump_summarises_kernel_batches_and_expands_them_on_request() -> None:
    plain = run_iket("dump", str(EXAMPLE), "--format", "jsonl")
    assert plain.returncode == 0, plain.stderr
    objects = [json.loads(line) for line in plain.stdout.splitlines()]
    (records,) = [obj for obj in objects if obj["type"] == m.KERNEL_RECORDS]
    assert "chunks" not in records and records["events"] == 126_720 and records["count"] == 3_840
    assert records["counters"]["events_lost"] == 0
    (module,) = [obj for obj in objects if obj["type"] == m.KERNEL_MODULE]
    assert module["kernels"] == ["traced_gemm_kernel"]

    expanded = run_iket("dump", str(EXAMPLE), "--format", "jsonl", "--records")
    assert expanded.returncode == 0, expanded.stderr
    events = [json.loads(line) for line in expanded.stdout.splitlines() if '"kernel_event"' in line]
    assert len(events) == 126_720
    k_steps = [event for event in events if event["name"] == "k_step"]
    assert {event["payload"] for event in k_steps} == set(range(32))
    assert {event["payload_type"] for event in k_steps} == {"uint32"}
    tiles = [event for event in events if event["name"] == "tile"]
    assert all(event["payload"] == event["block"][0] for event in tiles)
    assert {event["kind"] for event in events} == {"start", "end", "mark"}
    assert {event["kernel"] for event in events} == {"traced_gemm_kernel"}
