"""Every TileLang compile, observed through ``tilelang.instrumentation`` and told to the registry.

TileLang creates one :class:`CompileWatcher` per compile session. It hands each TVM
``PassContext`` of that compile a pass instrument of its own (:class:`_PassRecorder`) whose
sequence numbers are shared across the compile's contexts, wraps codegen, and learns the
compile's real exception in ``finish``. Nothing here may raise into the compiler: a failure of
the watcher is counted in the registry and the compile goes on unobserved.

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

Between two TVM passes the compiler's thread only notes the time, the pass and (when the IR is
kept) the module; those notes become pass events in batches, in order, at the compile's next
event of another kind (a context, codegen, the end). A client's sender collects them sooner
when the compiler has been inside one pass for a while (:meth:`Registry.collect`), so a pass that
runs long is seen while it runs. One lock per compile keeps the two threads from making events
of the same compile at once.
"""

from __future__ import annotations

import functools
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Sequence
from contextlib import contextmanager, suppress
from time import monotonic_ns
from typing import Any, Concatenate, Final, ParamSpec, TypeVar

from tilelang.instrumentation import (
    PassInstrumentationTool,
    current_compile_pass_instrumentation,
    current_pass_instrument_context,
    current_pass_phase,
    register_pass_instrumentation_tool,
    unregister_pass_instrumentation_tool,
)
from tvm.ir.instrument import pass_instrument

from iket_tui.agent import capture, compiling, failures
from iket_tui.agent.ir_store import ir_store
from iket_tui.agent.registry import Registry
from iket_tui.protocol import messages as m
from iket_tui.protocol.messages import Message, PassTuple

TOOL_NAME: Final = "iket-tui"

_P = ParamSpec("_P")
_R = TypeVar("_R")
_W = TypeVar("_W", bound="CompileWatcher")

_KERNEL_IN_LABEL: Final = re.compile(r"(?:^|,)\s*kernel=([^,]+)")
_PASS_START: Final = m.PASS_START
_PASS_END: Final = m.PASS_END
DRAIN_AT: Final = 1024
"""Notes of passes a context holds before its compiler's thread turns them into events itself."""

try:  # the phase, read in one C call between two passes; TileLang's public reader otherwise
    from tilelang.instrumentation.events import _current_pass_phase

    _phase_now: Callable[[], str | None] = _current_pass_phase.get
except ImportError:  # pragma: no cover - another TileLang
    _phase_now = current_pass_phase

_Note = tuple[bool, int, Any, Any, "str | None"]
"""A pass's callback as its compiler's thread noted it: started (or finished), time, ``PassInfo``,
module (when the IR is kept), phase."""


def register(registry: Registry) -> None:
    """Watch every TileLang compile that starts from now on, and the nvcc runs of its codegen."""
    register_pass_instrumentation_tool(TOOL_NAME, lambda: CompileWatcher(registry))
    try:
        capture.watch_nvcc()
    except Exception:
        registry.observer_errors += 1


def unregister() -> None:
    """Stop watching compiles that start from now on."""
    unregister_pass_instrumentation_tool(TOOL_NAME)
    with suppress(Exception):
        capture.unwatch_nvcc()


def _never_raises(method: Callable[Concatenate[_W, _P], _R]) -> Callable[Concatenate[_W, _P], _R | None]:
    """Run a watcher callback; if it fails, count the failure and let the compile go on."""

    @functools.wraps(method)
    def guarded(self: _W, /, *args: _P.args, **kwargs: _P.kwargs) -> _R | None:
        try:
            return method(self, *args, **kwargs)
        except Exception:
            self.registry.observer_errors += 1
            return None

    return guarded


