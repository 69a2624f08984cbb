"""One rank of a ``torchrun`` job on this CPU: joins the gloo process group, lowers the demo's
GEMM, and waits at a barrier for the other ranks. The rank ``IKET_TEST_SLOW_RANK`` names lowers it
with ``tl.InjectSoftwarePipeline`` slowed by ``IKET_TEST_SLOW`` seconds."""

from __future__ import annotations

import os

import torch.distributed as dist

from iket_tui.demo import kernels

dist.init_process_group("gloo")
rank = dist.get_rank()
slowed = rank == int(os.environ.get("IKET_TEST_SLOW_RANK", "-1"))
kernels.lower("slow_gemm", slow_seconds=float(os.environ.get("IKET_TEST_SLOW", "0")) if slowed else 0.0)
dist.barrier()
dist.destroy_process_group()
