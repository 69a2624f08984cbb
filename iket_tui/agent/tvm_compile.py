"""One compile of plain Apache TVM, told to the registry as events: its pass contexts and passes
(noted by :mod:`~iket_tui.agent.pass_notes`), its codegen steps, and how it ended, with what
``iket-tui repro`` needs of a failure. :mod:`~iket_tui.agent.tvm_tool` makes TVM call it.

A failing pass is left without its after-pass callback: the passes still open when the exception
leaves the compile's entry point are incomplete with that exception, innermost context first;
a context left by the exception before that (one a pass entered itself) reports its open passes
without an error, and they are held until the error is known. The failed pass's module is
captured on the failure path only. Nothing here may raise into the compiler: a failure of the
watcher is counted in the registry.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import Any, Final

from tvm import transform
from tvm.target import Target

from iket_tui.agent import capture, failures
from iket_tui.agent.compile_end import EndingCompile, incomplete, target_text
from iket_tui.agent.pass_notes import PassNotes
from iket_tui.agent.registry import Registry
from iket_tui.protocol import messages as m
from iket_tui.protocol.messages import PassTuple

COMPILER: Final = "tvm"
"""The ``compiler`` field of the ``compile_begin`` and ``compile_failure`` of a plain TVM compile."""


class TvmPassNotes(PassNotes):
    """The notes of one pass context of a compile; at the context's first pass the compile keeps
    the target and pass context in force, for a stuck pass's reproducer."""

    def __init__(self, compile: TvmCompile) -> None:
        super().__init__(compile, keep_ir=compile.registry.ir_store.limit > 0, phase_now=compile.phase_now)
        self.watcher = compile
        self.begun = False  # every context's first pass begins it

    def _begin(self, mod: Any) -> None:
        super()._begin(mod)
        self.watcher.keep_scope(self.context)


