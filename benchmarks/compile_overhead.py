"""What the agent costs a real TileLang compile, with a client attached and reading.

One process lowers the same GEMM for ``sm_90a`` again and again, alternating between the
agent's TileLang observer registered and not registered (ABBA order, so drift on a noisy
machine falls on both sides), while ``iket-tui record`` in another process reads every event.
The figure is the median of the per-pair time ratios (with agent / without).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.results import Figure

PAIRS = 24
KERNEL = "gemm"


def _measure(pairs: int) -> dict[str, object]:
    """Runs in the child process: returns the timings as JSON-able data."""
    import tilelang  # noqa: F401 - imported before the agent, as in most programs

    import iket_tui.agent as agent
    from iket_tui.agent import tilelang_tool
    from iket_tui.agent.registry import registry
    from iket_tui.demo import kernels

    running = agent.start()
    recorder = subprocess.Popen(
        [sys.executable, "-m", "iket_tui", "record", str(running.socket_path), "-o", os.devnull],
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while running.clients < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    for _ in range(3):
        kernels.lower(KERNEL)
    on: list[float] = []
    off: list[float] = []
    for pair in range(pairs):
        for with_agent in (True, False) if pair % 2 == 0 else (False, True):
            if with_agent:
                tilelang_tool.register(registry)
            else:
                tilelang_tool.unregister()
            t0 = time.perf_counter()
            kernels.lower(KERNEL)
            (on if with_agent else off).append(time.perf_counter() - t0)
    stats = running.client_stats()
    recorder.terminate()
    recorder.wait()
    return {"on": on, "off": off, "produced": registry.produced, "clients": [s.__dict__ for s in stats]}


def run() -> list[Figure]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "timings.json"
        code = (
            "import json; from benchmarks.compile_overhead import _measure; "
            f"json.dump(_measure({PAIRS}), open({str(out)!r}, 'w'))"
        )
        subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parent.parent)
        data = json.loads(out.read_text())
    on, off = data["on"], data["off"]
    ratios = sorted(a / b for a, b in zip(on, off, strict=True))
    median_ratio = (
        ratios[len(ratios) // 2] if len(ratios) % 2 else (ratios[len(ratios) // 2 - 1] + ratios[len(ratios) // 2]) / 2
    )
    off_ms = sorted(off)[len(off) // 2] * 1000
    detail = (
        f"{PAIRS} ABBA pairs of `{KERNEL}` lowering (median {off_ms:.0f} ms without), "
        f"{data['produced']} events streamed"
    )
    return [Figure("compile time with agent / without", median_ratio, "x", 1.01, detail)]
