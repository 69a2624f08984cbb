"""What the agent costs a real TileLang compile, with no client attached and with one reading.

One process lowers the same GEMM for ``sm_90a`` again and again, cycling through four setups in
rotating order (so drift on a noisy machine falls on all of them): no instrumentation tool; a
TVM pass instrument whose ``run_before_pass`` and ``run_after_pass`` do nothing, given to every
pass context through TileLang's instrumentation, which is the least any pass observer written in
Python costs; the agent with no client attached (it keeps no IR then, only the module of each
running pass); and the agent while ``iket-tui record`` in another process is attached and reads
every event, keeping the IR around every pass (its default then), and telling whether each pass
changed the module where run with ``IKET_TUI_PASS_CHANGES=1``. The client attaches before that
setup's lowerings and leaves after them. Each setup lowers once uncounted, then
``PER_SETUP`` times counted, back to back: what one compile leaves behind (freeing released IR
changes how the next compile allocates) falls on a compile of the same setup, not on the next
setup's. Only then does the round wait until the client has been sent everything: a thread that
sleeps between compiles finds its caches cold, and its next compile costs 2 to 3% more CPU
whoever made it sleep. A setup's cost is the lowering thread's CPU time in its counted lowerings
plus the CPU time of every other thread of the process (the agent's sender) from its first
lowering until its events were sent, shared among its lowerings. The figures are medians of
per-round ratios against the uninstrumented lowering: on a shared 2-core machine wall time
drifts by a percent or two between identical rounds, CPU time much less.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.results import Figure, median

ROUNDS = 60
PER_SETUP = 2
KERNEL = "gemm"
SETUPS = ("off", "empty", "agent-unwatched", "agent")


def _measure(rounds: int) -> dict[str, object]:
    """Runs in the child process: returns the timings as JSON-able data."""
    import tilelang  # noqa: F401 - imported before the agent, as in most programs

    import iket_tui.agent as agent
    from iket_tui.agent import tilelang_tool
    from iket_tui.agent.registry import registry
    from iket_tui.demo import kernels

    running = agent.start()
    recorder: subprocess.Popen[bytes] | None = None

    def attached(attach: bool) -> None:
        """A reading client attached (``iket-tui record``), or none."""
        nonlocal recorder
        if attach and recorder is None:
            recorder = subprocess.Popen(
                [sys.executable, "-m", "iket_tui", "record", str(running.socket_path), "-o", os.devnull],
                stdout=subprocess.DEVNULL,
            )
        elif not attach and recorder is not None:
            recorder.terminate()
            recorder.wait()
            recorder = None
        deadline = time.monotonic() + 30
        while (running.clients > 0) != attach and time.monotonic() < deadline:
            time.sleep(0.02)

    from tilelang.instrumentation import (
        PassInstrumentationTool,
        register_pass_instrumentation_tool,
        unregister_pass_instrumentation_tool,
    )
    from tvm.ir.instrument import pass_instrument

    @pass_instrument  # type: ignore[untyped-decorator]
    class Empty:
        def run_before_pass(self, mod: object, info: object) -> None:
            pass

        def run_after_pass(self, mod: object, info: object) -> None:
            pass

    class EmptyTool(PassInstrumentationTool):  # type: ignore[misc]
        def create_pass_instrument(self) -> object:
            return Empty()

    def setup(name: str) -> None:
        tilelang_tool.unregister()
        unregister_pass_instrumentation_tool("benchmark-empty")
        attached(name == "agent")
        if name == "empty":
            register_pass_instrumentation_tool("benchmark-empty", EmptyTool)
        elif name.startswith("agent"):
            tilelang_tool.register(registry)

    def wait_until_sent() -> None:
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
            p0, m0 = time.process_time(), time.thread_time()
            kernels.lower(KERNEL)
            m1 = time.thread_time()
            for _ in range(PER_SETUP):
                kernels.lower(KERNEL)
            m2 = time.thread_time()
            # Lowerings follow each other without a pause: a thread that sleeps makes its next
            # compile cost more CPU (caches gone cold), which is no cost of the agent's.
            wait_until_sent()
            p1, m3 = time.process_time(), time.thread_time()
            # The lowering thread's CPU in the counted lowerings, plus the CPU of every other
            # thread (the agent's sender) over all of this setup's lowerings until their
            # events were sent, shared among them.
            others = (p1 - p0) - (m3 - m0)
            times[name].append((m2 - m1) / PER_SETUP + others / (PER_SETUP + 1))
    setup("agent")
    stats = running.client_stats()
    setup("off")
    return {**times, "produced": registry.produced, "clients": [s.__dict__ for s in stats]}


def _median_interval(ratios: list[float], draws: int = 2000) -> tuple[float, float]:
    """A 95% bootstrap interval of the median of ``ratios`` (seeded: the same data, the same interval)."""
    pick = random.Random(0)
    medians = sorted(median(pick.choices(ratios, k=len(ratios))) for _ in range(draws))
    return medians[int(draws * 0.025)], medians[int(draws * 0.975) - 1]


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

    def ratios(name: str) -> list[float]:
        return [a / b for a, b in zip(data[name], off, strict=True)]

    def ratio(name: str) -> float:
        return median(ratios(name))

    floor = ratio("empty")
    # Medians leave out what happens once in many compiles (a full garbage collection); the
    # ratio of the totals does not.

    def how(name: str) -> str:
        low, high = _median_interval(ratios(name))
        totals = sum(data[name]) / sum(off)
        return f"95% interval of the median {low:.4f} to {high:.4f}; ratio of the totals {totals:.3f}"

    rounds = (
        f"{ROUNDS} rounds of {PER_SETUP} counted `{KERNEL}` lowerings per setup ({off_ms:.0f} ms CPU uninstrumented)"
    )
    return [
        Figure(
            "compile time with the agent and no client attached / without",
            ratio("agent-unwatched"),
            "x",
            1.01,
            f"{rounds}; {how('agent-unwatched')}",
        ),
        Figure(
            "compile time with the agent, a reading client and the IR kept / without",
            ratio("agent"),
            "x",
            1.02,
            f"same rounds, {data['produced']} events; {how('agent')}",
        ),
        Figure(
            "  of which TVM calling a pass instrument in Python (empty callbacks)",
            floor,
            "x",
            None,
            f"same rounds; what any observer of TileLang's passes in Python costs; {how('empty')}",
        ),
    ]
