"""A program for ``gpu_ring_check.py``: compiles the demo's ``waiting_steps`` (one block waits on
a flag in global memory), launches it once, writes its pid into ``--launched FILE``, and sets
the flag ``--wait`` seconds later; run under ``iket-tui run --kernels --record``.

    python benchmarks/gpu_stuck_program.py --wait 8 --launched /tmp/launched
"""

from __future__ import annotations

import argparse
import os
import sys

from iket_tui.demo import kernels


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu_stuck_program", description=__doc__.splitlines()[0])
    parser.add_argument("--wait", type=float, default=8.0, help="seconds before the flag is set")
    parser.add_argument("--launched", required=True, help="written with this pid once the kernel is launched")
    args = parser.parse_args(argv)
    compiled = kernels.compile_waiting()

    def launched() -> None:
        with open(args.launched + ".tmp", "w") as file:
            file.write(str(os.getpid()))
        os.replace(args.launched + ".tmp", args.launched)

    seconds = kernels.run_waiting(compiled, args.wait, launched)
    print(f"waiting_steps ran {seconds:.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
