"""SVG snapshots of the failure detail pane when the agent captured the failure for a reproducer:
a compile that nvcc rejected (the failed codegen step selected) and one that failed in
tl.LayoutInference (the failed pass selected).

The captures are built from fixed values, shaped as the agent sends them (see
``tests/e2e/test_repro.py`` for the real ones), so the pictures are the same on every run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from textual.pilot import Pilot
from ui_driving import wait_for_batches
from ui_fakes import FakeSource, FrozenClock, batch

from iket_tui.model.nodes import Node
from iket_tui.model.synthetic import LAYOUT_CONFLICT, Lowering, agent_hello, live_stream, lowerings
from iket_tui.protocol import messages as m
from iket_tui.protocol.messages import Message
from iket_tui.sources.base import SourceState
from iket_tui.ui.app import IketApp

Compare = Callable[..., bool]
SIZE = (160, 48)

TARGET_JSON = (
    '{"kind":"cuda","tag":"","keys":["cuda","gpu"],"host":{"kind":"c","tag":"","keys":["cpu"]},'
    '"max_num_threads":1024,"thread_warp_size":32,"arch":"sm_90a"}'
)
CONFIG_JSON = '{"root_index": 0, "nodes": [{"type": "ffi.Map", "data": []}], "metadata": {"tvm_version": "0.25"}}'
TEMPLATES = "/opt/tilelang/src"
CUTLASS = "/opt/tilelang/3rdparty/cutlass/include"
NVCC_OPTIONS = ["-std=c++20", f"-I{TEMPLATES}", f"-I{CUTLASS}"]
KERNEL_SOURCE = """\
#include <tl_templates/cuda/gemm.h>
#include <tl_templates/cuda/copy.h>
#include <tl_templates/cuda/reduce.h>
#include <tl_templates/cuda/ldsm.h>
#include <tl_templates/cuda/threadblock_swizzle.h>
#include <tl_templates/cuda/debug.h>
#ifdef ENABLE_BF16
#include <tl_templates/cuda/cuda_bf16_fallbacks.cuh>
#endif

extern "C" __global__ void nvcc_error_kernel(half_t* __restrict__ A, half_t* __restrict__ C);
extern "C" __global__ void __launch_bounds__(128, 1) nvcc_error_kernel(half_t* __restrict__ A, half_t* __restrict__ C) {
  #pragma unroll
  for (int i = 0; i < 128; ++i) {
    C[((((((int)blockIdx.y) * 131072) + (i * 1024)) + (((int)blockIdx.x) * 128)) + ((int)threadIdx.x))] = \
iket_demo_missing_device_function(A[((((((int)blockIdx.y) * 131072) + (i * 1024)) + (((int)blockIdx.x) * 128)) + \
((int)threadIdx.x))]);
  }
}
"""
NVCC_OUTPUT = f"""\
{TEMPLATES}/tl_templates/cuda/common.h(621): warning #1444-D: type "longlong4" was declared deprecated
    longlong4 result;
              ^

/tmp/tmpq1w2e3r4/tvm_kernels.cu(16): error: identifier "iket_demo_missing_device_function" is undefined
    C[((((((int)blockIdx.y) * 131072) + (i * 1024)) + (((int)blockIdx.x) * 128)) + ((int)threadIdx.x))] = \
iket_demo_missing_device_function(A[((((((int)blockIdx.y) * 131072) + (i * 1024)) + (((int)blockIdx.x) * 128)) + \
((int)threadIdx.x))]);
                                                                                                           ^

1 error detected in the compilation of "/tmp/tmpq1w2e3r4/tvm_kernels.cu".
"""
NVCC_COMMAND = (
    f"/usr/local/cuda/bin/nvcc -ccbin=/usr/bin/g++ --cubin -O3 -lineinfo -arch=sm_90a {' '.join(NVCC_OPTIONS)} "
    "-o /tmp/tmpq1w2e3r4/tvm_kernels.cubin /tmp/tmpq1w2e3r4/tvm_kernels.cu"
)
NVCC_ERROR = f"RuntimeError: Compilation error:\n{NVCC_OUTPUT}\nCommand: {NVCC_COMMAND}\n"
MODULE_SCRIPT = """\
# from tvm.script import ir as I
# from tvm.script import tirx as T

@I.ir_module
class Module:
    @T.prim_func
    def add_transposed(A_handle: T.handle, B_handle: T.handle, D_handle: T.handle, C_handle: T.handle):
        T.func_attr({"target": T.target({"arch": "sm_90a", "kind": "cuda"})})
        A = T.match_buffer(A_handle, (1024, 1024), "float16")
        B = T.match_buffer(B_handle, (1024, 1024), "float16")
        D = T.match_buffer(D_handle, (1024, 1024), "float32")
        C = T.match_buffer(C_handle, (1024, 1024), "float32")
        with T.block("root"):
            C_l = T.alloc_buffer((128, 128), scope="local.fragment")
            D_l = T.alloc_buffer((128, 128), scope="local.fragment")
            for i, j in T.Parallel(128, 128):
                C_l[i, j] = C_l[i, j] + D_l[j, i]
