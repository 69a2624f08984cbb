"""A TileLang program whose main thread lowers kernels one after another, watched by its agent.

It starts the agent in code, with the agent's log on stderr, prints ``ready`` once the first
lowerings are done, then lowers until the file IKET_TEST_GATE appears. A ticker thread wakes
every 5 ms meanwhile. At the end it prints one JSON line: the times of every lowering, the
longest gap the ticker saw after ``ready``, its resident memory at ``ready`` and at its peak,
and the clients its agent refused.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import sys
import threading
import time
from pathlib import Path

import iket_tui.agent
from iket_tui.demo import kernels

WARM_UP = 2


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s", stream=sys.stderr)
gate = Path(os.environ["IKET_TEST_GATE"])
agent = iket_tui.agent.start()
ticks = {"armed": False, "longest": 0.0}


def tick() -> None:
    last = time.monotonic()
    while True:
        time.sleep(0.005)
        now = time.monotonic()
        if ticks["armed"]:
            ticks["longest"] = max(ticks["longest"], now - last)
        last = now


threading.Thread(target=tick, daemon=True).start()
lowered: list[float] = []
for _ in range(WARM_UP):
    kernels.lower("vector_add")
ready_rss = rss_kib()
ticks["armed"] = True
print("ready", flush=True)
while not gate.exists():
    kernels.lower("vector_add")
    lowered.append(time.monotonic())
report = {
    "lowered": lowered,
    "longest_tick_gap_s": ticks["longest"],
    "ready_rss_kib": ready_rss,
    "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    "refused_clients": agent.refused_clients,
    "refusals": list(agent.refusals),
}
print(json.dumps(report), flush=True)
