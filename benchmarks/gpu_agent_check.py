"""Kernel tracing end to end on a real GPU: ``iket-tui demo --no-ui --record FILE`` (the agent with
kernel tracing, the bundled program compiling its kernels and launching the traced GEMM), then
what the recording holds, checked and printed as one table.

Needs an NVIDIA GPU, CuPy, torch and TileLang (run on the H200); the agent starts in the demo
program through ``sitecustomize`` where the package is not installed (see BENCHMARKS.md):

    PYTHONPATH=/tmp/site:$PWD python3 benchmarks/gpu_agent_check.py --out $OUT/h200-demo.msgpack
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from iket_tui.protocol import messages as m
from iket_tui.ring.decode import EventTables, decode
from iket_tui.ring.layout import EVENT_WARP_BEGIN, EVENT_WARP_END, EVENT_WARP_ROW, KIND_MASK, KIND_NAMES
from iket_tui.ring.wire import module_from_message, records_from_message
from iket_tui.sources.reading import read_recording


def record_demo(path: Path, launches: int, timeout_s: float) -> tuple[int, float, str]:
    """``iket-tui run --kernels --no-ui --record path -- python -m iket_tui.demo.program``."""
    program = [sys.executable, "-m", "iket_tui.demo.program", "--launches", str(launches), "--pause", "0.2"]
    command = [sys.executable, "-m", "iket_tui", "run", "--kernels", "--no-ui", "--record", str(path), "--", *program]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    return done.returncode, time.monotonic() - started, done.stdout + done.stderr


def summarise(path: Path) -> list[tuple[str, bool, str]]:
    messages, info = read_recording(path)
    rows: list[tuple[str, bool, str]] = []
    tracing = [msg for msg in messages if msg.get("type") == m.KERNEL_TRACING]
    rows.append(("kernel_tracing", len(tracing) == 1 and tracing[0]["device"] is not None, repr(tracing[:1])))
    modules = [msg for msg in messages if msg.get("type") == m.KERNEL_MODULE]
    tables = EventTables(module_from_message(msg) for msg in modules)
    listed = [", ".join(e.name for e in module_from_message(msg).events) for msg in modules]
    rows.append(("kernel_module", len(modules) >= 1, f"{len(modules)}: {listed}"))
    batches = [records_from_message(msg) for msg in messages if msg.get("type") == m.KERNEL_RECORDS]
    if not batches:
        rows.append(("kernel_records", False, "none"))
        return rows
    first_records = next(i for i, msg in enumerate(messages) if msg.get("type") == m.KERNEL_RECORDS)
    first_module = next(i for i, msg in enumerate(messages) if msg.get("type") == m.KERNEL_MODULE)
    rows.append(("table before records", first_module < first_records, f"message {first_module} < {first_records}"))
    rows_all = np.concatenate([decode(b.chunks, tables, b.layout) for b in batches])
    events = rows_all[(rows_all["kind"] & EVENT_WARP_ROW) == 0]
    began = int(((rows_all["kind"] & EVENT_WARP_BEGIN) != 0).sum())
    ended = int(((rows_all["kind"] & EVENT_WARP_END) != 0).sum())
    rows.append(("warps began, ended", began == ended > 0, f"{began}, {ended}"))
    last = batches[-1].counters
    rows.append(
        (
            "counters",
            last.balanced and last.events_lost == 0 and last.torn == 0,
            f"written {last.events_written}, read {last.events_read}, lost {last.events_lost}, torn {last.torn}",
        )
    )
    rows.append(("records decoded = read", len(events) == last.events_read, f"{len(events)} of {last.events_read}"))
    launches = Counter(int(x) for x in events["launch"])
    rows.append(("launches", len(launches) >= 1, f"{len(launches)}: events per launch {sorted(launches.values())}"))
    names = {
        (module, e.event_id): e.name
        for module in {int(x) for x in events["module"]}
        if (table := tables.module(module)) is not None
        for e in table.events
    }
    per_event = Counter(
        (names.get((int(mod), int(eid)), "(range end)"), KIND_NAMES[int(kind) & KIND_MASK])
        for mod, eid, kind in zip(events["module"], events["event"], events["kind"], strict=True)
    )
    rows.append(("events by name and kind", True, str(sorted(per_event.items()))))
    blocks = {(int(x), int(y)) for x, y in zip(events["block_x"], events["block_y"], strict=True)}
    warps = Counter(int(w) for w in events["warp"])
    rows.append(("blocks, warps", True, f"{len(blocks)} blocks; events per warp index {sorted(warps.items())}"))
    span = (int(events["t_ns"].max()) - int(events["t_ns"].min())) / 1e3 if len(events) else 0.0
    rows.append(("time span of events", True, f"{span:.1f} us"))
    rows.append(("recording", info.ended and info.cut_at is None, f"{info.messages} messages, {info.size} bytes"))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu_agent_check", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the recording to write")
    parser.add_argument("--launches", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(argv)
    code, seconds, output = record_demo(args.out, args.launches, args.timeout)
    print(output[-4000:])
    size = args.out.stat().st_size if args.out.exists() else 0
    print(f"demo exited {code} after {seconds:.1f} s; recording {size} bytes")
    if not args.out.exists():
        return 1
    rows = summarise(args.out)
    for check, ok, measured in rows:
        print(f"| {check} | {'ok' if ok else 'FAIL'} | {measured} |")
    return 0 if code == 0 and all(ok for _, ok, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
