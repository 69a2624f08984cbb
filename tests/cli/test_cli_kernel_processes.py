"""``dump`` of a recording of several processes tracing kernels: the launch one of them left
unfinished is named with its pid and rank, and its summary begins with them, though the other
process's ring and module have the same ids."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_helpers import run_iket
from kernel_processes import S, two_processes, two_tables

from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import encode_message
from iket_tui.protocol.recording import MAGIC

SUMMARY = "pid 102 (rank 1): 1 of 64 blocks not finished: block (3,0), warps 4-7 last at `mma` (k_step 17), "


def write_two_processes(path: Path, messages: list[dict[str, Any]] | None = None) -> Path:
    """The two processes' stream as a recording of them (cut off, as when both were killed)."""
    header = m.recording(created_unix=0.0, software_version="test", source="pids 101, 102")
    stream = two_processes() if messages is None else messages
    path.write_bytes(MAGIC + b"".join(encode_message(msg) for msg in (header, *stream)))
    return path


def test_dump_names_the_process_of_the_launch_left_unfinished(tmp_path: Path) -> None:
    recording = write_two_processes(tmp_path / "two.msgpack")
    lines = run_iket("dump", str(recording), "--format", "jsonl")
    assert lines.returncode == 0, lines.stderr
    (unfinished,) = [obj for obj in map(json.loads, lines.stdout.splitlines()) if obj["type"] == "kernel_unfinished"]
    assert (unfinished["pid"], unfinished["rank"], unfinished["ring_id"], unfinished["launch"]) == (102, 1, 11, 6)
    assert (unfinished["unfinished_blocks"], unfinished["unfinished_warps"]) == (1, 4)
    assert unfinished["summary"].startswith(SUMMARY)
    assert unfinished["t_ns"] == 9 * S

    text = run_iket("dump", str(recording))
    last = text.stdout.splitlines()[-1]
    assert (
        last.split("kernel_unfinished")[1]
        .strip()
        .startswith("pid=102 rank=1 kernel=traced_gemm_kernel ring_id=11 module=1 launch=6 blocks=64")
    )
    assert f'summary="{SUMMARY}' in last


def test_dump_records_names_each_processs_events_from_its_own_table(tmp_path: Path) -> None:
    recording = write_two_processes(tmp_path / "tables.msgpack", two_tables())
    lines = run_iket("dump", str(recording), "--records", "--format", "jsonl")
    assert lines.returncode == 0, lines.stderr
    named: dict[int, set[tuple[str, str]]] = {}
    pid = 0
    for obj in map(json.loads, lines.stdout.splitlines()):
        if obj["type"] == "process":
            pid = obj["pid"]
        elif obj["type"] == "kernel_event" and obj["kind"] == "start":
            named.setdefault(pid, set()).add((obj["kernel"], obj["name"]))
    assert named == {
        101: {("traced_gemm_kernel", name) for name in ("tile", "load", "mma")},
        102: {("other_gemm_kernel", name) for name in ("tile", "load", "wgmma")},
    }
