"""The pass tree's memory over a long session: 10,000,000 pass events (about 100,000 compiles
over 8 processes, in turn) into a :class:`Session` with its default bound on passes, in a
fresh interpreter, against that interpreter's resident set before the session saw anything.

Each compile is the synthetic lowering of a TileLang GEMM (85 passes, 170 events), with its
compile number and times moved; messages are made and applied a compile at a time, so what
stays resident is the model alone. ``python -m benchmarks.pass_memory N`` measures N events.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from benchmarks.results import Figure
from iket_tui.model.pass_bound import DEFAULT_MAX_PASSES
from iket_tui.model.session import Session
from iket_tui.model.synthetic import Lowering, agent_hello
from iket_tui.protocol import messages as m

PASS_EVENTS = 10_000_000
PROCESSES = 8
TARGET_MB = 1024.0


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def measure(events: int) -> dict[str, float]:
    """Apply ``events`` pass events; the resident set before and after, and what was kept."""
    template = Lowering(compile=1, kernel="gemm", start_ns=0).messages()
    span = int(template[-1]["t_ns"]) + 1_000_000
    per_compile = sum(1 for msg in template if msg["type"] in m.PASS_EVENTS)
    session = Session()
    before = _rss_mb()
    for rank in range(PROCESSES):
        session.apply([m.process(pid=1000 + rank, start_time=rank), agent_hello(pid=1000 + rank)])
    t0 = time.perf_counter()
    applied = compiles = 0
    while applied < events:
        rank = compiles % PROCESSES
        compile_id = compiles // PROCESSES + 1
        offset = compiles * span
        batch: list[m.Message] = [m.process(pid=1000 + rank, start_time=rank)]
        for msg in template:
            moved = dict(msg, t_ns=int(msg["t_ns"]) + offset)
            if "compile" in moved:
                moved["compile"] = compile_id
            batch.append(moved)
        session.apply(batch)
        applied += per_compile
        compiles += 1
    apply_s = time.perf_counter() - t0
    after = _rss_mb()
    tree = session.tree
    return {
        "events": applied,
        "compiles": compiles,
        "before_mb": before,
        "after_mb": after,
        "kept_passes": len(tree.passes),
        "summarised": tree.summarised,
        "apply_s": apply_s,
    }


def run(events: int = PASS_EVENTS) -> list[Figure]:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.pass_memory", str(events)], check=True, capture_output=True, text=True
    )
    got = json.loads(out.stdout)
    above = got["after_mb"] - got["before_mb"]
    return [
        Figure(
            f"resident memory of the session after {got['events'] / 1e6:.0f}M pass events",
            above,
            "MB",
            TARGET_MB,
            f"above the interpreter's own ({got['before_mb']:.0f} MB); {got['compiles']:,} compiles over"
            f" {PROCESSES} processes, {got['summarised']:,} summarised, {got['kept_passes']:,} passes kept"
            f" (bound {DEFAULT_MAX_PASSES:,}); applied in {got['apply_s']:.1f} s",
        )
    ]


if __name__ == "__main__":
    print(json.dumps(measure(int(sys.argv[1]) if len(sys.argv) > 1 else PASS_EVENTS)))
