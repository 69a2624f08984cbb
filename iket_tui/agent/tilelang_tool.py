"""Every TileLang compile, observed through ``tilelang.instrumentation`` and told to the registry.

TileLang creates one :class:`CompileWatcher` per compile session. It hands each TVM
``PassContext`` of that compile a pass instrument of its own, which notes the context's passes
(:mod:`~iket_tui.agent.pass_notes`; sequence numbers are shared across the compile's contexts),
wraps codegen (whose processes, nvcc and below it, are watched while it runs: see
:mod:`~iket_tui.agent.compiler_processes`), and learns the compile's real exception in
``finish``. Nothing here may raise into the compiler: a failure of the watcher is counted in
the registry and the compile goes on unobserved. Its ``compile_begin`` also says where the
program asked for it and what it was given (:mod:`~iket_tui.agent.compile_origin`); pass pipelines
the program runs itself are compiles of their own (:mod:`~iket_tui.agent.program_pipelines`).

Two TileLang facts shape the order of events. The label of a ``PassContext`` is readable only
while its instrument is created, and the kernel name of a plain ``tilelang.lower`` is known
only from the module the first pass receives; so ``compile_begin`` (and the context entries
before it) go out when the compile first does something, carrying their original times. A
failing pass is reported with ``error=None`` when its context exits, and the exception
reaches only ``finish``; so the watcher aborts its open passes itself when an exception
leaves a pass pipeline or codegen, and holds any that were still reported without an error
until ``finish`` names it.

What a failure needs to be made again elsewhere (``compile_failure``, see :mod:`capture`) is
taken as it unwinds, from the failing pass or codegen step, and sent just before ``compile_end``.
"""

from __future__ import annotations

import functools
import re
import sys
import threading
import time
from collections.abc import Callable, Generator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, Concatenate, Final, ParamSpec, TypeVar

from tilelang.instrumentation import (
    PassInstrumentationTool,
    current_compile_pass_instrumentation,
    current_pass_instrument_context,
    current_pass_phase,
    register_pass_instrumentation_tool,
    unregister_pass_instrumentation_tool,
)
from tvm import transform
from tvm.ir.instrument import pass_instrument
from tvm.target import Target

from iket_tui.agent import abort, capture, compile_origin, compiling, failures, program_pipelines
from iket_tui.agent.compile_end import EndingCompile, incomplete, target_text
from iket_tui.agent.compiler_processes import CodegenWatch
from iket_tui.agent.pass_notes import PassNotes
from iket_tui.agent.registry import Registry
from iket_tui.protocol import messages as m
from iket_tui.protocol.messages import PassTuple

TOOL_NAME: Final = "iket-tui"

_P = ParamSpec("_P")
_R = TypeVar("_R")
_W = TypeVar("_W", bound="CompileWatcher")

_KERNEL_IN_LABEL: Final = re.compile(r"(?:^|,)\s*kernel=([^,]+)")

try:  # the phase, read in one C call between two passes; TileLang's public reader otherwise
    from tilelang.instrumentation.events import _current_pass_phase

    _phase_now: Callable[[], str | None] = _current_pass_phase.get
except ImportError:  # pragma: no cover - another TileLang
    _phase_now = current_pass_phase


class ScopedPassNotes(PassNotes):
    """The notes of one ``PassContext`` that also, at the context's first pass, have the compile
    keep the target and pass context in force there (once per context, on the compiler's thread:
    only that thread can read them, and a stuck pass's reproducer needs them)."""

    def __init__(self, compile: CompileWatcher, *, keep_ir: bool, phase_now: Callable[[], str | None]) -> None:
        super().__init__(compile, keep_ir=keep_ir, phase_now=phase_now)
        self.watcher = compile
        self.begun = False  # every context's first pass begins it, not only the compile's first

    def _begin(self, mod: Any) -> None:
        super()._begin(mod)
        self.watcher.keep_scope(self.context)


_PassRecorder: Final = pass_instrument(ScopedPassNotes)
"""The notes of one ``PassContext``, as the TVM pass instrument of that context."""


