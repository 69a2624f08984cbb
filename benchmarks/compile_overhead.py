"""What the agent costs a real TileLang compile, with a client attached and reading.

One process lowers the same GEMM for ``sm_90a`` again and again, cycling through four
setups in rotating order (so drift on a noisy machine falls on all of them): no
instrumentation tool; a do-nothing ``StackedPassInstrument`` observer, which is what
TileLang's instrumentation itself costs any tool; the agent's observer keeping no IR; and the
agent's observer keeping the IR around every pass (its default), while ``iket-tui record`` in
another process reads every event. Each setup lowers once uncounted, then ``PER_SETUP`` times
counted: what one compile leaves behind (freeing released IR changes how the next compile
allocates) falls on a compile of the same setup, not on the next setup's. The figures are
medians of per-round ratios of the process's CPU time (every thread of it, the agent's
included) against the uninstrumented lowering: on a shared 2-core machine wall time drifts by
a percent or two between identical rounds, CPU time much less.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.results import Figure, median

ROUNDS = 40
PER_SETUP = 2
KERNEL = "gemm"
SETUPS = ("off", "floor", "agent-no-ir", "agent")


def _measure(rounds: int) -> dict[str, object]:
    """Runs in the child process: returns the timings as JSON-able data."""
    import tilelang  # noqa: F401 - imported before the agent, as in most programs

    import iket_tui.agent as agent
    from iket_tui.agent import tilelang_tool
    from iket_tui.agent.ir_store import ir_store
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
    from tilelang.instrumentation import (
        PassEventObserver,
        PassInstrumentationTool,
        StackedPassInstrument,
        register_pass_instrumentation_tool,
        unregister_pass_instrumentation_tool,
    )

    class DoNothing(PassInstrumentationTool):  # type: ignore[misc]
        def create_pass_instrument(self) -> object:
            return StackedPassInstrument(PassEventObserver())

    def setup(name: str) -> None:
        tilelang_tool.unregister()
        unregister_pass_instrumentation_tool("benchmark-floor")
        if name == "floor":
            register_pass_instrumentation_tool("benchmark-floor", DoNothing)
        elif name.startswith("agent"):
            tilelang_tool.register(registry)
        ir_store.limit = 0 if name == "agent-no-ir" else kept

    kept = ir_store.limit

    def lower_and_send() -> None:
        kernels.lower(KERNEL)
        # The agent sends a lowering's events just after it; count that with the lowering.
        flushed_by = time.monotonic() + 5
        while any(s.queued for s in running.client_stats()) and time.monotonic() < flushed_by:
            time.sleep(0.05)

    for _ in range(3):
        kernels.lower(KERNEL)
    times: dict[str, list[float]] = {name: [] for name in SETUPS}
    for round_ in range(rounds):
        order = SETUPS[round_ % len(SETUPS) :] + SETUPS[: round_ % len(SETUPS)]
        for name in order if round_ % 2 == 0 else tuple(reversed(order)):
            setup(name)
            lower_and_send()
            t0 = time.process_time()
            for _ in range(PER_SETUP):
                lower_and_send()
            times[name].append((time.process_time() - t0) / PER_SETUP)
    setup("off")
    stats = running.client_stats()
    recorder.terminate()
    recorder.wait()
    return {**times, "produced": registry.produced, "clients": [s.__dict__ for s in stats]}


def run() -> list[Figure]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "timings.json"
        code = (
            "import json; from benchmarks.compile_overhead import _measure; "
            f"json.dump(_measure({ROUNDS}), open({str(out)!r}, 'w'))"
        )
        subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parent.parent)
        data = json.loads(out.read_text())
    off = data["off"]
    off_ms = median(off) * 1000  # CPU ms

    def ratio(name: str) -> float:
        return median([a / b for a, b in zip(data[name], off, strict=True)])

    floor = ratio("floor")
    ir = median([a / b for a, b in zip(data["agent"], data["agent-no-ir"], strict=True)])
    how = (
        f"{ROUNDS} rounds of {PER_SETUP} counted `{KERNEL}` lowerings per setup ({off_ms:.0f} ms CPU uninstrumented), "
        f"{data['produced']} events sent"
    )
    return [
        Figure("compile time with agent and a reading client / without", ratio("agent"), "x", 1.01, how),
        Figure("  of which TileLang's instrumentation alone (do-nothing observer)", floor, "x", 1.01, "same rounds"),
        Figure(
            "  keeping the IR of every pass / keeping none, both with the agent",
            ir,
            "x",
            1.01,
            "same rounds; the IR store holds the last 8 compiles (default)",
        ),
    ]
