"""A target that compiles the demo's traced GEMM (IKET events) under IKET_TUI=1 with kernel
tracing on, then waits for the file named by IKET_TEST_GATE before it exits. With
IKET_TEST_ENABLE_CACHE it first turns TileLang's kernel cache on and compiles a GEMM."""

from __future__ import annotations

import os
import time
from pathlib import Path

import tilelang

from iket_tui.demo import kernels

if os.environ.get("IKET_TEST_ENABLE_CACHE"):
    tilelang.enable_cache()  # as a program may; while kernels are traced the cache stays off
    tilelang.compile(kernels.build("gemm"), target=dict(kernels.TARGET))
    print(f"cache enabled: {tilelang.is_cache_enabled()}", flush=True)
kernels.compile("traced_gemm")
print("compiled", flush=True)
gate = os.environ.get("IKET_TEST_GATE")
if gate:
    while not Path(gate).exists():
        time.sleep(0.01)
