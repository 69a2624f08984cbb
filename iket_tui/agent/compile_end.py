"""How a watched compile ends, whichever compiler it is (TileLang's or plain TVM's): passes that
never finished and context exits held back are told, the failure capture and the
``compile_end``, and the compile is let go of (its notes, its running entry, a pending abort).
"""

from __future__ import annotations

import time
from abc import abstractmethod
from typing import Any

from iket_tui.agent import abort, failures
from iket_tui.agent.pass_notes import NotingCompile
from iket_tui.agent.registry import Registry
from iket_tui.protocol import messages as m
from iket_tui.protocol.messages import Message, PassTuple


class EndingCompile(NotingCompile):
    """A :class:`NotingCompile` that reports its own end through :meth:`finish`; a subclass says
    what its end is called and when it began (:meth:`_ending`) and what it captured of a failure
    (:meth:`_captured_failure`)."""

    def __init__(self, registry: Registry) -> None:
        super().__init__(registry)
        self._unnamed_failures: list[tuple[int, PassTuple, int]] = []  # context, start row, time
        self._held_exits: list[Message] = []
        self._stage: str | None = None
        self._finished = False
        self._interruptible = False

    def finish(self, error: BaseException | None) -> None:
        """The compile's entry point returned (or raised ``error``): say how the compile ended,
        once. Never raises: a failure is counted in the registry."""
        if self.compile_id is not None:
            self.registry.running.closing(self.compile_id)  # too late for an abort's signal to raise
        with self.registry.ending():
            try:
                with self.lock:
                    self._finish(error)
            except Exception:
                self.registry.observer_errors += 1
            finally:
                self.release_notes()
                if self.compile_id is not None:
                    ended = self.registry.running.ended(self.compile_id, failures.describe(error) if error else None)
                    abort.forget_unraised(ended)
                if self._interruptible:
                    self._interruptible = False
                    self.registry.running.interrupt.leave()

    def interruptible(self) -> None:
        """The compile starts, on its compiler's thread: on the main thread, an abort may interrupt
        what the thread waits in until it ends (see :mod:`~iket_tui.agent.interrupt`). Never raises."""
        try:
            self._interruptible = self.registry.running.interrupt.enter(abort.on_signal)
        except Exception:
            self.registry.observer_errors += 1

    @abstractmethod
    def _ending(self, error: BaseException | None) -> tuple[str, int | None] | None:
        """The compile's label and when it began (``None``: not known), or ``None`` when its end
        is not worth a message (nothing of it was ever seen)."""

    @abstractmethod
    def _captured_failure(self, compile_id: int) -> dict[str, Any] | None:
        """What was kept of the failed pass or codegen step, as ``compile_failure`` fields."""

    def _failure_fields(self) -> dict[str, Any]:
        """Fields a subclass adds to every ``compile_failure`` it sends."""
        return {}

    def _finish(self, error: BaseException | None) -> None:
        if self._finished:
            return
        self._finished = True
        self.drain()
        ending = self._ending(error)
        if ending is None:
            return
        label, begin_ns = ending
        compile_id = self.announce()
        emit = self.registry.emit
        described = failures.describe(error) if error is not None else None
        for context, row, t_ns in self._unnamed_failures:
            emit(incomplete(context, row, t_ns, described))
        self._unnamed_failures.clear()
        for msg in self._held_exits:
            emit(msg)
        self._held_exits.clear()
        captured = self._captured_failure(compile_id) if error is not None else None
        if error is not None and captured is not None:
            failure = m.compile_failure(
                compile=compile_id,
                error=described,
                error_type=failures.type_name(error),
                t_ns=time.monotonic_ns(),
                **captured,
            )
            emit({**failure, **self._failure_fields(), **self._aborted(compile_id, error)})
        now = time.monotonic_ns()
        emit(
            m.compile_end(
                compile=compile_id,
                label=label,
                t_ns=now,
                duration_ns=now - (begin_ns or now),
                ok=error is None,
                error=described,
                error_type=failures.type_name(error) if error is not None else None,
                traceback=failures.format_traceback(error) if error is not None else None,
                stage=self._stage if error is not None else None,
            )
        )
        self.registry.ir_store.compile_ended(compile_id)

    def _aborted(self, compile_id: int, error: BaseException) -> dict[str, Any]:
        """What a ``compile_failure`` adds for a compile aborted from outside: how long its pass
        had been running, and the pass's own source when it is the user's (see docs/protocol.md)."""
        running = self.registry.running.get(compile_id)
        asked = running.abort if running is not None else None
        if asked is None or not isinstance(error, abort.CompileAborted):
            return {}
        return {"aborted_after_ns": asked.running_ns, "pass_source": asked.pass_source}


def incomplete(context: int, start: PassTuple, t_ns: int, error: str | None) -> Message:
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


def target_text(target: Any) -> str | None:
    """A TVM target as ``kind arch`` (``cuda sm_90a``), or ``None`` if it cannot be read."""
    try:
        arch = target.attrs.get("arch")
        return f"{target.kind.name} {arch}" if arch else str(target.kind.name)
    except Exception:
        return None
