"""Fuzz every target (or the ones named) for a chosen time, in equal shares.

``python tests/fuzz/run.py SECONDS [TARGET ...]`` (``just fuzz SECONDS``). An input that breaks a
target's contract is kept in ``tests/fuzz/seeds/`` (commit it: the suite replays every seed), the
target stops, and the run exits 1.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # tests/: helpers shared with the suite

from fuzz_targets import TARGETS
from fuzzing import Found, fuzz, keep

BATCH = 25
"""Inputs per hypothesis run; runs repeat until the target's share of the time is spent."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tests/fuzz/run.py")
    parser.add_argument("seconds", type=float, help="the whole run's time, shared equally by the targets")
    parser.add_argument("targets", nargs="*", metavar="TARGET", help=f"any of {', '.join(TARGETS)} (default: all)")
    args = parser.parse_args(argv)
    unknown = [name for name in args.targets if name not in TARGETS]
    if unknown:
        parser.error(f"unknown target {unknown[0]!r}; choose among {', '.join(TARGETS)}")
    names = args.targets or list(TARGETS)
    share = args.seconds / len(names)
    broken = 0
    for name in names:
        start = time.monotonic()
        ran = 0
        try:
            while time.monotonic() - start < share:
                ran += fuzz(name, BATCH)
        except Found as found:
            broken += 1
            print(f"{found}: an input of {len(found.data):,} bytes, kept in {keep(found)}", flush=True)
            continue
        print(f"{name}: {ran} inputs in {time.monotonic() - start:.0f} s, none broke its contract", flush=True)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
