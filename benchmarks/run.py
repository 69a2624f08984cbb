"""Run the benchmarks and print their figures as a Markdown table for BENCHMARKS.md.

``python -m benchmarks.run [NAME ...]`` with names among: emit, replay, compile, ring, flame, ir,
damage, export, diff, passes, seek, hosts. Exits 1 if a target was missed.
"""

from __future__ import annotations

import argparse
import importlib
import platform
import sys
import time

from benchmarks.results import Figure

BENCHMARKS = {
    "emit": "benchmarks.emit_cost",
    "replay": "benchmarks.replay",
    "compile": "benchmarks.compile_overhead",
    "ring": "benchmarks.ring_drain",
    "flame": "benchmarks.flame",
    "ir": "benchmarks.ir_view",
    "damage": "benchmarks.damage",
    "export": "benchmarks.export",
    "diff": "benchmarks.diff",
    "passes": "benchmarks.pass_memory",
    "hosts": "benchmarks.job_hosts",
    "seek": "benchmarks.seek",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run")
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"any of {', '.join(BENCHMARKS)} (default: all)")
    args = parser.parse_args(argv)
    unknown = [name for name in args.names if name not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark {unknown[0]!r}; choose among {', '.join(BENCHMARKS)}")
    figures: list[Figure] = []
    print(f"{time.strftime('%Y-%m-%d')}, {platform.node()}, Python {platform.python_version()}", flush=True)
    print("| figure | measured | target | | how |")
    print("|---|---|---|---|---|", flush=True)
    for name in args.names or BENCHMARKS:
        module = importlib.import_module(BENCHMARKS[name])
        for figure in module.run():
            figures.append(figure)
            print(figure.row(), flush=True)
    return 0 if all(f.met for f in figures) else 1


if __name__ == "__main__":
    sys.exit(main())