def register(registry: Registry) -> None:
    """Watch every TileLang compile that starts from now on, and the nvcc runs of its codegen."""
    register_pass_instrumentation_tool(TOOL_NAME, lambda: CompileWatcher(registry))
    try:
        capture.watch_nvcc()
    except Exception:
        registry.observer_errors += 1
    try:
        abort.register_with_tvm()
    except Exception:
        registry.observer_errors += 1
    try:
        program_pipelines.register(registry)
    except Exception:
        registry.observer_errors += 1


def unregister() -> None:
    """Stop watching compiles that start from now on."""
    unregister_pass_instrumentation_tool(TOOL_NAME)
    with suppress(Exception):
        capture.unwatch_nvcc()
    with suppress(Exception):
        program_pipelines.unregister()


def _never_raises(method: Callable[Concatenate[_W, _P], _R]) -> Callable[Concatenate[_W, _P], _R | None]:
    """Run a watcher callback; if it fails, count the failure and let the compile go on."""

    @functools.wraps(method)
    def guarded(self: _W, /, *args: _P.args, **kwargs: _P.kwargs) -> _R | None:
        try:
            return method(self, *args, **kwargs)
        except abort.CompileAborted:
            raise  # an abort that reached the compile here: the compile fails with it
        except Exception:
            self.registry.observer_errors += 1
            return None

    return guarded


