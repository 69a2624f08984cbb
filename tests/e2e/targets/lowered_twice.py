"""Lowers the demo's vector_add twice under IKET_TUI=1, then waits for the file IKET_TEST_GATE."""

from __future__ import annotations

import os
import time
from pathlib import Path

from iket_tui.demo import kernels

kernels.lower("vector_add")
kernels.lower("vector_add")
print("lowered", flush=True)
gate = Path(os.environ["IKET_TEST_GATE"])
while not gate.exists():
    time.sleep(0.02)
