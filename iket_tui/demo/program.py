"""The bundled demo program: compiles real TileLang kernels one after another, some failing.

``iket-tui demo`` runs it under the agent, so a watcher sees passes appear, one pass stall for a
few seconds, one compile fail in a pass and one fail in nvcc. Each outcome is one line on stdout;
a failure never stops the program, which exits 0 after the last kernel. Ctrl-C stops it once the
kernel being compiled is done (exit 130); ``--forever`` runs the list until then. It knows nothing
of the agent or the UI, like any user program.

``--hang`` first starts ``stuck_gemm`` on a thread of its own, where it stays in a pass of the
demo's (``demo.WaitForAbort``) until that compile is aborted; the list is compiled meanwhile.
``--stay`` keeps the program alive after the list, until Ctrl-C or SIGTERM: ``iket-tui demo``
asks for both, so that everything can be tried on a live program, for as long as the UI is open.

    python -m iket_tui.demo.program [--kernels a,b,c] [--repeat N] [--slow-seconds S]
                                    [--pause S] [--forever] [--lower-only] [--hang] [--stay]
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any, NoReturn, TextIO

from iket_tui.durations import duration

DEFAULT_SEQUENCE = (
    "vector_add",
    "gemm",
    "softmax",
    "slow_gemm",
    "layout_conflict",
    "nvcc_error",
    "gemm_relu",
    "traced_gemm",
    "vector_add",
)
"""Good kernels, the slowed one, the two failures, then good ones again (one with IKET events)."""

HANG_KERNEL = "stuck_gemm"
"""The kernel ``--hang`` compiles on a thread of its own."""
HANG_THREAD = "stuck compile"
"""The name of that thread, as stacks show it."""
HANG_REACHED_S = 120.0
"""How long the list waits for the stuck compile to reach its waiting pass, at most."""
NO_NVCC = "nvcc=not found"
"""What the label of every lowering says, and the program's first line, where nvcc is missing."""
END_WAIT_S = 10.0
"""How long the program, as it ends, waits for the stuck compile to let go."""

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130

_COMPILER_ERROR_LINE = re.compile(r"\S: (?:fatal )?error\b")
"""A compiler diagnostic such as ``kernel.cu(21): error: identifier "f" is undefined``."""


@dataclass(frozen=True)
class DemoSettings:
    """What one run of the demo program does."""

    kernels: tuple[str, ...] = DEFAULT_SEQUENCE
    repeat: int = 1
    forever: bool = False
    slow_seconds: float = 4.0
    pause: float = 1.0
    lower_only: bool = False
    launches: int = 3
    """Launches of each traced kernel where there is a GPU."""
    hang: bool = False
    """Compile ``HANG_KERNEL`` on a thread of its own first, stuck until aborted."""
    stay: bool = False
    """After the list, stay alive until Ctrl-C or SIGTERM."""


class _OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, as every iket-tui error is."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: {message}\n")


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 0 or value != value:
        raise argparse.ArgumentTypeError(f"must be 0 or more: {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more: {text!r}")
    return value