class CompileWatcher(EndingCompile, PassInstrumentationTool):  # type: ignore[misc]
    """One TileLang compile session, seen as ``compile_begin`` ... ``compile_end`` events."""

    def __init__(self, registry: Registry) -> None:
        super().__init__(registry)
        self._label: str | None = None
        self._first_seen_ns: int | None = None
        self._early_contexts: list[tuple[int, int]] = []
        self._next_context = 0
        self._failing: tuple[int, str, dict[str, Any]] | None = None  # seq, name, scope of the failed pass
        self._failed_codegen: tuple[str, dict[str, Any], capture.NvccRun | None] | None = None  # step, scope, nvcc
        self._thread_id: int | None = None  # the compiler's thread
        self._origin: dict[str, Any] = {}  # where the program asked for the compile (compile_origin)

    # TileLang's tool interface

    @_never_raises
    def create_pass_instrument(self) -> Any:
        with self.lock:
            if self._label is None:
                self._label = current_pass_instrument_context() or _session_name()
                self._origin = compile_origin.origin(sys._getframe(1))
            if self._thread_id is None:
                self._thread_id = threading.get_ident()
                self.interruptible()
            self._seen()
            instrument = _PassRecorder(self, keep_ir=self.registry.ir_store.limit > 0, phase_now=_phase_now)
            self.add_context(instrument)
        return instrument

    @contextmanager
    def pipeline_scope(self, base_phase: str) -> Generator[None, None, None]:
        try:
            yield
        except BaseException as exc:
            self._abort_open_passes(exc)
            raise

    def run_codegen(self, event: Any, next_call: Callable[[], Any]) -> Any:
        started = self._codegen_began(event)
        capture.forget_nvcc()
        processes = self._watch_processes(event)
        try:
            with compiling.generating(self.compile_id):
                result = next_call()
        except BaseException as exc:
            self._unwatch_processes(processes)
            aborted = abort.instead_of(self.registry.running, self.compile_id, exc)
            self._codegen_ended(event, started, aborted or exc)
            if aborted is not None:
                raise aborted from exc
            raise
        self._unwatch_processes(processes)
        self._codegen_ended(event, started, None)
        abort.raise_again(self.registry.running, self.compile_id)
        return result

    def _ending(self, error: BaseException | None) -> tuple[str, int | None] | None:
        if self.compile_id is None and self._first_seen_ns is None and error is None:
            return None
        if self._label is None:
            self._label = _session_name()
        return self._label or "", self._first_seen_ns

    def _captured_failure(self, compile_id: int) -> dict[str, Any] | None:
        """What was kept of the failed codegen step or pass, as ``compile_failure`` fields."""
        if self._stage == "codegen" and self._failed_codegen is not None:
            step, found, nvcc = self._failed_codegen
            return {"stage": "codegen", "seq": None, "name": step, **found, **capture.failed_codegen(nvcc)}
        if self._failing is not None:
            seq, name, found = self._failing
            return {
                "stage": "pass",
                "seq": seq,
                "name": name,
                **found,
                **capture.failed_pass(self.registry.ir_store, compile_id, seq),
            }
        return None

    # Pass contexts, and passes left incomplete, from each context's notes

    @_never_raises
    def context_entered(self) -> int:
        now = time.monotonic_ns()
        with self.lock:
            self.drain()  # what the contexts around this one noted came first
            context = self._next_context
            self._next_context += 1
            if self.compile_id is None:
                self._seen(now)
                self._early_contexts.append((context, now))
            else:
                self.registry.emit(
                    m.pass_context(m.PASS_CONTEXT_ENTER, compile=self.compile_id, context=context, t_ns=now)
                )
        return context

    @_never_raises
    def context_exited(self, context: int) -> None:
        compile_id = self.announce()
        msg = m.pass_context(m.PASS_CONTEXT_EXIT, compile=compile_id, context=context, t_ns=time.monotonic_ns())
        if any(held[0] == context for held in self._unnamed_failures):
            self._held_exits.append(msg)
        else:
            self.registry.emit(msg)

    @_never_raises
    def passes_incomplete(self, context: int, passes: Sequence[PassTuple], error: BaseException | None) -> None:
        now = time.monotonic_ns()
        if self._stage is None:
            self._stage = "pass"
        described = failures.describe(error) if error is not None else None
        if passes and self._failing is None:
            innermost = passes[-1]
            self._failing = (innermost[4], innermost[3], capture.scope())
        for row in passes:
            if described is None:
                self._unnamed_failures.append((context, row, now))
            else:
                self.registry.emit(incomplete(context, row, now, described))

    @_never_raises
    def callback_mismatch(self, context: int, actual: str, expected: str | None) -> None:
        self.registry.emit(
            m.callback_mismatch(
                compile=self.announce(),
                context=context,
                expected=_optional_str(expected),
                got=str(actual),
                t_ns=time.monotonic_ns(),
            )
        )

    # Internals

    @_never_raises
    def keep_scope(self, context: int) -> None:
        """Keep the target and pass context in force in pass context ``context`` (its first pass runs now)."""
        if self.compile_id is not None:
            self.registry.running.keep_scope(
                self.compile_id, context, Target.current(allow_none=True), transform.PassContext.current()
            )

    def _seen(self, now: int | None = None) -> None:
        if self._first_seen_ns is None:
            self._first_seen_ns = time.monotonic_ns() if now is None else now

    def announce(self, mod: Any = None) -> int:
        """The compile id, announcing the compile (and the contexts it entered so far) the first
        time: on the compiler's thread, where the compile's target is in scope."""
        if self.compile_id is not None:
            return self.compile_id
        self._seen()
        compile_id = self.registry.next_compile_id()
        label = self._label or _session_name() or ""
        self._label = label
        kernel = _kernel_from_label(label) or _kernel_from_module(mod)
        inputs = self._inputs(mod, kernel)
        self.registry.emit(
            m.compile_begin(
                compile=compile_id,
                label=label,
                kernel=kernel,
                target=_current_target(),
                t_ns=self._first_seen_ns or time.monotonic_ns(),
                **self._origin,
                **inputs,
            )
        )
        self.compile_id = compile_id
        self.registry.running.began(compile_id, self._thread_id or threading.get_ident())
        for context, t_ns in self._early_contexts:
            self.registry.emit(m.pass_context(m.PASS_CONTEXT_ENTER, compile=compile_id, context=context, t_ns=t_ns))
        self._early_contexts.clear()
        return compile_id

    def _inputs(self, mod: Any, kernel: str | None) -> dict[str, Any]:
        """What the compile was given (its first pass's module, the pass configuration in force),
        read only on the compiler's thread, where that configuration is the compile's; and where
        the IR is kept, how its module differs from that of the kernel's compile before."""
        if mod is None or threading.get_ident() != self._thread_id:
            return {}
        try:
            context = transform.PassContext.current()
        except Exception:
            context = None
        found = compile_origin.inputs(mod, context)
        input_hash = found.get("input_hash")
        if input_hash is not None:
            key = compile_origin.input_key(self._origin, kernel)
            keep = self.registry.ir_store.keeping
            found["input_diff"] = self.registry.inputs.diff(key, input_hash, mod, keep=keep)
        return found

    @_never_raises
    def _abort_open_passes(self, error: BaseException) -> None:
        """Report the passes open in this compile as incomplete, with the exception that stopped them."""
        with self.lock:
            self.drain()
            for notes in self.contexts:
                if notes.open:
                    notes.abort(error)

    @_never_raises
    def _codegen_began(self, event: Any) -> int:
        now = time.monotonic_ns()
        with self.lock:
            self.drain()
            self.registry.emit(
                m.codegen_begin(compile=self.announce(getattr(event, "mod", None)), t_ns=now, name=str(event.name))
            )
        return now

    @_never_raises
    def _watch_processes(self, event: Any) -> CodegenWatch:
        """Watch the processes the codegen step starting on this thread runs (nvcc and below it)."""
        return self.registry.compiler_processes.watch(self.announce(), str(event.name))

    @_never_raises
    def _unwatch_processes(self, watch: CodegenWatch | None) -> None:
        if watch is not None:
            self.registry.compiler_processes.done(watch)

    @_never_raises
    def _codegen_ended(self, event: Any, started_ns: int | None, error: BaseException | None) -> None:
        with self.lock:
            self.drain()
            self._codegen_end(event, started_ns, error)

    def _codegen_end(self, event: Any, started_ns: int | None, error: BaseException | None) -> None:
        if error is not None:
            self._stage = "codegen"
            if self._failed_codegen is None:
                self._failed_codegen = (str(event.name), capture.scope(), capture.failed_nvcc())
            self._abort_open_passes(error)
        now = time.monotonic_ns()
        msg = m.codegen_end(
            compile=self.announce(),
            t_ns=now,
            duration_ns=now - started_ns if started_ns is not None else 0,
            ok=error is None,
            error=failures.describe(error) if error is not None else None,
            name=str(event.name),
        )
        self.registry.emit(msg)