class CompileWatcher(PassInstrumentationTool):  # type: ignore[misc]
    """One TileLang compile session, seen as ``compile_begin`` ... ``compile_end`` events."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.lock = threading.RLock()
        """Held while this compile's events are made, on its compiler's thread or a sender's."""
        self._compile: int | None = None
        self._label: str | None = None
        self._first_seen_ns: int | None = None
        self._early_contexts: list[tuple[int, int]] = []
        self._next_seq = 0
        self._next_context = 0
        self._instruments: list[_PassRecorder] = []
        self._unnamed_failures: list[tuple[int, PassTuple, int]] = []  # context, start row, time
        self._held_exits: list[Message] = []
        self._stage: str | None = None
        self._finished = False
        self._failing: tuple[int, str, dict[str, Any]] | None = None  # seq, name, scope of the failed pass
        self._failed_codegen: tuple[str, dict[str, Any], capture.NvccRun | None] | None = None  # step, scope, nvcc

    # TileLang's tool interface

    @_never_raises
    def create_pass_instrument(self) -> Any:
        with self.lock:
            if self._label is None:
                self._label = current_pass_instrument_context() or _session_name()
            self._seen()
            instrument = _PassRecorder(self, keep_ir=ir_store.limit > 0)
            if not self._instruments:
                self.registry.hold_pending(self)
            self._instruments.append(instrument)
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
        try:
            with compiling.generating(self._compile):
                result = next_call()
        except BaseException as exc:
            self._codegen_ended(event, started, exc)
            raise
        self._codegen_ended(event, started, None)
        return result

    def finish(self, error: BaseException | None) -> None:
        try:
            with self.lock:
                self._finish(error)
        except Exception:
            self.registry.observer_errors += 1
        finally:
            self.registry.release_pending(self)

    def drain(self, quiet_ns: int = 0) -> None:
        """Turn the passes noted on the compiler's thread into events (:meth:`Registry.collect`):
        all of them, or with ``quiet_ns`` only once no pass began or ended for that long (the
        compiler is inside a long pass) or the oldest note is four times that old. Otherwise
        they wait for the compile's next event of another kind, which makes them events in one
        batch on the compiler's thread, where that costs least."""
        if quiet_ns and not self._waited(quiet_ns):
            return
        with self.lock:
            for instrument in self._instruments:
                instrument.drain()

    def _waited(self, quiet_ns: int) -> bool:
        """Whether some context's notes waited long enough for :meth:`drain` (read without the
        lock: the compiler's thread may be appending or draining meanwhile)."""
        now = monotonic_ns()
        for instrument in list(self._instruments):
            notes = instrument.notes
            try:
                newest, oldest = notes[-1][1], notes[0][1]
            except IndexError:
                continue
            if now - newest >= quiet_ns or now - oldest >= 4 * quiet_ns:
                return True
        return False

    def _finish(self, error: BaseException | None) -> None:
        if self._finished:
            return
        self._finished = True
        self.drain()
        if self._compile is None and self._first_seen_ns is None and error is None:
            return
        if self._label is None:
            self._label = _session_name()
        compile_id = self._begin()
        emit = self.registry.emit
        described = failures.describe(error) if error is not None else None
        for context, row, t_ns in self._unnamed_failures:
            emit(_incomplete(context, row, t_ns, described))
        self._unnamed_failures.clear()
        for msg in self._held_exits:
            emit(msg)
        self._held_exits.clear()
        captured = self._captured_failure(compile_id) if error is not None else None
        if error is not None and captured is not None:
            emit(
                m.compile_failure(
                    compile=compile_id,
                    error=described,
                    error_type=failures.type_name(error),
                    t_ns=time.monotonic_ns(),
                    **captured,
                )
            )
        now = time.monotonic_ns()
        emit(
            m.compile_end(
                compile=compile_id,
                label=self._label or "",
                t_ns=now,
                duration_ns=now - (self._first_seen_ns or now),
                ok=error is None,
                error=described,
                error_type=failures.type_name(error) if error is not None else None,
                traceback=failures.format_traceback(error) if error is not None else None,
                stage=self._stage if error is not None else None,
            )
        )
        ir_store.compile_ended(compile_id)

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
                **capture.failed_pass(ir_store, compile_id, seq),
            }
        return None

    # Pass contexts, and passes left incomplete, from each context's recorder

    @_never_raises
    def context_entered(self) -> int:
        now = time.monotonic_ns()
        with self.lock:
            self.drain()  # what the contexts around this one noted came first
            context = self._next_context
            self._next_context += 1
            if self._compile is None:
                self._seen(now)
                self._early_contexts.append((context, now))
            else:
                self.registry.emit(
                    m.pass_context(m.PASS_CONTEXT_ENTER, compile=self._compile, context=context, t_ns=now)
                )
        return context

    @_never_raises
    def context_exited(self, context: int) -> None:
        compile_id = self._begin()
        msg = m.pass_context(m.PASS_CONTEXT_EXIT, compile=compile_id, context=context, t_ns=time.monotonic_ns())
        if any(held[0] == context for held in self._unnamed_failures):
            self._held_exits.append(msg)
        else:
            self.registry.emit(msg)

    @_never_raises
    def passes_incomplete(self, context: int, passes: Sequence[PassTuple], error: BaseException | None) -> None:
        """``passes`` (their start rows, outermost first) never finished; the innermost is the one that failed."""
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
                self.registry.emit(_incomplete(context, row, now, described))

    @_never_raises
    def callback_mismatch(self, context: int, actual: str, expected: str | None) -> None:
        self.registry.emit(
            m.callback_mismatch(
                compile=self._begin(),
                context=context,
                expected=_optional_str(expected),
                got=str(actual),
                t_ns=time.monotonic_ns(),
            )
        )

    # Internals

    def _seen(self, now: int | None = None) -> None:
        if self._first_seen_ns is None:
            self._first_seen_ns = time.monotonic_ns() if now is None else now

    def _begin(self, mod: Any = None) -> int:
        """The compile id, announcing the compile (and the contexts it entered so far) the first
        time: on the compiler's thread, where the compile's target is in scope."""
        if self._compile is not None:
            return self._compile
        self._seen()
        compile_id = self.registry.next_compile_id()
        label = self._label or _session_name() or ""
        self._label = label
        self.registry.emit(
            m.compile_begin(
                compile=compile_id,
                label=label,
                kernel=_kernel_from_label(label) or _kernel_from_module(mod),
                target=_current_target(),
                t_ns=self._first_seen_ns or time.monotonic_ns(),
            )
        )
        self._compile = compile_id
        for context, t_ns in self._early_contexts:
            self.registry.emit(m.pass_context(m.PASS_CONTEXT_ENTER, compile=compile_id, context=context, t_ns=t_ns))
        self._early_contexts.clear()
        return compile_id

    @_never_raises
    def _abort_open_passes(self, error: BaseException) -> None:
        """Report the passes open in this compile as incomplete, with the exception that stopped them."""
        with self.lock:
            self.drain()
            for instrument in self._instruments:
                if instrument.open:
                    instrument.abort(error)

    @_never_raises
    def _codegen_began(self, event: Any) -> int:
        now = time.monotonic_ns()
        with self.lock:
            self.drain()
            self.registry.emit(
                m.codegen_begin(compile=self._begin(getattr(event, "mod", None)), t_ns=now, name=str(event.name))
            )
        return now

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
            compile=self._begin(),
            t_ns=now,
            duration_ns=now - started_ns if started_ns is not None else 0,
            ok=error is None,
            error=failures.describe(error) if error is not None else None,
            name=str(event.name),
        )
        self.registry.emit(msg)


