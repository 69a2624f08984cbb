"""Answers to what clients ask the agent for, computed on the client's own reader thread.

``ir``: the TVMScript of the module before or after one pass of a recent compile (see
:mod:`iket_tui.agent.ir_store`), printed here, on the client's thread, not the compiler's.

``stacks``: the Python stack of every thread of this process, as ``sys._current_frames`` sees
it right now (a thread inside a C++ pass shows the Python frames that called into it). The
agent's own threads are marked, so a client can leave them out. The processes that running
codegen steps run (nvcc, ptxas, ...) come with them, since a compile stuck there shows no
stack of its own (see :mod:`iket_tui.agent.compiler_processes`), and the working directory,
against which a client shows the program's own files.

``stuck``: what a reproducer of a hang needs, from the running pass of a compile (see
:mod:`iket_tui.agent.stuck`). ``abort``: make a running compile fail with ``CompileAborted`` (see
:mod:`iket_tui.agent.abort`); it waits up to a few seconds to say what came of it, on this
client's thread.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

from iket_tui.agent import abort, stuck
from iket_tui.agent.ir_store import IRStore, IRUnavailable
from iket_tui.agent.registry import Registry, registry
from iket_tui.protocol import messages as m
from iket_tui.protocol.messages import Message


def answer(msg: Message, ir_store: IRStore, on: Registry | None = None) -> Message:
    """The response to one ``request`` message; ``ir`` requests are answered from ``ir_store``,
    ``stuck`` and ``abort`` requests from the running compiles of ``on`` (the process's registry
    by default)."""
    request_id = msg.get("id")
    request_id = request_id if type(request_id) is int else 0
    what = msg.get("what")
    now = time.monotonic_ns()
    if what == m.WHAT_STACKS:
        processes = (on if on is not None else registry).compiler_processes.running()
        return m.response(
            id=request_id, what=what, t_ns=now, ok=True, threads=python_stacks(), processes=processes, cwd=_cwd()
        )
    if what == m.WHAT_IR:
        return _ir(msg, ir_store, request_id, now)
    if what in (m.WHAT_STUCK, m.WHAT_ABORT):
        return _about_running(msg, on if on is not None else registry, request_id, now)
    return m.response(
        id=request_id, what=str(what), t_ns=now, ok=False, error=f"this agent cannot answer {what!r} requests"
    )


def _cwd() -> str | None:
    """This process's working directory (``None`` once it was removed): a client shows the
    program's own files relative to it."""
    try:
        return os.getcwd()
    except OSError:
        return None


def python_stacks() -> list[dict[str, Any]]:
    """Every thread's stack, the main thread first and the agent's own threads last."""
    threads = {thread.ident: thread for thread in threading.enumerate()}
    main = threading.main_thread().ident
    out = []
    for ident, frame in sys._current_frames().items():
        thread = threads.get(ident)
        name = thread.name if thread is not None else f"thread {ident}"
        cut, frames = stuck.frame_dicts(frame)
        out.append(
            {
                "id": ident,
                "name": name,
                "main": ident == main,
                "daemon": bool(thread is not None and thread.daemon),
                "agent": name.startswith("iket-tui"),
                "cut": cut,
                "frames": frames,
            }
        )
    out.sort(key=lambda thread: (not thread["main"], thread["agent"], thread["name"]))
    return out


def _about_running(msg: Message, on: Registry, request_id: int, now: int) -> Message:
    """``stuck`` (``compile`` and ``seq`` optional) or ``abort`` (``compile`` optional)."""
    what = str(msg.get("what"))
    compile_id, seq = msg.get("compile"), msg.get("seq")
    if any(value is not None and type(value) is not int for value in (compile_id, seq)):
        error = f"a {what} request names a compile and a pass by their numbers, or neither"
        return m.response(id=request_id, what=what, t_ns=now, ok=False, error=error)
    try:
        fields = stuck.capture_stuck(on, compile_id, seq) if what == m.WHAT_STUCK else abort.abort(on, compile_id)
    except stuck.NothingRunning as exc:
        return m.response(id=request_id, what=what, t_ns=now, ok=False, error=str(exc))
    return m.response(id=request_id, what=what, t_ns=time.monotonic_ns(), ok=True, **fields)


def _ir(msg: Message, ir_store: IRStore, request_id: int, now: int) -> Message:
    """``which``: ``before``, ``after`` (field ``text``) or ``both`` (fields ``before`` and ``after``)."""
    compile_id, seq, which = msg.get("compile"), msg.get("seq"), msg.get("which")
    if type(compile_id) is not int or type(seq) is not int or which not in ("before", "after", "both"):
        error = "an ir request names a compile, a pass, and before, after or both"
        return m.response(id=request_id, what=m.WHAT_IR, t_ns=now, ok=False, error=error)
    try:
        if which == "both":
            name, before = ir_store.script(compile_id, seq, "before")
            texts: dict[str, str | None] = {"before": before, "after": None, "after_missing": None}
            try:
                texts["after"] = ir_store.script(compile_id, seq, "after")[1]
            except IRUnavailable as exc:  # a pass still running: what it was given is still worth seeing
                texts["after_missing"] = str(exc)
        else:
            name, text = ir_store.script(compile_id, seq, which)
            texts = {"text": text}
    except IRUnavailable as exc:
        return m.response(id=request_id, what=m.WHAT_IR, t_ns=now, ok=False, error=str(exc))
    done = time.monotonic_ns()
    return m.response(
        id=request_id, what=m.WHAT_IR, t_ns=done, ok=True, compile=compile_id, seq=seq, which=which, name=name, **texts
    )