def _kernel_list(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise argparse.ArgumentTypeError("no kernel named")
    return names


def parse_arguments(argv: Sequence[str] | None = None) -> DemoSettings:
    """The settings named on the command line; bad input exits 2 with a one-line message."""
    parser = _OneLineParser(
        prog="iket_tui.demo.program",
        description="Compile real TileLang kernels for sm_90a one after another; some fail on purpose.",
    )
    parser.add_argument(
        "--kernels",
        type=_kernel_list,
        default=DEFAULT_SEQUENCE,
        help=f"comma-separated kernel names (default: {','.join(DEFAULT_SEQUENCE)})",
    )
    parser.add_argument("--repeat", type=_positive_int, default=1, help="run the list this many times (default: 1)")
    parser.add_argument("--forever", action="store_true", help="run the list again and again until interrupted")
    parser.add_argument(
        "--slow-seconds",
        type=_non_negative,
        default=4.0,
        help="how much longer the slowed pass takes in slow_gemm (default: 4)",
    )
    parser.add_argument("--pause", type=_non_negative, default=1.0, help="seconds to wait between kernels (default: 1)")
    parser.add_argument(
        "--lower-only",
        action="store_true",
        help="run passes and codegen but not nvcc (also chosen when nvcc is missing)",
    )
    parser.add_argument(
        "--launches",
        type=_positive_int,
        default=3,
        help="where there is a GPU, launch each kernel with IKET events this many times (default: 3)",
    )
    parser.add_argument(
        "--hang",
        action="store_true",
        help=f"first start {HANG_KERNEL} on a thread of its own, stuck in a pass of the demo's until aborted",
    )
    parser.add_argument(
        "--stay", action="store_true", help="after the list, stay alive until Ctrl-C or SIGTERM (for a live demo)"
    )
    arguments = parser.parse_args(argv)
    return DemoSettings(
        kernels=arguments.kernels,
        repeat=arguments.repeat,
        forever=arguments.forever,
        slow_seconds=arguments.slow_seconds,
        pause=arguments.pause,
        lower_only=arguments.lower_only,
        launches=arguments.launches,
        hang=arguments.hang,
        stay=arguments.stay,
    )


def one_line(error: BaseException) -> str:
    """``Type: message`` on one line, the message cut to the line that says what went wrong.

    nvcc failures arrive as the whole generated source followed by the compiler's output, so the
    first line mentioning an error is the telling one; other messages keep their first line.
    """
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    telling = next((line for line in lines if _COMPILER_ERROR_LINE.search(line)), None)
    message = telling or (lines[0] if lines else "")
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


class StopRequest:
    """Ctrl-C asks the program to stop once the kernel being compiled is done; a second one ends it at once.

    An interrupt raised inside a TileLang compile becomes an unrelated ``RuntimeError`` or, inside
    some C++ passes such as ``tl.LayoutInference``, an endless busy loop (TileLang 0.1.15), so the
    first Ctrl-C only sets a flag that the program reads between kernels.
    """

    def __init__(self) -> None:
        self._requested = threading.Event()
        self._notice_fd: int | None = None
        self._idle = False

    def install(self, notices: TextIO) -> None:
        """Take over SIGINT for the rest of the program; say on ``notices`` what the first Ctrl-C does."""
        self._notice_fd = notices.fileno()
        signal.signal(signal.SIGINT, self._on_interrupt)

    def _on_interrupt(self, signum: int, frame: FrameType | None) -> None:
        if self._requested.is_set():
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
            return
        self._requested.set()
        if self._notice_fd is not None and not self._idle:
            os.write(self._notice_fd, b"demo: stopping after this kernel; Ctrl-C again stops at once\n")

    def idle(self) -> None:
        """No kernel is compiled from now on (``--stay``): Ctrl-C stops the program at once, with no notice."""
        self._idle = True

    @property
    def requested(self) -> bool:
        """Whether Ctrl-C was pressed."""
        return self._requested.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, less if Ctrl-C is pressed meanwhile; whether it was."""
        return self._requested.wait(seconds)


def _schedule(settings: DemoSettings) -> Iterable[str]:
    if settings.forever:
        return itertools.cycle(settings.kernels)
    return itertools.chain.from_iterable(itertools.repeat(settings.kernels, settings.repeat))


def run(settings: DemoSettings, out: TextIO, stop: StopRequest | None = None) -> int:
    """Compile the kernels of ``settings`` in order, one line per outcome on ``out``; the exit code.

    Returns 0 after the last kernel (with ``stay``, once Ctrl-C is pressed after it), 130 when
    ``stop`` is requested first. Raises ``UnknownKernelError`` before compiling anything when a
    name is not a demo kernel. With ``hang``, the stuck compile is started first and let go (it
    fails) before this returns.
    """
    from iket_tui.demo import kernels

    for name in settings.kernels:
        kernels.kernel(name)
    stop = stop or StopRequest()
    no_nvcc = not settings.lower_only and not kernels.nvcc_available()
    lower_only = settings.lower_only or no_nvcc
    stage = "lowering" if lower_only else "compiling"
    gpu = None if lower_only else kernels.gpu_name()
    where = f"; traced kernels run on {gpu}" if gpu else ""
    where += f"; {NO_NVCC}: nvcc is not run, so nvcc_error does not fail" if no_nvcc else ""
    print(f"demo: {stage} for {kernels.TARGET['arch']}, pause {settings.pause:g} s{where}", file=out, flush=True)
    hang = _start_hang(kernels, settings, out) if settings.hang else None
    try:
        return _compile_list(kernels, settings, out, stop, stage=stage, gpu=gpu, note=NO_NVCC if no_nvcc else None)
    finally:
        if hang is not None and hang.is_alive():
            kernels.end_waiting()
            hang.join(END_WAIT_S)


def _compile_list(
    kernels: Any,
    settings: DemoSettings,
    out: TextIO,
    stop: StopRequest,
    *,
    stage: str,
    gpu: str | None,
    note: str | None,
) -> int:
    for index, name in enumerate(_schedule(settings)):
        if stop.requested or (index and stop.wait(settings.pause)):
            print("demo: stopped by Ctrl-C", file=out, flush=True)
            return EXIT_INTERRUPTED
        compiled = _compile_one(kernels, name, settings, out, stage=stage, note=note)
        if compiled is not None and gpu is not None and kernels.KERNELS[name].traced:
            _launch(kernels, name, compiled, settings.launches, out)
    if settings.stay:
        print("demo: every kernel compiled; staying alive until stopped (Ctrl-C)", file=out, flush=True)
        stop.idle()
        while not stop.wait(3600.0):
            pass
        print("demo: stopped by Ctrl-C", file=out, flush=True)
    return 0


def _compile_one(
    kernels: Any, name: str, settings: DemoSettings, out: TextIO, *, stage: str, note: str | None = None
) -> Any:
    """Compile (or lower) one kernel, saying how it went; TileLang's kernel object where compiled.
    ``note`` ends the label of a lowering (what the tree shows of it)."""
    print(f"{stage} {name}: {kernels.KERNELS[name].summary}", file=out, flush=True)
    started = time.monotonic_ns()
    compiled = None
    try:
        if stage == "lowering":
            kernels.lower(name, slow_seconds=settings.slow_seconds, note=note)
        else:
            compiled = kernels.compiled_kernel(name, slow_seconds=settings.slow_seconds)
    except Exception as error:
        outcome = f"failed {name} after {duration(time.monotonic_ns() - started)}: {one_line(error)}"
    else:
        outcome = f"ok {name} in {duration(time.monotonic_ns() - started)}"
    print(outcome, file=out, flush=True)
    return compiled


def _start_hang(kernels: Any, settings: DemoSettings, out: TextIO) -> threading.Thread:
    """Start the stuck compile on a thread of its own; return once it waits in its pass (or ended)."""
    reached = threading.Event()

    def hang() -> None:
        print(f"lowering {HANG_KERNEL}: {kernels.KERNELS[HANG_KERNEL].summary}", file=out, flush=True)
        started = time.monotonic_ns()
        try:
            kernels.lower(HANG_KERNEL, reached=reached)
        except Exception as error:
            outcome = f"failed {HANG_KERNEL} after {duration(time.monotonic_ns() - started)}: {one_line(error)}"
        else:
            outcome = f"ok {HANG_KERNEL} in {duration(time.monotonic_ns() - started)}"
        finally:
            reached.set()
        print(outcome, file=out, flush=True)

    thread = threading.Thread(target=hang, name=HANG_THREAD, daemon=True)
    thread.start()
    reached.wait(HANG_REACHED_S)
    return thread


def _launch(kernels: Any, name: str, compiled: Any, launches: int, out: TextIO) -> None:
    started = time.monotonic_ns()
    try:
        error = kernels.run_gemm(compiled, launches)
    except Exception as exc:
        print(f"failed to run {name}: {one_line(exc)}", file=out, flush=True)
        return
    took = time.monotonic_ns() - started
    print(f"ran {name} {launches} times in {duration(took)}, max relative error {error:.1e}", file=out, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m iket_tui.demo.program``."""
    settings = parse_arguments(argv)
    stop = StopRequest()
    stop.install(sys.stdout)
    from iket_tui.demo.kernels import UnknownKernelError

    try:
        return run(settings, sys.stdout, stop)
    except UnknownKernelError as error:
        print(f"iket_tui.demo.program: {error}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
