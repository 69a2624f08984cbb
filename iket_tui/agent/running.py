"""The compiles running in this process now: the thread each runs on, the target and pass
context each of its pass contexts runs in, and any abort asked of it.

A client's thread answers the questions about a stuck compile (capture its pass, abort it), but
TVM keeps the target and the pass context in thread-local state that only the compiler's thread
can read. So the compiler's thread notes them, by reference, at the first pass of each pass
context (once per context, never per pass), and a client's thread prints them when asked. The
registry holds the process's table (:attr:`~iket_tui.agent.registry.Registry.running`), and the
signal that interrupts the main thread while a compile runs there (:mod:`~iket_tui.agent.interrupt`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from iket_tui.agent.interrupt import MainThreadInterrupt

AbortRoute = Literal["exception", "signal", "processes"]
"""How an abort reaches a compile's thread (see :mod:`~iket_tui.agent.abort`)."""
BY_EXCEPTION: Final = "exception"
"""Raised asynchronously in the thread, at its next Python bytecode."""
BY_SIGNAL: Final = "signal"
"""The main thread: a signal interrupts its wait, and the handler raises."""
BY_ENDING: Final = "processes"
"""A codegen step waiting on its compiler's processes: they are ended, and the step's failure
becomes the abort."""


@dataclass
class Abort:
    """An abort asked of a running compile: the exception's message, how it reaches the compiling
    thread (:attr:`via`), and whether that thread has raised it yet."""

    message: str
    """``aborted by iket-tui after N s in NAME``: the message of the exception the compile raises."""
    name: str
    """The pass (or codegen step) the compile was in when the abort was asked."""
    seq: int | None
    """The pass's sequence number; None for a codegen step."""
    running_ns: int
    """How long that pass had been running when the abort was asked."""
    pass_source: dict[str, Any] | None = None
    """The innermost Python frame of the pass that is the user's own code (``file``, ``line``,
    ``function``, ``module``), if any (see :func:`~iket_tui.agent.stuck.pass_source`)."""
    raised: threading.Event = field(default_factory=threading.Event)
    """Set on the compiling thread when the exception is made there, i.e. when it is raised."""
    error: str | None = None
    """The compile's error (``Type: message``) once it ended with the exception."""
    via: AbortRoute = BY_EXCEPTION
    """How it reaches the compile's thread."""


@dataclass
class RunningCompile:
    """One compile between its announcement and its end."""

    compile_id: int
    thread_id: int
    """The ident of the thread that runs it (``threading.get_ident()`` there)."""
    scopes: dict[int, tuple[Any, Any]] = field(default_factory=dict)
    """Per pass context number: the TVM target (or None) and the ``PassContext`` in force at its first pass."""
    abort: Abort | None = None
    closing: bool = False
    """It is ending: no abort is asked of it any more, and its signal handled from now on raises nothing."""


class RunningCompiles:
    """The compiles running now, by id; written by compiler threads, read by clients' threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._compiles: dict[int, RunningCompile] = {}
        self._ended = threading.Condition(self._lock)
        self.aborting = 0
        """How many running compiles have an abort asked of them: read without the lock before
        every pass, which looks further only when it is not 0."""
        self.interrupt = MainThreadInterrupt()
        """The signal that interrupts a wait of the main thread while a compile runs there."""

    def began(self, compile_id: int, thread_id: int) -> None:
        """Compile ``compile_id`` runs on thread ``thread_id`` from now on."""
        with self._lock:
            if compile_id not in self._compiles:
                self._compiles[compile_id] = RunningCompile(compile_id, thread_id)

    def keep_scope(self, compile_id: int, context: int, target: Any, pass_context: Any) -> None:
        """The target and pass context in force in pass context ``context`` of the compile."""
        with self._lock:
            running = self._compiles.get(compile_id)
            if running is not None:
                running.scopes[context] = (target, pass_context)

    def arm(self, compile_id: int, abort: Abort, raise_in: Callable[[int], bool]) -> bool:
        """Ask for ``abort`` of compile ``compile_id``: note it, then ``raise_in`` its thread, both
        while the compile cannot end meanwhile; whether it was still running."""
        with self._lock:
            running = self._compiles.get(compile_id)
            if running is None or running.closing:
                return False
            if running.abort is None:
                self.aborting += 1
            running.abort = abort
            return raise_in(running.thread_id)

    def closing(self, compile_id: int) -> None:
        """Compile ``compile_id`` is ending: an abort asked of it that has not reached it yet by its
        signal never will (it ends as it would have; the answer says so), and none is asked any more."""
        with self._lock:
            running = self._compiles.get(compile_id)
            if running is not None:
                running.closing = True

    def ended(self, compile_id: int, error: str | None) -> Abort | None:
        """The compile ended (with ``error``, or none); the abort asked of it, if any, learns how."""
        with self._lock:
            running = self._compiles.pop(compile_id, None)
            abort = None if running is None else running.abort
            if abort is not None:
                abort.error = error
                self.aborting -= 1
            self._ended.notify_all()
        return abort

    def get(self, compile_id: int) -> RunningCompile | None:
        with self._lock:
            return self._compiles.get(compile_id)

    def abort_of(self, compile_id: int) -> Abort | None:
        """The abort asked of compile ``compile_id``, if it runs and one was asked."""
        with self._lock:
            running = self._compiles.get(compile_id)
            return None if running is None else running.abort

    def on_thread(self, thread_id: int) -> list[RunningCompile]:
        """The compiles running on thread ``thread_id``, oldest first (nested compiles share a thread)."""
        with self._lock:
            return [running for running in self._compiles.values() if running.thread_id == thread_id]

    def all(self) -> list[RunningCompile]:
        """Every compile running now, oldest first."""
        with self._lock:
            return list(self._compiles.values())

    def wait_ended(self, compile_id: int, timeout_s: float) -> bool:
        """Wait until compile ``compile_id`` is no longer running, at most ``timeout_s``; whether it ended."""
        with self._lock:
            return self._ended.wait_for(lambda: compile_id not in self._compiles, timeout_s)

    def forget(self) -> None:
        """Nothing runs (in a child made by ``fork``: the parent's compiles are not its own)."""
        self._lock = threading.Lock()
        self._ended = threading.Condition(self._lock)
        self._compiles = {}
        self.aborting = 0
