"""A program whose agent is stopped and started again while it runs, emitting numbered events.

It starts the agent in code, waits for a client, emits events 0 to 99, stops the agent, emits
100 to 149 with no agent running, starts the agent again, waits for a client, emits 150 to
249 and exits. Each event is a ``callback_mismatch`` whose ``got`` is ``"event N"``. With
IKET_TEST_GATE set it waits for that file before stopping the agent and for the file with
``.exit`` appended before exiting; ``IKET_TEST_STAY`` keeps it running after the stop,
without an agent, until killed.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import iket_tui.agent
from iket_tui.agent.registry import registry
from iket_tui.protocol import messages as m

WAIT_S = 60.0


def emit(first: int, last: int) -> None:
    for n in range(first, last):
        registry.emit(
            m.callback_mismatch(compile=1, context=0, expected=None, got=f"event {n}", t_ns=time.monotonic_ns())
        )


def wait_for(path: Path | None, otherwise_s: float) -> None:
    if path is None:
        time.sleep(otherwise_s)
        return
    while not path.exists():
        time.sleep(0.01)


gate = Path(os.environ["IKET_TEST_GATE"]) if os.environ.get("IKET_TEST_GATE") else None
agent = iket_tui.agent.start(heartbeat_s=0.1)
print(agent.socket_path, flush=True)
agent.wait_for_client(WAIT_S)
emit(0, 100)
wait_for(gate, 0.3)
iket_tui.agent.stop()
emit(100, 150)
if os.environ.get("IKET_TEST_STAY"):
    time.sleep(3600)
time.sleep(0.5)
agent = iket_tui.agent.start(heartbeat_s=0.1)
agent.wait_for_client(WAIT_S)
emit(150, 250)
wait_for(gate.with_name(gate.name + ".exit") if gate is not None else None, 0.3)