class TvmCompile(EndingCompile):
    """One plain TVM compile, seen as ``compile_begin`` ... ``compile_end`` events."""

    def __init__(
        self, registry: Registry, entry: str, mod: Any, target: Any, phase_now: Callable[[], str | None]
    ) -> None:
        super().__init__(registry)
        self.phase_now = phase_now
        """The phase of a pass starting now on the compile's thread."""
        self.target = _target_of(target)
        """The TVM target it compiles for (the one in scope when none is given), or None."""
        self.kernel = _name_of(mod)
        self.target_text = target_text(self.target) if self.target is not None else _given_text(target)
        parts = [entry, f"kernel={self.kernel}" if self.kernel else None, f"target={self.target_text or 'default'}"]
        self.label = ", ".join(part for part in parts if part)
        self._begin_ns = time.monotonic_ns()
        self._thread_id = threading.get_ident()
        self._next_context = 0
        self._failing: tuple[int, str, dict[str, Any]] | None = None  # seq, name, scope of the failed pass
        self._failed_codegen: tuple[str, dict[str, Any]] | None = None  # step, scope
        self.origin: dict[str, Any] = {}
        """Optional ``compile_begin`` fields (``messages.COMPILE_ORIGIN_FIELDS``) it is announced with."""

    # What the compile's contexts and its entry point tell it

    def announce(self, mod: Any = None) -> int:
        if self.compile_id is not None:
            return self.compile_id
        compile_id = self.registry.next_compile_id()
        begin = m.compile_begin(
            compile=compile_id,
            label=self.label,
            kernel=self.kernel,
            target=self.target_text,
            t_ns=self._begin_ns,
            **self.origin,
        )
        self.registry.emit({**begin, "compiler": COMPILER})
        self.compile_id = compile_id
        self.registry.running.began(compile_id, self._thread_id)
        return compile_id

    def new_context(self) -> TvmPassNotes:
        """The notes of a pass context entered now, on the compile's thread."""
        with self.lock:
            notes = TvmPassNotes(self)
            self.add_context(notes)
        return notes

    def context_entered(self) -> int:
        now = time.monotonic_ns()
        with self.lock:
            self.drain()  # what the contexts around this one noted came first
            context = self._next_context
            self._next_context += 1
            self.registry.emit(m.pass_context(m.PASS_CONTEXT_ENTER, compile=self.announce(), context=context, t_ns=now))
        return context

    def context_exited(self, context: int) -> None:
        msg = m.pass_context(m.PASS_CONTEXT_EXIT, compile=self.announce(), context=context, t_ns=time.monotonic_ns())
        if any(held[0] == context for held in self._unnamed_failures):
            self._held_exits.append(msg)
        else:
            self.registry.emit(msg)

    def passes_incomplete(self, context: int, passes: Sequence[PassTuple], error: BaseException | None) -> None:
        now = time.monotonic_ns()
        if self._stage is None:
            self._stage = "pass"
        if passes and self._failing is None:
            innermost = passes[-1]
            self._failing = (innermost[4], innermost[3], self._scope())
        described = failures.describe(error) if error is not None else None
        for row in passes:
            if described is None:
                self._unnamed_failures.append((context, row, now))
            else:
                self.registry.emit(incomplete(context, row, now, described))

    def callback_mismatch(self, context: int, actual: str, expected: str | None) -> None:
        self.registry.emit(
            m.callback_mismatch(
                compile=self.announce(),
                context=context,
                expected=None if expected is None else str(expected),
                got=str(actual),
                t_ns=time.monotonic_ns(),
            )
        )

    def keep_scope(self, context: int) -> None:
        """Keep the target and pass context in force in pass context ``context`` (its first pass runs now)."""
        try:
            target = Target.current(allow_none=True) or self.target
            self.registry.running.keep_scope(self.announce(), context, target, transform.PassContext.current())
        except Exception:
            self.registry.observer_errors += 1

    # Codegen

    def codegen_began(self, name: str) -> int:
        now = time.monotonic_ns()
        try:
            with self.lock:
                self.drain()
                self.registry.emit(m.codegen_begin(compile=self.announce(), t_ns=now, name=name))
        except Exception:
            self.registry.observer_errors += 1
        return now

    def codegen_ended(self, name: str, started_ns: int, error: BaseException | None) -> None:
        try:
            with self.lock:
                self.drain()
                if error is not None:
                    self._stage = "codegen"
                    if self._failed_codegen is None:
                        self._failed_codegen = (name, self._scope())
                now = time.monotonic_ns()
                self.registry.emit(
                    m.codegen_end(
                        compile=self.announce(),
                        t_ns=now,
                        duration_ns=now - started_ns,
                        ok=error is None,
                        error=failures.describe(error) if error is not None else None,
                        name=name,
                    )
                )
        except Exception:
            self.registry.observer_errors += 1

    # The end

    def failed(self, error: BaseException) -> None:
        """``error`` leaves the compile's entry point, inside its pass context: the passes it
        stopped are incomplete with it, innermost context first."""
        try:
            with self.lock:
                self.drain()
                described = failures.describe(error)
                for context, row, t_ns in self._unnamed_failures:
                    self.registry.emit(incomplete(context, row, t_ns, described))
                self._unnamed_failures.clear()
                for msg in self._held_exits:
                    self.registry.emit(msg)
                self._held_exits.clear()
                for notes in reversed(self.contexts):
                    if notes.open:
                        notes.abort(error)
        except Exception:
            self.registry.observer_errors += 1

    def _ending(self, error: BaseException | None) -> tuple[str, int | None]:
        return self.label, self._begin_ns

    def _failure_fields(self) -> dict[str, Any]:
        return {"compiler": COMPILER}

    def _captured_failure(self, compile_id: int) -> dict[str, Any] | None:
        """What was kept of the failed pass or codegen step, as ``compile_failure`` fields."""
        if self._stage == "codegen" and self._failed_codegen is not None:
            step, found = self._failed_codegen
            codegen = capture.failed_codegen(None)
            codegen["source_missing"] = f"{step} builds from TVM's IR, not from a source file: there is no source"
            return {"stage": "codegen", "seq": None, "name": step, **found, **codegen}
        if self._failing is not None:
            seq, name, found = self._failing
            module = capture.failed_pass(self.registry.ir_store, compile_id, seq)
            return {"stage": "pass", "seq": seq, "name": name, **found, **module}
        return None

    def _scope(self) -> dict[str, Any]:
        """The target and configuration in force, the compile's own target where none is in scope."""
        found = capture.scope()
        if found.get("target") is None and self.target is not None:
            with suppress(Exception):
                found["target"] = str(self.target)
        return found


def _target_of(given: Any) -> Any:
    """``given`` as a TVM ``Target`` (the one in scope when none is given), or None."""
    try:
        if given is None:
            return Target.current(allow_none=True)
        return given if isinstance(given, Target) else Target(given)
    except Exception:
        return None


def _given_text(given: Any) -> str | None:
    """A target that TVM could not read, as it was given (short)."""
    return None if given is None else str(given)[:80]


def _name_of(mod: Any) -> str | None:
    """What a compile compiles: the name its TVMScript class or function had, else its functions."""
    try:
        name = getattr(mod, "__name__", None)
        if isinstance(name, str) and name:
            return name
        functions = getattr(mod, "functions", None)
        if functions is None:  # a single function
            symbol = mod.attrs.get("global_symbol") if getattr(mod, "attrs", None) is not None else None
            return None if symbol is None else str(symbol)
        names = [str(global_var.name_hint) for global_var in functions]
        names.sort(key=lambda found: found != "main")
        if not names:
            return None
        return names[0] if len(names) == 1 else f"{names[0]} +{len(names) - 1} more"
    except Exception:
        return None
