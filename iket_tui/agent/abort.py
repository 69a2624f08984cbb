"""Aborting a running compile from outside (``abort`` requests): the compile fails with
:class:`CompileAborted`, as a failing compile does (its passes incomplete, the error said, the
failure captured for ``iket-tui repro``), and the program goes on and may catch it, as it
catches any failed compile's exception.

The abort reaches the compile's thread in one of three ways:

- In a codegen step waiting on its compiler's processes (nvcc, and under it cicc, ptxas, the
  host compiler), those processes are ended (:mod:`~iket_tui.agent.waited_processes`): the step
  fails with what the compiler printed, and that failure becomes :class:`CompileAborted`, its
  message the compiler's with a line saying the abort ended it.
- On the main thread, a signal of the agent's (:mod:`~iket_tui.agent.interrupt`) interrupts
  whatever it waits in (a lock, an event, ``time.sleep``, ``select``, ``subprocess``), and its
  handler raises the exception; a thread running Python takes it at its next bytecode.
- On another thread, Python raises it (``PyThreadState_SetAsyncExc``) when the thread next runs
  Python bytecode. A thread inside native code (a C++ pass, a blocking call) runs none until the
  call returns, and no signal handler runs there: if the call never returns, nothing inside the
  process can stop it. The answer says where the thread waits, and names the child processes it
  waits on, whose end would let it go on.

Code on the compile's stack may catch the exception and go on: the abort is then raised again
as the compile starts its next pass or ends a codegen step, until the compile ends. The answer
says what came of it: the compile failed, the exception was raised and the compile is still
unwinding, or the thread is still inside native code, where the exception waits for it. Ending
the process is left to the user.

This module imports neither TVM nor TileLang: :class:`CompileAborted` is importable from
``iket_tui.agent`` in any program, and is made known to TVM's FFI (so that it crosses C++
passes as itself) when the agent starts watching TileLang.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
from types import FrameType
from typing import Any, Final

from iket_tui.agent import failures, waited_processes
from iket_tui.agent.registry import Registry, registry
from iket_tui.agent.running import BY_ENDING, BY_EXCEPTION, BY_SIGNAL, Abort, AbortRoute, RunningCompiles
from iket_tui.agent.stuck import NothingRunning, Running, pass_source, running_now
from iket_tui.agent.waited_processes import ChildProcess
from iket_tui.durations import duration
from iket_tui.protocol import messages as m

RAISE_WAIT_S: Final = 1.0
"""How long an abort waits for the compiling thread to raise the exception before it says the
thread is inside native code."""
END_WAIT_S: Final = 10.0
"""How long an abort waits, once the exception is raised, for the compile to end."""

_SET_ASYNC_EXC: Final = ("PyThreadState_SetAsyncExc", ctypes.pythonapi)

FFI_NAME: Final = "CompileAborted"
"""The name TVM's FFI carries the exception under through C++."""


class CompileAborted(Exception):
    """A compile aborted from outside by ``iket-tui abort`` (or the UI's abort key).

    Raised in the thread that runs the compile; the compile fails with it and it reaches the
    program's call to ``tilelang.compile`` or ``tilelang.lower``, where the program may catch it
    and go on. It is an ``Exception``, as a failed compile's is, so a program that survives a
    failed compile (an autotuner skipping a configuration) survives an abort. Its message says
    how long the compile had been in which pass: ``aborted by iket-tui after 12 s in
    tl.LayoutInference``; for a compile whose compiler's processes the abort ended, what the
    compiler printed, then that line.
    """

    def __init__(self, *args: object) -> None:
        if not args:  # raised asynchronously: Python makes it without arguments, in the aborted thread
            args = (_raised_here(),)
        super().__init__(*args)


def register_with_tvm() -> None:
    """Let :class:`CompileAborted` cross TVM's C++ as itself (it would become a ``RuntimeError``)."""
    import tvm_ffi

    tvm_ffi.register_error(FFI_NAME, CompileAborted)


def abort(registry: Registry, compile_id: int | None = None) -> dict[str, Any]:
    """Make compile ``compile_id`` (by default the running compile whose pass has run longest)
    fail with :class:`CompileAborted`, wait a little to see what came of it, and return the fields
    of the ``ok`` answer (:data:`~iket_tui.protocol.messages.ABORT_FIELDS`). Raises
    :class:`~iket_tui.agent.stuck.NothingRunning` when no such compile runs."""
    found = running_now(registry, compile_id)
    running = found.compile
    compile_id = running.compile_id
    frame = sys._current_frames().get(running.thread_id)
    before = _position(frame)
    children = waited_processes.waited_on(frame)
    main = running.thread_id == threading.main_thread().ident
    pending = running.abort
    ended: list[tuple[ChildProcess, str]] = []
    if pending is None or pending.raised.is_set():
        via = _route(found, children, main, registry.running)
        message = f"aborted by iket-tui after {duration(found.running_ns)} in {found.name}"
        if via == BY_ENDING:
            message += f": ended the compiler's processes it waited on, {waited_processes.named(children)}"
        pending = Abort(
            message=message,
            name=found.name,
            seq=found.seq,
            running_ns=found.running_ns,
            pass_source=pass_source(frame),
            via=via,
        )
        if not registry.running.arm(compile_id, pending, lambda thread_id: _deliver(registry.running, via, thread_id)):
            raise NothingRunning(f"compile {compile_id} is not running (it ended)")
    if pending.via == BY_ENDING and children:
        ended = waited_processes.end(children)
    state = _outcome(registry, compile_id, pending, before)
    frame = sys._current_frames().get(running.thread_id) if state in (m.ABORT_RAISED, m.ABORT_NATIVE) else None
    left = waited_processes.with_descendants([child.pid for child in children if child.ppid == os.getpid()])
    return {
        "compile": compile_id,
        "name": pending.name,
        "seq": pending.seq,
        "running_ns": pending.running_ns,
        "message": pending.message,
        "state": state,
        "compile_error": pending.error,
        "where": _where(frame),
        "pid": os.getpid(),
        "thread": _thread_name(running.thread_id),
        "main_thread": main,
        "via": pending.via,
        "children": [child.as_dict() for child in left],
        "ended": [{**process.as_dict(), "signal": sent} for process, sent in ended],
    }


