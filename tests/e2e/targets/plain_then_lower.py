"""A TileLang program started without iket-tui: it waits for the file IKET_TEST_GATE, lowers the
demo's vector_add, then waits for IKET_TEST_GATE with ".done" appended before it exits."""

from __future__ import annotations

import os
import time
from pathlib import Path

from iket_tui.demo import kernels


def wait_for(path: Path) -> None:
    while not path.exists():
        time.sleep(0.02)


gate = Path(os.environ["IKET_TEST_GATE"])
print("ready", flush=True)
wait_for(gate)
kernels.lower("vector_add")
print("lowered", flush=True)
wait_for(gate.with_name(gate.name + ".done"))
