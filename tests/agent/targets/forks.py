"""A target that forks while its agent serves a client, holds one compile inside a pass and
keeps the IR of another; the child tells through a pipe what it holds of the agent.

It runs under IKET_TUI=1 with a client attached. It lowers the GEMM (its IR is kept), lowers an
add on a thread whose layout inference waits for the file IKET_TEST_GATE, waits for the file
IKET_TEST_FORK, and forks. The parent prints what each side holds as one JSON line,
``{"parent": ..., "child": ...}``. Both then wait for the file IKET_TEST_EXIT; the child never
exits through the interpreter's exit path.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path
from typing import Any

import kernels
import tilelang

import iket_tui.agent
from iket_tui.agent.registry import registry
from iket_tui.protocol import messages as m


def held_by_agent() -> dict[str, Any]:
    """What the agent of this process holds now."""
    return {
        "pid": os.getpid(),
        "agent": iket_tui.agent.current() is not None,
        "produced": registry.produced,
        "open": [m.as_message(msg)["type"] for msg in registry.open_messages()],
        "open_passes": registry.open_passes,
        "clients": len(registry.client_stats()),
        "notes_waiting": registry.held_notes.waiting,
        "ir": registry.ir_store.held(),
        "sockets": open_sockets(),
    }


def open_sockets() -> int:
    """How many of this process's file descriptors are sockets."""
    found = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            found += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    return found


def wait_to_exit() -> None:
    with contextlib.suppress(TimeoutError):
        kernels.wait_for(Path(os.environ["IKET_TEST_EXIT"]), timeout_s=60.0)


tilelang.disable_cache()
kernels.lower(kernels.gemm())
tilelang.transform.LayoutInference = kernels.layout_inference_held_at(Path(os.environ["IKET_TEST_GATE"]))
threading.Thread(target=kernels.lower, args=(kernels.add(),), daemon=True).start()
kernels.wait_for(Path(os.environ["IKET_TEST_FORK"]))

parent = held_by_agent()
reading, writing = os.pipe()
if os.fork() == 0:
    try:
        os.close(reading)
        os.write(writing, json.dumps(held_by_agent()).encode())
        os.close(writing)
        wait_to_exit()
    finally:
        os._exit(0)
os.close(writing)
with os.fdopen(reading, "rb") as pipe:
    child = json.loads(pipe.read())
print(json.dumps({"parent": parent, "child": child}), flush=True)
wait_to_exit()