"""


def with_capture(stream: list[Message], capture: Message) -> list[Message]:
    """``stream`` with ``capture`` just before the ``compile_end`` of its compile, as the agent sends it."""
    end = next(
        index
        for index, msg in enumerate(stream)
        if msg["type"] == m.COMPILE_END and msg["compile"] == capture["compile"]
    )
    return [*stream[:end], capture, *stream[end:]]


def nvcc_rejected_stream() -> list[Message]:
    """Two good compiles, then one whose device build nvcc rejects, with what the agent captured of it."""
    good = lowerings(2, fail=())
    start = good[-1].end_ns() + 30_000_000
    rejected = Lowering(
        compile=3, kernel="nvcc_error", start_ns=start, codegen_ns=2_800_000_000, codegen_error=NVCC_ERROR
    )
    stream = [agent_hello(), *(msg for spec in good for msg in spec.messages()), *rejected.messages()]
    end = stream[-1]
    capture = m.compile_failure(
        compile=3,
        stage="codegen",
        seq=None,
        name="target.build.tilelang_cuda",
        error=NVCC_ERROR,
        error_type="RuntimeError",
        t_ns=end["t_ns"] - 1_000,
        target=TARGET_JSON,
        config_json=CONFIG_JSON,
        source=KERNEL_SOURCE,
        compiler_output=NVCC_OUTPUT,
        nvcc_format="cubin",
        nvcc_arch=["-arch=sm_90a"],
        nvcc_options=NVCC_OPTIONS,
        nvcc_command=NVCC_COMMAND,
        tilelang_paths={"TILELANG_TEMPLATE_PATH": TEMPLATES, "CUTLASS_INCLUDE_DIR": CUTLASS},
    )
    return with_capture(stream, capture)


def layout_conflict_stream() -> list[Message]:
    """The live session whose fourth compile fails in tl.LayoutInference, with the module captured."""
    stream = live_stream()
    failed = next(msg for msg in stream if msg["type"] == m.PASS_INCOMPLETE and msg["name"] == "tl.LayoutInference")
    end = next(msg for msg in stream if msg["type"] == m.COMPILE_END and msg["compile"] == failed["compile"])
    capture = m.compile_failure(
        compile=failed["compile"],
        stage="pass",
        seq=failed["seq"],
        name=failed["name"],
        error=LAYOUT_CONFLICT,
        error_type="tvm.error.InternalError",
        t_ns=end["t_ns"] - 1_000,
        target=TARGET_JSON,
        config_json=CONFIG_JSON,
        ir_script=MODULE_SCRIPT,
        ir_json='{"root_index": 1, "nodes": [{"type": "None"}, {"type": "ir.IRModule"}]}',
    )
    return with_capture(stream, capture)


def app_over(messages: list[Message]) -> IketApp:
    source = FakeSource([batch(messages, state=SourceState.LIVE)], stay_open=True)
    return IketApp(source, clock=FrozenClock(), follow=False)


def selecting(app: IketApp, pick: Callable[[IketApp], Node | None]) -> Callable[[Pilot[Any]], Awaitable[None]]:
    """A ``run_before`` that waits for the stream, then moves the cursor to the node ``pick`` finds."""

    async def run_before(pilot: Pilot[Any]) -> None:
        await wait_for_batches(pilot, app, 1)
        node = pick(app)
        assert node is not None
        line = app.rows.index_of(node)
        assert line is not None
        await pilot.press("home", *["down"] * line)
        await pilot.pause()

    return run_before


def failed_codegen_step(app: IketApp) -> Node | None:
    return app.pass_tree.compiles[-1].failed_codegen


def failed_pass(app: IketApp) -> Node | None:
    return next((comp.failing for comp in app.pass_tree.compiles if comp.failing is not None), None)


def test_codegen_failure_shows_the_captured_source_and_nvccs_first_error(snap_compare: Compare) -> None:
    app = app_over(nvcc_rejected_stream())
    assert snap_compare(app, terminal_size=SIZE, run_before=selecting(app, failed_codegen_step))


def test_layout_inference_failure_shows_the_captured_module(snap_compare: Compare) -> None:
    app = app_over(layout_conflict_stream())
    assert snap_compare(app, terminal_size=SIZE, run_before=selecting(app, failed_pass))
