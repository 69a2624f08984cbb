# mypy: disable-error-code="valid-type, untyped-decorator"
"""A real TileLang program of three processes for the export tests: it starts two workers (this
file with ``--worker``, ``RANK`` 0 and 1 in their environment) and waits for them; the worker of
rank R lowers the add kernel R + 1 times for ``sm_90a`` (no GPU, no nvcc). The parent compiles
nothing. It exits non-zero if a worker did.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

WORKERS = 2


def add(n: int) -> Any:
    import tilelang.language as T

    @T.prim_func
    def add(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")) -> None:
        with T.Kernel(T.ceildiv(n, 256), threads=256) as bx:
            for i in T.Parallel(256):
                C[bx * 256 + i] = A[bx * 256 + i] + B[bx * 256 + i]

    return add


def work(rank: int) -> None:
    import tilelang
    from tilelang import tvm

    tilelang.disable_cache()
    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    with target:
        for index in range(rank + 1):
            tilelang.lower(add(1024 * (index + 1)), target=target, enable_device_compile=False)


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        work(int(os.environ["RANK"]))
        sys.exit(0)
    workers = [
        subprocess.Popen([sys.executable, __file__, "--worker"], env={**os.environ, "RANK": str(rank)})
        for rank in range(WORKERS)
    ]
    sys.exit(max(worker.wait() for worker in workers))
