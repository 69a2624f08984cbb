"""The demo's plain TVM compiles named on the command line, under the agent (IKET_TUI=1); then
it waits for the file named by IKET_TEST_GATE before it exits, so that a test can ask for IR."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from iket_tui.demo import tvm_program

names = tuple(sys.argv[1].split(","))
tvm_program.run(tvm_program.Settings(kernels=names, slow_seconds=0.0, pause=0.0), sys.stdout)
gate = Path(os.environ["IKET_TEST_GATE"])
deadline = time.monotonic() + 300
while not gate.exists() and time.monotonic() < deadline:
    time.sleep(0.05)