def _session_name() -> str | None:
    session = current_compile_pass_instrumentation()
    name = getattr(session, "name", None)
    return None if name is None else str(name)


def _kernel_from_label(label: str) -> str | None:
    """``kernel=NAME`` in a context label such as ``stage=jit-lower, kernel=add, backend=tvm_ffi``."""
    match = _KERNEL_IN_LABEL.search(label)
    return match.group(1).strip() if match else None


def _kernel_from_module(mod: Any) -> str | None:
    """The kernel a module holds: its first function's symbol, with a count of the others."""
    try:
        return _function_names(mod)
    except Exception:
        return None


def _function_names(mod: Any) -> str | None:
    functions = getattr(mod, "functions", None)
    if not functions:
        return None
    names: list[str] = []
    for global_var, func in functions.items():
        attrs = getattr(func, "attrs", None)
        symbol = attrs.get("global_symbol") if attrs is not None else None
        name = str(symbol if symbol is not None else global_var.name_hint)
        if name not in names:
            names.append(name)
    if not names:
        return None
    return names[0] if len(names) == 1 else f"{names[0]} +{len(names) - 1} more"


def _current_target() -> str | None:
    """The TVM target in scope, as ``kind arch`` (``cuda sm_90a``)."""
    from tvm.target import Target

    try:
        target = Target.current(allow_none=True)
    except Exception:
        return None
    return None if target is None else target_text(target)


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)
