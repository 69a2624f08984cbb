"""A producer process for a ring file: one traced_gemm launch whose block (3,0) waits until the
file named by its third argument exists. Prints ``held N`` once the block waits (N events
written), then ``done N`` after its release. Device time is this machine's monotonic clock, as
the drain of a ring file reads it.

    python waiting_producer.py RING_PATH MODULE RELEASE_PATH
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from iket_tui.demo.waiting_launch import WaitingLaunch
from iket_tui.ring.buffer import MappedRing


def main() -> int:
    ring_path, module, release = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    mapped = MappedRing.open(ring_path)
    launch = WaitingLaunch(mapped.view, module=module, launch=6, t0_ns=time.monotonic_ns())
    launch.run_until_held()
    print(f"held {launch.written}", flush=True)
    deadline = time.monotonic() + 120
    while not release.exists():
        if time.monotonic() > deadline:
            return 1
        time.sleep(0.01)
    launch.release(time.monotonic_ns())
    print(f"done {launch.written}", flush=True)
    mapped.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
