# mypy: disable-error-code="valid-type, untyped-decorator, name-defined"
"""The bundled plain Apache TVM demo program: compiles a Relax model and TIR kernels for this CPU
(``llvm``) one after another, runs what compiled, and fails on purpose twice.

``iket-tui demo --tvm`` runs it under the agent where Apache TVM is installed (the ``tvm`` extra,
in an environment without TileLang). Each outcome is one line on stdout; a failure never stops
the program, which exits 0 after the last one. It knows nothing of the agent or the UI.

- ``mlp``: a two-layer Relax model, ``tvm.compile`` for ``llvm`` (the Relax pipeline, then TIR's
  for its kernels), run once on random input and checked against NumPy;
- ``vector_add``: a TIR kernel written in TVMScript, compiled and run;
- ``slow_mlp``: the same model while a pass of the program's own (``demo.SlowDown``) takes
  ``--slow-seconds`` at the start of the Relax pipeline;
- ``bad_pipeline``: a TIR kernel whose software-pipeline annotation names three stages for a loop
  body of one statement: TVM's ``s_tir.InjectSoftwarePipeline`` rejects it;
- ``rejected_mlp``: the model while a pass of the program's own (``demo.RejectRelu``) refuses it.

    python -m iket_tui.demo.tvm_program [--kernels a,b,c] [--slow-seconds S] [--pause S]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from iket_tui.durations import duration

TARGET = "llvm"
"""What every demo compile is for: this machine's CPU."""

SLOW_PASS = "demo.SlowDown"
"""The pass of the program's own that ``slow_mlp`` runs, for ``slow_seconds``."""

REJECTING_PASS = "demo.RejectRelu"
"""The pass of the program's own that fails ``rejected_mlp``."""

BAD_PIPELINE_PASS = "s_tir.InjectSoftwarePipeline"
"""TVM's pass in which ``bad_pipeline`` fails."""

EXIT_BAD_INPUT = 2


@I.ir_module
class MLP:
    @R.function
    def main(
        x: R.Tensor((4, 16), "float32"),
        w1: R.Tensor((16, 32), "float32"),
        b1: R.Tensor((32,), "float32"),
        w2: R.Tensor((32, 8), "float32"),
    ) -> R.Tensor((4, 8), "float32"):
        with R.dataflow():
            hidden = R.nn.relu(R.add(R.matmul(x, w1), b1))
            out = R.matmul(hidden, w2)
            R.output(out)
        return out


@T.prim_func
def vector_add(
    a: T.Buffer((1024,), "float32"), b: T.Buffer((1024,), "float32"), c: T.Buffer((1024,), "float32")
) -> None:
    for i in range(1024):
        c[i] = a[i] + b[i]


@T.prim_func(s_tir=True)
def bad_pipeline(a: T.Buffer((16, 8), "float32"), c: T.Buffer((16, 8), "float32")) -> None:
    with T.sblock("root"):
        for i in T.serial(16, annotations={"software_pipeline_stage": [0, 1, 2], "software_pipeline_order": [0, 1, 2]}):
            with T.sblock("copy"):
                vi = T.axis.spatial(16, i)
                for j in range(8):
                    c[vi, j] = a[vi, j] + T.float32(1)


def slow_down(seconds: float) -> Any:
    """A module pass of the program's own that only takes ``seconds``."""

    @tvm.transform.module_pass(opt_level=0, name=SLOW_PASS)
    def slow(mod: Any, _ctx: Any) -> Any:
        time.sleep(seconds)
        return mod

    return slow


@tvm.transform.module_pass(opt_level=0, name=REJECTING_PASS)
def reject_relu(mod: Any, _ctx: Any) -> Any:
    """A module pass of the program's own that refuses a model with a ReLU in it."""
    if "R.nn.relu" in mod.script():
        raise ValueError("this deployment has no ReLU kernel: rewrite the model without R.nn.relu")
    return mod


def compile_mlp(pipeline_before: Any = None) -> Any:
    """``MLP`` compiled for ``llvm``, with a pass of the program's own before the Relax pipeline."""
    pipeline = relax.get_pipeline("default")
    if pipeline_before is not None:
        pipeline = tvm.transform.Sequential([pipeline_before, pipeline], name="demo.pipeline")
    return tvm.compile(MLP, target=TARGET, relax_pipeline=pipeline)


