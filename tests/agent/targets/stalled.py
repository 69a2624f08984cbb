"""A target that starts the agent in code, after importing TileLang, then lowers kernels while a client stalls.

It lowers when IKET_TEST_GATE exists, prints every client's counters as one JSON line, and
exits when IKET_TEST_EXIT exists.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import kernels
import tilelang

import iket_tui.agent

LOWERINGS = 10

tilelang.disable_cache()
agent = iket_tui.agent.start(queue=512, send_buffer=4096, wait_for_client_s=120)
assert agent.watching_tilelang
kernels.wait_for(Path(os.environ["IKET_TEST_GATE"]))
for _ in range(LOWERINGS):
    kernels.lower(kernels.add())
print(json.dumps([dataclasses.asdict(stats) for stats in agent.client_stats()]), flush=True)
kernels.wait_for(Path(os.environ["IKET_TEST_EXIT"]))
