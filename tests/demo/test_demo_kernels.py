"""The demo kernels through TileLang's real pass pipeline for sm_90a, as an instrumentation tool sees them."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

pytest.importorskip("tilelang")

from tilelang.instrumentation import (
    CodegenEvent,
    IncompletePass,
    PassEvent,
    PassEventObserver,
    PassInstrumentationTool,
    StackedPassInstrument,
    current_pass_instrument_context,
    register_pass_instrumentation_tool,
    unregister_pass_instrumentation_tool,
)
from tvm.error import InternalError

from iket_tui.demo import kernels

pytestmark = pytest.mark.tilelang

GOOD_KERNELS = ("vector_add", "gemm", "softmax", "gemm_relu", "traced_gemm")


@dataclass
class PassRun:
    """One pass as the test's tool saw it."""

    name: str
    depth: int
    started: float
    finished: float | None = None

    @property
    def seconds(self) -> float:
        assert self.finished is not None, f"{self.name} never finished"
        return self.finished - self.started


@dataclass
class CompileLog:
    """Everything the test's tool saw of one compile session."""

    labels: list[str | None] = field(default_factory=list)
    passes: list[PassRun] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)
    codegen: list[str] = field(default_factory=list)
    error: BaseException | None = None
    finished: bool = False

    def pass_named(self, name: str) -> PassRun:
        (run,) = [run for run in self.passes if run.name == name]
        return run


class _Observer(PassEventObserver):  # type: ignore[misc]
    def __init__(self, log: CompileLog) -> None:
        self.log = log

    def pass_started(self, mod: Any, event: PassEvent) -> PassRun:
        run = PassRun(event.name, event.depth, time.monotonic())
        self.log.passes.append(run)
        return run

    def pass_finished(self, mod: Any, event: PassEvent, state: PassRun) -> None:
        state.finished = time.monotonic()

    def passes_incomplete(self, passes: Any, error: BaseException | None) -> None:
        self.log.incomplete.extend(frame.name for frame in passes if isinstance(frame, IncompletePass))


class _LoggingTool(PassInstrumentationTool):  # type: ignore[misc]
    def __init__(self, logs: list[CompileLog]) -> None:
        self.log = CompileLog()
        logs.append(self.log)

    def create_pass_instrument(self) -> object:
        self.log.labels.append(current_pass_instrument_context())
        return StackedPassInstrument(_Observer(self.log))

    def run_codegen(self, event: CodegenEvent, next_call: Callable[[], Any]) -> Any:
        self.log.codegen.append(event.name)
        return next_call()

    def finish(self, error: BaseException | None) -> None:
        self.log.error = error
        self.log.finished = True


@pytest.fixture
def compiles() -> Iterator[list[CompileLog]]:
    """The compile sessions seen while the test runs, in order."""
    logs: list[CompileLog] = []
    register_pass_instrumentation_tool("iket-tui-demo-test", lambda: _LoggingTool(logs))
    try:
        yield logs
    finally:
        unregister_pass_instrumentation_tool("iket-tui-demo-test")


def _only(logs: list[CompileLog]) -> CompileLog:
    assert len(logs) == 1
    return logs[0]


@pytest.mark.parametrize("name", GOOD_KERNELS)
def test_good_kernels_lower_through_every_pass(name: str, compiles: list[CompileLog]) -> None:
    source = kernels.lower(name)

    assert f"void {name}_kernel(" in source
    log = _only(compiles)
    assert log.labels == [f"stage=lower, kernel={name}, target=sm_90a"]
    names = [run.name for run in log.passes]
    assert len(names) > 60
    assert names.index("tl.LayoutInference") < names.index("tl.LowerTileOp") < names.index("tl.SplitHostDevice")
    assert all(run.finished is not None for run in log.passes)
    assert log.codegen == ["target.build.tilelang_cuda_without_compile"]
    assert log.finished and log.error is None and not log.incomplete


def test_gemm_is_lowered_for_hopper_tensor_cores() -> None:
    assert "wgmma" in kernels.lower("gemm")


def test_layout_conflict_fails_in_layout_inference(compiles: list[CompileLog]) -> None:
    with pytest.raises(InternalError, match="Layout infer conflict between D_local and C_local") as raised:
        kernels.lower("layout_conflict")

    log = _only(compiles)
    assert kernels.KERNELS["layout_conflict"].fails_in == "tl.LayoutInference"
    assert log.passes[-1].name == "tl.LayoutInference"
    assert log.passes[-1].finished is None
    assert log.incomplete == ["tl.LayoutInference"]
    assert log.error is raised.value
    assert log.codegen == []


def test_nvcc_rejects_the_undeclared_device_function(compiles: list[CompileLog]) -> None:
    with pytest.raises(RuntimeError) as raised:
        kernels.compile("nvcc_error")

    message = str(raised.value)
    assert f'error: identifier "{kernels.MISSING_DEVICE_FUNCTION}" is undefined' in message
    assert "Compilation error:" in message
    log = _only(compiles)
    assert log.labels == ["stage=jit-lower, kernel=nvcc_error, backend=tvm_ffi"]
    assert all(run.finished is not None for run in log.passes)
    assert not log.incomplete
    assert log.codegen == ["target.build.tilelang_cuda"]
    assert log.error is raised.value


def test_nvcc_error_kernel_lowers_when_nvcc_is_not_run() -> None:
    assert f"{kernels.MISSING_DEVICE_FUNCTION}(" in kernels.lower("nvcc_error")


def test_compile_runs_nvcc_on_a_good_kernel(compiles: list[CompileLog]) -> None:
    source = kernels.compile("vector_add")

    assert "void vector_add_kernel(" in source
    log = _only(compiles)
    assert log.labels == ["stage=jit-lower, kernel=vector_add, backend=tvm_ffi"]
    assert log.codegen[0] == "target.build.tilelang_cuda"
    assert log.finished and log.error is None


def test_slow_gemm_stalls_one_pass_for_the_requested_time(compiles: list[CompileLog]) -> None:
    kernels.lower("gemm")
    kernels.lower("slow_gemm", slow_seconds=1.5)

    plain, slowed = compiles
    assert [run.name for run in slowed.passes] == [run.name for run in plain.passes]
    assert slowed.pass_named(kernels.SLOWED_PASS).seconds >= 1.5
    assert slowed.labels == ["stage=lower, kernel=slow_gemm, target=sm_90a"]


def test_slowed_pass_is_restored_after_a_failing_compile(compiles: list[CompileLog]) -> None:
    import tilelang.transform

    original = tilelang.transform.InjectSoftwarePipeline
    with pytest.raises(InternalError), kernels.slowed_pass(kernels.SLOWED_PASS, 0.5):
        kernels.lower("layout_conflict")

    assert tilelang.transform.InjectSoftwarePipeline is original
    (log,) = compiles
    assert log.pass_named(kernels.SLOWED_PASS).seconds >= 0.5
    assert log.incomplete == ["tl.LayoutInference"]


def test_slowed_pass_rejects_a_name_tilelang_does_not_have() -> None:
    with pytest.raises(ValueError, match=r"not a pass of tilelang\.transform"), kernels.slowed_pass("tl.NoSuchPass", 1):
        pass


def test_unknown_kernel_names_the_known_ones() -> None:
    with pytest.raises(kernels.UnknownKernelError, match="unknown demo kernel 'matmul'; known: vector_add, gemm"):
        kernels.lower("matmul")