def run_mlp(executable: Any) -> float:
    """Run the compiled model once on random input; its largest difference from NumPy."""
    rng = np.random.default_rng(0)
    x, w1, b1, w2 = (rng.standard_normal(shape).astype("float32") for shape in ((4, 16), (16, 32), (32,), (32, 8)))
    vm = relax.VirtualMachine(executable, tvm.cpu())
    got = vm["main"](*(tvm.runtime.tensor(value) for value in (x, w1, b1, w2))).numpy()
    expected = np.maximum(x @ w1 + b1, 0) @ w2
    return float(np.abs(got - expected).max())


def run_vector_add(executable: Any) -> float:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(1024).astype("float32"), rng.standard_normal(1024).astype("float32")
    c = tvm.runtime.tensor(np.zeros(1024, dtype="float32"))
    executable["vector_add"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), c)
    return float(np.abs(c.numpy() - (a + b)).max())


@dataclass(frozen=True)
class DemoCompile:
    """One named compile of the demo: what it does, and how to check what it built."""

    summary: str
    compile: Callable[[float], Any]
    check: Callable[[Any], float] | None = None


COMPILES: dict[str, DemoCompile] = {
    "mlp": DemoCompile("a two-layer Relax model for llvm", lambda _slow: compile_mlp(), run_mlp),
    "vector_add": DemoCompile(
        "a TIR kernel for llvm", lambda _slow: tvm.compile(vector_add, target=TARGET), run_vector_add
    ),
    "slow_mlp": DemoCompile(
        f"the model while {SLOW_PASS} takes its time", lambda slow: compile_mlp(slow_down(slow)), run_mlp
    ),
    "bad_pipeline": DemoCompile(
        f"a TIR kernel that {BAD_PIPELINE_PASS} rejects", lambda _slow: tvm.compile(bad_pipeline, target=TARGET)
    ),
    "rejected_mlp": DemoCompile(f"the model, which {REJECTING_PASS} refuses", lambda _slow: compile_mlp(reject_relu)),
}
DEFAULT_SEQUENCE = ("mlp", "vector_add", "slow_mlp", "bad_pipeline", "rejected_mlp", "mlp")


@dataclass(frozen=True)
class Settings:
    kernels: tuple[str, ...] = DEFAULT_SEQUENCE
    slow_seconds: float = 4.0
    pause: float = 1.0


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: {message}\n")


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more: {text!r}")
    return value


def _names(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in COMPILES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown {', '.join(unknown) or 'nothing'}; known: {', '.join(COMPILES)}")
    return names


def parse_arguments(argv: Sequence[str] | None = None) -> Settings:
    parser = _OneLineParser(
        prog="iket_tui.demo.tvm_program",
        description="Compile a Relax model and TIR kernels with Apache TVM for llvm; two fail on purpose.",
    )
    parser.add_argument("--kernels", type=_names, default=DEFAULT_SEQUENCE, help="comma-separated compile names")
    parser.add_argument("--slow-seconds", type=_non_negative, default=4.0, help="how long demo.SlowDown takes")
    parser.add_argument("--pause", type=_non_negative, default=1.0, help="seconds between compiles (default: 1)")
    arguments = parser.parse_args(argv)
    return Settings(kernels=arguments.kernels, slow_seconds=arguments.slow_seconds, pause=arguments.pause)


def one_line(error: BaseException) -> str:
    """``Type: message``, the message's first line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


def run(settings: Settings, out: Any) -> int:
    """Compile (and run) each of ``settings.kernels`` in order, one line per outcome on ``out``."""
    print(
        f"demo: Apache TVM {tvm.__version__}, compiling for {TARGET}, pause {settings.pause:g} s", file=out, flush=True
    )
    for index, name in enumerate(settings.kernels):
        if index:
            time.sleep(settings.pause)
        demo = COMPILES[name]
        print(f"compiling {name}: {demo.summary}", file=out, flush=True)
        started = time.monotonic_ns()
        try:
            built = demo.compile(settings.slow_seconds)
        except Exception as error:
            print(
                f"failed {name} after {duration(time.monotonic_ns() - started)}: {one_line(error)}",
                file=out,
                flush=True,
            )
            continue
        outcome = f"ok {name} in {duration(time.monotonic_ns() - started)}"
        if demo.check is not None:
            outcome += f", ran it: max error {demo.check(built):.1e}"
        print(outcome, file=out, flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m iket_tui.demo.tvm_program``."""
    try:
        return run(parse_arguments(argv), sys.stdout)
    except KeyboardInterrupt:
        print("demo: stopped by Ctrl-C", flush=True)
        return 130


if __name__ == "__main__":
    sys.exit(main())
