# mypy: disable-error-code="valid-type, untyped-decorator"
"""A small real TileLang program for end-to-end tests of ``record`` and ``run``.

It lowers one elementwise kernel for ``sm_90a`` (no GPU, no nvcc). With ``--on-cue`` it
first prints ``ready`` and waits for a line on stdin, lowers, prints ``lowered``, then waits
for stdin to close; otherwise it lowers at once. It exits with ``--exit-code``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import tilelang
import tilelang.language as T
from tilelang import tvm


def add(n: int = 1024, block: int = 256) -> Any:
    @T.prim_func
    def add(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")) -> None:
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] + B[bx * block + i]

    return add


def lower() -> None:
    tilelang.disable_cache()
    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    with target:
        tilelang.lower(add(), target=target, enable_device_compile=False)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--on-cue", action="store_true")
    parser.add_argument("--exit-code", type=int, default=0)
    args = parser.parse_args()
    if args.on_cue:
        print("ready", flush=True)
        sys.stdin.readline()
    lower()
    print("lowered", flush=True)
    if args.on_cue:
        sys.stdin.read()
    sys.exit(args.exit_code)
