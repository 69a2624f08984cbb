"""Compiles TileLang kernels in four worker processes made by multiprocessing (the start method
is ``sys.argv[1]``, ``fork`` by default): workers 0 and 1 lower vector_add and softmax, worker 2
the GEMM with ``tl.InjectSoftwarePipeline`` slowed by ``IKET_TEST_SLOW`` seconds (default 4),
and worker 3 layout_conflict, which fails in ``tl.LayoutInference`` (that worker exits with 1).
The parent compiles nothing; it prints each worker's pid and exit code, one per line."""

from __future__ import annotations

import multiprocessing
import os
import sys

from iket_tui.demo import kernels

JOBS = ("vector_add", "softmax", "slow_gemm", "layout_conflict")


def work(name: str) -> None:
    kernels.lower(name, slow_seconds=float(os.environ.get("IKET_TEST_SLOW", "4")))


if __name__ == "__main__":
    context = multiprocessing.get_context(sys.argv[1] if len(sys.argv) > 1 else "fork")
    workers = [context.Process(target=work, args=(name,), name=f"worker-{name}") for name in JOBS]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
        print(f"{worker.pid} {worker.name} {worker.exitcode}", flush=True)