@pass_instrument
class _PassRecorder:
    """The passes of one TVM ``PassContext``: noted between passes, paired and told to the
    registry as pass rows in batches.

    TVM calls ``run_before_pass`` and ``run_after_pass`` around every pass, nested passes
    included. Each runs between two TVM passes whose work has pushed this code out of the CPU's
    caches, so all it does is append a note (:data:`_Note`); the first one of a compile also
    announces the compile, while its target is in scope. :meth:`drain`, under the compile's
    lock, pairs the notes on a stack of the start rows of the passes still running, outermost
    first, and builds each pass row (the protocol's positional form, which the sender writes as
    it is, as a tuple the garbage collector soon stops tracking).
    """

    def __init__(self, watcher: CompileWatcher, *, keep_ir: bool) -> None:
        self.watcher = watcher
        self.registry = watcher.registry
        self.context = -1
        self.keep_ir = keep_ir
        """Whether the notes hold the modules (the IR store keeps them)."""
        self.begun = watcher._compile is not None
        self.notes: deque[_Note] = deque()
        """Appended on the compiler's thread; taken by :meth:`drain`, on either thread."""
        self.open: list[PassTuple] = []
        """The start row of every pass of this context still running, outermost first."""
        self._infos: list[Any] = []
        """The ``PassInfo`` of each open pass. TVM hands the same one to both callbacks of a
        pass, so the finish of a pass is paired with its start by address, without reading the
        name; holding it keeps that address from being reused meanwhile."""
        self._ir: dict[int, Any] | None = None  # this compile's passes in the IR store
        self._ir_compile: int | None = None

    def enter_pass_ctx(self) -> None:
        with self.watcher.lock:
            self.notes.clear()
            self.open.clear()
            self._infos.clear()
        context = self.watcher.context_entered()
        self.context = -1 if context is None else context

    def exit_pass_ctx(self) -> None:
        watcher = self.watcher
        with watcher.lock:
            self.drain()
            if self.open:
                self.abort(None)
            self._ir = None  # TVM may keep this instrument alive; the IR store alone decides what is held
            self._ir_compile = None
            watcher.context_exited(self.context)

    def run_before_pass(self, mod: Any, info: Any) -> None:
        try:
            if not self.begun:
                self._begin(mod)
            self.notes.append((True, monotonic_ns(), info, mod if self.keep_ir else None, _phase_now()))
        except Exception:
            self.registry.observer_errors += 1

    def run_after_pass(self, mod: Any, info: Any) -> None:
        try:
            notes = self.notes
            notes.append((False, monotonic_ns(), info, mod if self.keep_ir else None, None))
            if len(notes) >= DRAIN_AT:
                self.watcher.drain()
        except Exception:
            self.registry.observer_errors += 1

    def _begin(self, mod: Any) -> None:
        """This context's first pass: announce the compile (naming the kernel its module holds)
        if no other context did, and open its place in the IR store, which measures what a
        compile holds from its first pass on."""
        with self.watcher.lock:
            compile_id = self.watcher._begin(mod)
            if self.keep_ir:
                ir_store.passes_of(compile_id)
        self.begun = True

    def drain(self) -> None:
        """Turn the notes taken so far into pass events, in order (the caller holds the compile's lock)."""
        notes = self.notes
        while notes:
            started, t_ns, info, mod, phase = notes.popleft()
            try:
                if started:
                    self._started(t_ns, info, mod, phase)
                else:
                    self._finished(t_ns, info, mod)
            except Exception:
                self.registry.observer_errors += 1

    def _started(self, t_ns: int, info: Any, mod: Any, phase: str | None) -> None:
        watcher = self.watcher
        compile_id = watcher._compile
        if compile_id is None:
            compile_id = watcher._begin(mod)
        seq = watcher._next_seq
        watcher._next_seq = seq + 1
        open_ = self.open
        row = (
            _PASS_START,
            compile_id,
            self.context,
            str(info.name),  # a plain str: TVM's own String is one more object the GC tracks
            seq,
            len(open_),
            open_[-1][4] if open_ else None,
            phase,
            t_ns,
            None,
        )
        open_.append(row)
        self._infos.append(info)
        if compile_id != self._ir_compile:
            self._ir_compile = compile_id
            self._ir = ir_store.passes_of(compile_id)
        if self._ir is not None and mod is not None:
            self._ir[seq] = [row[3], mod, None]
        self.registry.emit_pass_start(row, compile_id, seq)

    def _finished(self, t_ns: int, info: Any, mod: Any) -> None:
        open_ = self.open
        infos = self._infos
        if not open_ or infos[-1].__chandle__() != info.__chandle__():
            name = str(info.name)
            if not open_ or open_[-1][3] != name:
                expected = open_[-1][3] if open_ else None
                self.watcher.callback_mismatch(self.context, name, expected)
                self.abort(RuntimeError(f"unmatched after-pass callback for {name!r}; expected {expected!r}"))
                return
        infos.pop()
        start = open_.pop()
        compile_id = start[1]
        seq = start[4]
        held = self._ir.get(seq) if self._ir is not None else None
        if held is not None:
            held[2] = mod
        self.registry.emit_pass_end(
            (_PASS_END, compile_id, start[2], start[3], seq, start[5], start[6], start[7], t_ns, t_ns - start[8]),
            compile_id,
            seq,
        )

    def abort(self, error: BaseException | None) -> None:
        """Report every pass of this context still running as incomplete, stopped by ``error``
        (``None``: not known here). The caller holds the compile's lock."""
        passes, self.open = self.open, []
        self._infos = []
        if passes:
            self.watcher.passes_incomplete(self.context, passes, error)


def _incomplete(context: int, start: PassTuple, t_ns: int, error: str | None) -> Message:
    """The ``pass_incomplete`` of the pass whose start row is ``start``."""
    return m.pass_incomplete(
        compile=start[1],
        context=context,
        name=start[3],
        seq=start[4],
        depth=start[5],
        parent=start[6],
        phase=start[7],
        t_ns=t_ns,
        error=error,
    )


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
    if target is None:
        return None
    try:
        arch = target.attrs.get("arch")
        return f"{target.kind.name} {arch}" if arch else str(target.kind.name)
    except Exception:
        return None


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)
