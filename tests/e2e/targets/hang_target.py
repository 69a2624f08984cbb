"""Lowers the demo's GEMM with a pass of its own that never returns (``IKET_TEST_HANG``: ``spin``
loops in Python, ``pause`` blocks in libc's ``pause()``), says what became of it, lowers
vector_add next, and waits for the file ``IKET_TEST_GATE``. SIGUSR1 ends a ``pause()``."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import hang_passes

from iket_tui.agent import CompileAborted
from iket_tui.demo import kernels


def on_usr1(signum: int, frame: object) -> None:
    print("SIGUSR1 handled", flush=True)


signal.signal(signal.SIGUSR1, on_usr1)
print("hanging", flush=True)
with hang_passes.before_pipelining(hang_passes.HANGS[os.environ["IKET_TEST_HANG"]]):
    try:
        kernels.lower("gemm")
        print("gemm lowered", flush=True)
    except CompileAborted as exc:
        print(f"caught CompileAborted: {exc}", flush=True)
kernels.lower("vector_add")
print("vector_add lowered", flush=True)
gate = Path(os.environ["IKET_TEST_GATE"])
while not gate.exists():
    time.sleep(0.02)
