"""Aborting a running compile from outside (``abort`` requests): the agent raises
:class:`CompileAborted` in the thread that runs the compile, so the compile fails as a failing
compile does (its passes incomplete, the error said, the failure captured for ``iket-tui
repro``) and the program goes on and may catch it.

Python raises an exception asked of another thread (``PyThreadState_SetAsyncExc``) when that
thread next runs Python bytecode. A thread inside native code (a C++ pass, a blocking system
call) runs none until the call returns; if it never does, nothing inside the process can stop
it. The answer says which happened: the compile failed, the exception was raised and the
compile is still unwinding, or the thread is still inside native code, where the exception
waits for it. Ending the process is left to the user.

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
from typing import Any, Final

from iket_tui.agent.registry import Registry, registry
from iket_tui.agent.running import Abort
from iket_tui.agent.stuck import NothingRunning, pass_source, running_now
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


class CompileAborted(BaseException):
    """A compile aborted from outside by ``iket-tui abort`` (or the UI's abort key).

    Raised in the thread that runs the compile, at its next Python bytecode; the compile fails
    with it and it reaches the program's call to ``tilelang.compile`` or ``tilelang.lower``,
    where the program may catch it and go on. Like ``KeyboardInterrupt`` it derives from
    ``BaseException``, so that no ``except Exception`` on the way (TileLang's, TVM's or the
    agent's own) swallows it; catch it by name. Its message says how long the compile had been
    in which pass: ``aborted by iket-tui after 12 s in tl.LayoutInference``.
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
    """Raise :class:`CompileAborted` in the thread of ``compile_id`` (by default the running compile
    whose pass has run longest), wait a little to see what came of it, and return the fields of
    the ``ok`` answer (:data:`~iket_tui.protocol.messages.ABORT_FIELDS`). Raises
    :class:`~iket_tui.agent.stuck.NothingRunning` when no such compile runs."""
    found = running_now(registry, compile_id)
    running = found.compile
    compile_id = running.compile_id
    frame = sys._current_frames().get(running.thread_id)
    before = _position(frame)
    pending = running.abort
    if pending is None or pending.raised.is_set():
        pending = Abort(
            message=f"aborted by iket-tui after {duration(found.running_ns)} in {found.name}",
            name=found.name,
            seq=found.seq,
            running_ns=found.running_ns,
            pass_source=pass_source(frame),
        )
        if not registry.running.arm(compile_id, pending, _raise_in):
            raise NothingRunning(f"compile {compile_id} is not running (it ended)")
    state = _outcome(registry, compile_id, pending, before)
    frame = sys._current_frames().get(running.thread_id) if state in (m.ABORT_RAISED, m.ABORT_NATIVE) else None
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
    }


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


def _raise_in(thread_id: int) -> bool:
    """Ask Python to raise :class:`CompileAborted` in thread ``thread_id``; whether the thread exists."""
    set_async = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.py_object)(_SET_ASYNC_EXC)
    return bool(set_async(thread_id, CompileAborted) == 1)


def forget_unraised(abort: Abort | None) -> None:
    """A compile ended on this thread before an abort asked of it was raised: drop the exception
    still pending for this thread, so that it does not reach the program's code after the compile."""
    if abort is None or abort.raised.is_set():
        return
    clear = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)(_SET_ASYNC_EXC)
    clear(threading.get_ident(), None)  # a null exception clears the pending one


def _raised_here() -> str:
    """The message of the abort asked of a compile running on this thread (now raised), and note that it was."""
    for running in reversed(registry.running.on_thread(threading.get_ident())):
        abort = running.abort
        if abort is not None and not abort.raised.is_set():
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
