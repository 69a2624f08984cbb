"""An autotuner's pool: ``with Pool(4) as pool: pool.map(...)`` over four kernels (the start
method is ``sys.argv[1]``), the third of which, layout_conflict, fails in ``tl.LayoutInference``;
the others are small and done first. Each worker turns its compile's failure into a
``RuntimeError`` naming the kernel, as a tuner that skips failing configurations does; the
pool's exit then terminates its workers (SIGTERM) as soon as the results are back. The
parent prints what came back, one line."""

from __future__ import annotations

import multiprocessing
import sys

from iket_tui.demo import kernels

JOBS = ("vector_add", "vector_add", "layout_conflict", "vector_add")


def work(name: str) -> str:
    try:
        kernels.lower(name)
    except Exception as exc:
        raise RuntimeError(f"{name}: {type(exc).__name__}") from None
    return name


if __name__ == "__main__":
    context = multiprocessing.get_context(sys.argv[1])
    try:
        with context.Pool(len(JOBS)) as pool:
            print(pool.map(work, JOBS), flush=True)
    except RuntimeError as exc:
        print(f"failed: {exc}", flush=True)
