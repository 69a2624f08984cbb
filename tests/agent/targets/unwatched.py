"""Compiles under the agent while no client is attached, then attaches a real client over the
agent's socket, and prints as JSON what the IR store held and what the client was told.

While nobody watches: the demo GEMM lowers (compile 1), a kernel fails in a pass (compile 2),
and a compile gets stuck in a pass of its own (compile 3). Then a client attaches: it reads the
failure from its catch-up, captures the stuck pass, asks for the IR of compiles that ran
unwatched, aborts the stuck compile, and watches vector_add lower (compile 4). Once it has left,
the GEMM lowers again (compile 5).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "e2e" / "targets"))

import hang_passes

import iket_tui.agent
from iket_tui.agent.registry import registry
from iket_tui.demo import kernels
from iket_tui.protocol import messages as m
from iket_tui.sources.base import SourceBatch
from iket_tui.sources.socket import SocketSource

WAIT_S = 120.0
store = registry.ir_store
found: dict[str, Any] = {}
running = iket_tui.agent.start()

kernels.lower("gemm")
found["held_after_a_compile"] = store.held()
try:
    kernels.lower("layout_conflict")
except Exception as exc:
    found["failed"] = type(exc).__name__
found["held_after_a_failure"] = store.held()


def stuck_compile() -> None:
    with hang_passes.before_pipelining(hang_passes.spin_forever):
        try:
            kernels.lower("gemm")
        except iket_tui.agent.CompileAborted:
            found["aborted"] = True


thread = threading.Thread(target=stuck_compile, name="compiling")
thread.start()
deadline = time.monotonic() + WAIT_S
while not any(msg.get("name") == hang_passes.SPIN for msg in map(m.as_message, registry.open_messages())):
    assert time.monotonic() < deadline, "the stuck pass never started"
    time.sleep(0.05)

source = SocketSource(running.socket_path)
source.connect()
stream: Iterator[SourceBatch] = source.batches()
seen: list[m.Message] = []


def read_until(done: Any) -> None:
    for batch in stream:
        seen.extend(m.message_of(item) if isinstance(item, list) else item for item in batch.messages)
        if done():
            return
    raise AssertionError("the stream ended")


def ask(what: str, **fields: Any) -> m.Message:
    request_id = source.request(what, **fields)
    answered: list[m.Message] = []
    for batch in stream:
        seen.extend(m.message_of(item) if isinstance(item, list) else item for item in batch.messages)
        answered += [a.response for a in batch.answers if a.request_id == request_id and a.response is not None]
        if answered:
            return answered[0]
    raise AssertionError("the stream ended")


read_until(lambda: any(msg["type"] == m.COMPILE_FAILURE for msg in seen))
failure = next(msg for msg in seen if msg["type"] == m.COMPILE_FAILURE)
found["failure"] = {key: failure.get(key) for key in ("compile", "stage", "name", "seq", "ir_missing")}
found["failure"]["ir_script"] = (failure.get("ir_script") or "").startswith("# from tvm.script import ir as I")
found["failure"]["ir_json"] = bool(failure.get("ir_json"))

stuck = ask(m.WHAT_STUCK)
found["stuck"] = {key: stuck.get(key) for key in ("ok", "compile", "name", "seq", "ir_missing", "parent_name")}
found["stuck"]["ir_script"] = (stuck.get("ir_script") or "").startswith("# from tvm.script import ir as I")
found["stuck"]["pipeline"] = len(stuck.get("pipeline") or ())
found["stuck_before"] = ask(m.WHAT_IR, compile=3, seq=stuck["seq"], which="both")
found["unwatched"] = {
    str(compile_id): ask(m.WHAT_IR, compile=compile_id, seq=1, which="before").get("error") for compile_id in (1, 2, 3)
}
found["abort"] = ask(m.WHAT_ABORT, compile=3).get("ok")
thread.join(WAIT_S)

kernels.lower("vector_add")
found["held_watched"] = list(store.held())
read_until(lambda: any(msg["type"] == m.COMPILE_END and msg["compile"] == 4 for msg in seen))
watched = ask(m.WHAT_IR, compile=4, seq=1, which="both")
found["watched"] = {key: watched.get(key) for key in ("ok", "error")}
found["watched"]["before"] = (watched.get("before") or "").startswith("# from tvm.script import ir as I")
source.close_and_wait("done")
deadline = time.monotonic() + WAIT_S
while running.clients and time.monotonic() < deadline:
    time.sleep(0.05)

kernels.lower("gemm")
found["held_after_the_client_left"] = list(store.held())
print(json.dumps(found, default=str))
iket_tui.agent.stop()