def _route(found: Running, children: list[ChildProcess], main: bool, running: RunningCompiles) -> AbortRoute:
    """How the abort reaches the compile: its compiler's processes ended, a signal, or an exception."""
    if not found.is_pass and children:
        return BY_ENDING
    if main and running.interrupt.signum is not None:
        return BY_SIGNAL
    return BY_EXCEPTION


def _deliver(running: RunningCompiles, via: AbortRoute, thread_id: int) -> bool:
    """Start the abort on its way to thread ``thread_id`` (the processes are ended after); whether it runs."""
    if via == BY_ENDING:
        return True
    if via == BY_SIGNAL and running.interrupt.interrupt():
        return True
    return _raise_in(thread_id)


def _outcome(registry: Registry, compile_id: int, pending: Abort, before: tuple[int, int] | None) -> str:
    """What came of the exception: the compile ended, it was raised, or the thread runs no Python."""
    running = registry.running
    deadline = time.monotonic() + RAISE_WAIT_S
    while time.monotonic() < deadline:
        if pending.raised.wait(0.02) or running.get(compile_id) is None:
            break
    if running.get(compile_id) is not None and pending.raised.is_set():
        running.wait_ended(compile_id, END_WAIT_S)
    if running.get(compile_id) is None:
        return m.ABORT_ABORTED if pending.raised.is_set() else m.ABORT_ENDED
    if pending.raised.is_set():
        return m.ABORT_RAISED
    thread = running.get(compile_id)
    now = _position(sys._current_frames().get(thread.thread_id)) if thread is not None else None
    return m.ABORT_NATIVE if now == before else m.ABORT_RAISED


def on_signal(signum: int, frame: FrameType | None) -> None:
    """The handler of the agent's signal on the main thread: raise the abort asked of a compile
    running there (nothing when there is none: the signal came after the compile ended)."""
    for running in reversed(registry.running.on_thread(threading.get_ident())):
        pending = running.abort
        if pending is not None and pending.via == BY_SIGNAL and not pending.raised.is_set() and not running.closing:
            pending.raised.set()
            raise CompileAborted(pending.message)


def raise_again(running: RunningCompiles, compile_id: int | None) -> None:
    """Compile ``compile_id`` starts a pass, or has ended a codegen step: if an abort was asked of
    it and the compile goes on (code on its stack caught the exception, or its compiler's
    processes were ended and the step did not fail), raise the abort (again)."""
    pending = running.abort_of(compile_id) if compile_id is not None else None
    if pending is not None and (pending.raised.is_set() or pending.via == BY_ENDING):
        pending.raised.set()
        raise CompileAborted(pending.message)


def instead_of(running: RunningCompiles, compile_id: int | None, error: BaseException) -> CompileAborted | None:
    """The exception a codegen step fails with once an abort ended its compiler's processes:
    :class:`CompileAborted` holding what the compiler said (the message of ``error``, the step's
    own failure) and the abort's line. None when no such abort was asked of compile ``compile_id``."""
    pending = running.abort_of(compile_id) if compile_id is not None else None
    if pending is None or pending.via != BY_ENDING or isinstance(error, CompileAborted):
        return None
    pending.raised.set()
    said = failures.compiler_message(error).rstrip("\n")
    return CompileAborted(f"{said}\n{pending.message}" if said else pending.message)


def _thread_name(thread_id: int) -> str:
    """The name of thread ``thread_id``, as ``threading`` knows it."""
    for thread in threading.enumerate():
        if thread.ident == thread_id:
            return thread.name
    return f"thread {thread_id}"


def _raise_in(thread_id: int) -> bool:
    """Ask Python to raise :class:`CompileAborted` in thread ``thread_id``; whether the thread exists."""
    set_async = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.py_object)(_SET_ASYNC_EXC)
    return bool(set_async(thread_id, CompileAborted) == 1)


def forget_unraised(abort: Abort | None) -> None:
    """A compile ended on this thread before an abort asked of it was raised: drop the exception
    still pending for this thread, so that it does not reach the program's code after the compile."""
    if abort is None or abort.raised.is_set() or abort.via == BY_ENDING:
        return
    clear = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)(_SET_ASYNC_EXC)
    clear(threading.get_ident(), None)  # a null exception clears the pending one


def _raised_here() -> str:
    """The message of the abort asked of a compile running on this thread (now raised), and note that it was."""
    for running in reversed(registry.running.on_thread(threading.get_ident())):
        abort = running.abort
        if abort is not None and abort.via != BY_ENDING and not abort.raised.is_set():  # a signal may fall back
            abort.raised.set()
            return abort.message
    return "aborted by iket-tui"


def _position(frame: Any) -> tuple[int, int] | None:
    """Where a thread is in Python: its innermost frame and the instruction in it."""
    return None if frame is None else (id(frame), frame.f_lasti)


def _where(frame: Any) -> str | None:
    """``FILE:LINE in FUNCTION: CODE`` of a thread's innermost Python frame."""
    if frame is None:
        return None
    import linecache

    code = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    where = f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"
    return f"{where}: {code}" if code else where
