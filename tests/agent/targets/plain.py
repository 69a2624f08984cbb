"""A target that never uses TileLang: it prints, waits for the file named by IKET_TEST_GATE, exits with code 3."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

print("plain started", flush=True)
gate = Path(os.environ["IKET_TEST_GATE"])
while not gate.exists():
    time.sleep(0.01)
print(f"tilelang imported: {'tilelang' in sys.modules}", flush=True)
print(f"wait knob inherited: {'IKET_TUI_WAIT_CLIENT' in os.environ}", flush=True)
sys.exit(3)
