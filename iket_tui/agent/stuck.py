"""What a reproducer of a hang needs, taken from a compile that is still running: the module
its running pass was given, the pass and its place in the pipeline, the target and pass-context
configuration in force, and where the compiling thread is (``stuck`` requests).

Everything is read on the client's thread: the IR store already holds the module a running
pass was given, the running-compile table holds the target and pass context by reference, and
``sys._current_frames`` shows the compiling thread's Python stack. The compiler's thread does
nothing more for it.

A pass whose Python code is the user's own (a ``tvm.transform.module_pass`` in their program)
cannot be rebuilt from its name elsewhere: the frame TVM's FFI callback called into, the pass
function itself, names its file, so that a reproducer can load it from there. Where the pass is
blocked further in (a lock of an installed library, a helper in another file) does not matter.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import time
import traceback
from dataclasses import dataclass
from types import FrameType
from typing import Any, Final

from iket_tui.agent import capture
from iket_tui.agent.pass_maker import made_by
from iket_tui.agent.registry import Registry
from iket_tui.agent.running import RunningCompile
from iket_tui.protocol import messages as m

MAX_FRAMES: Final = 200
"""Frames kept per thread, innermost first (a runaway recursion is cut, and says so)."""

_COMPILER_PACKAGES: Final = ("tvm", "tvm_ffi", "tilelang")
_AGENT_DIR: Final = os.path.dirname(os.path.abspath(__file__))
_INSTALLED_DIRS: Final = frozenset({"site-packages", "dist-packages"})
"""Where installed packages live, whatever the prefix: their code is not the user's."""


class NothingRunning(Exception):
    """No compile, or not the one asked, is running a pass or codegen step now; the message says so."""


@dataclass(frozen=True)
class Running:
    """The innermost pass or codegen step a running compile is in now."""

    compile: RunningCompile
    start: m.Message
    """Its ``pass_start`` (or ``codegen_begin``) as a message."""
    running_ns: int

    @property
    def is_pass(self) -> bool:
        return self.start.get("type") == m.PASS_START

    @property
    def name(self) -> str:
        return str(self.start.get("name") or "codegen")

    @property
    def seq(self) -> int | None:
        seq = self.start.get("seq")
        return seq if type(seq) is int else None


def running_now(registry: Registry, compile_id: int | None = None, seq: int | None = None) -> Running:
    """The pass (or codegen step) of ``compile_id`` running now, the innermost one unless ``seq``
    names another; by default that of the running compile whose innermost pass has run longest.
    Raises :class:`NothingRunning`."""
    registry.held_notes.collect()  # passes noted but not yet told are running too
    now = time.monotonic_ns()
    if compile_id is not None:
        running = registry.running.get(compile_id)
        if running is None:
            raise NothingRunning(f"compile {compile_id} is not running (it ended, or was never seen)")
        compiles = [running]
    else:
        compiles = registry.running.all()
        if not compiles:
            raise NothingRunning(f"no compile is running in pid {os.getpid()} now")
    found: list[Running] = []
    for running in compiles:
        opened = [m.as_message(item) for item in registry.open_in(running.compile_id)]
        if seq is not None:
            chosen = [msg for msg in opened if msg.get("type") == m.PASS_START and msg.get("seq") == seq]
            if not chosen:
                raise NothingRunning(f"pass {seq} of compile {running.compile_id} is not running")
        else:
            passes = [msg for msg in opened if msg.get("type") == m.PASS_START]
            chosen = [max(passes, key=lambda msg: int(msg["seq"]))] if passes else opened[-1:]
        for start in chosen:
            found.append(Running(running, start, max(0, now - int(start.get("t_ns") or now))))
    if not found:
        which = f"compile {compile_id}" if compile_id is not None else "no running compile"
        raise NothingRunning(f"{which} runs no pass or codegen step right now (it is between two)")
    return max(found, key=lambda item: item.running_ns)


def capture_stuck(registry: Registry, compile_id: int | None = None, seq: int | None = None) -> dict[str, Any]:
    """The fields of an ``ok`` answer to a ``stuck`` request (:data:`~iket_tui.protocol.messages.STUCK_FIELDS`).
    Raises :class:`NothingRunning` when there is no running pass to capture."""
    found = running_now(registry, compile_id, seq)
    compile_id = found.compile.compile_id
    if not found.is_pass:
        raise NothingRunning(
            f"compile {compile_id} is in codegen ({found.name}), not in a pass: there is no module to capture"
        )
    start = found.start
    seq = found.seq
    assert seq is not None
    context = start.get("context")
    target, pass_context = found.compile.scopes.get(context if type(context) is int else -1, (None, None))
    names = registry.ir_store.names(compile_id)
    parent = start.get("parent")
    begin = registry.compile_begin_of(compile_id) or {}
    frame = sys._current_frames().get(found.compile.thread_id)
    fields: dict[str, Any] = {
        "compile": compile_id,
        "seq": seq,
        "name": found.name,
        "context": context,
        "depth": start.get("depth"),
        "parent": parent,
        "parent_name": names.get(parent) if type(parent) is int else None,
        "phase": start.get("phase"),
        "pipeline": [names[number] for number in sorted(names) if number <= seq] if names else None,
        "kernel": begin.get("kernel"),
        "label": begin.get("label"),
        "running_ns": found.running_ns,
        **capture.scope_of(target, pass_context),
        **capture.failed_pass(registry.ir_store, compile_id, seq),
        "pass_source": pass_source(frame),
        "pid": os.getpid(),
        "frames": frame_dicts(frame)[1] if frame is not None else [],
    }
    return fields


def frame_dicts(frame: FrameType | None) -> tuple[int, list[dict[str, Any]]]:
    """A thread's stack from its innermost ``frame``, outermost first: how many outer frames
    were cut beyond :data:`MAX_FRAMES`, and each frame's file, line, function and code."""
    if frame is None:
        return 0, []
    summary = traceback.extract_stack(frame)
    cut = max(0, len(summary) - MAX_FRAMES)
    return cut, [
        {"file": f.filename, "line": f.lineno or 0, "function": f.name, "code": (f.line or "").strip()}
        for f in summary[cut:]
    ]


def pass_source(frame: FrameType | None) -> dict[str, Any] | None:
    """The pass function of the user's own that the running pass is in (``file``, ``line``,
    ``function``, ``module``, ``qualname``, and ``made_by``: how the pass was made, see
    :func:`~iket_tui.agent.pass_maker.made_by`), from the compiling thread's innermost ``frame``: in the innermost
    run of frames that are not TVM's or TileLang's, which a frame of theirs called (TVM's FFI
    callback runs a Python pass so), the outermost frame that is the user's; that is, neither the
    standard library's, an installed package's (``site-packages``, ``dist-packages``), the agent's
    nor generated code. A pass blocked inside a library it called is still credited to the pass.
    None when the pass runs in TVM's or TileLang's code (or natively), or no such frame exists."""
    compiler = _compiler_dirs()
    run: list[FrameType] = []
    while frame is not None and _under(os.path.abspath(frame.f_code.co_filename), compiler):
        frame = frame.f_back  # the pass may be inside a call back into the compiler's Python
    while frame is not None and not _under(os.path.abspath(frame.f_code.co_filename), compiler):
        run.append(frame)
        frame = frame.f_back
    if frame is None:
        return None  # no compiler frame called into that run: it is the program's own code around the compile
    library, installed = _library_dirs()
    for found in reversed(run):
        path = os.path.abspath(found.f_code.co_filename)
        if _users(path, found.f_code.co_filename, library, installed):
            return {
                "file": path,
                "line": found.f_lineno,
                "function": found.f_code.co_name,
                "module": str(found.f_globals.get("__name__") or ""),
                "qualname": found.f_code.co_qualname,
                "made_by": made_by(found),
            }
    return None


def _users(path: str, name: str, library: tuple[str, ...], installed: tuple[str, ...]) -> bool:
    """Whether a frame's code file is the user's own (see :func:`pass_source`)."""
    if name.startswith("<") or _under(path, (_AGENT_DIR,)) or _under(path, installed):
        return False
    if _INSTALLED_DIRS.intersection(path.split(os.sep)):
        return False
    return not _under(path, library)


def _compiler_dirs() -> tuple[str, ...]:
    dirs = []
    for name in _COMPILER_PACKAGES:
        module = sys.modules.get(name)
        file = getattr(module, "__file__", None)
        if isinstance(file, str):
            dirs.append(os.path.dirname(os.path.abspath(file)))
    return tuple(dirs)


def _library_dirs() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The standard library's directories, and those of installed packages (which may lie inside them)."""
    paths = sysconfig.get_paths()
    standard = tuple({os.path.abspath(paths[key]) for key in ("stdlib", "platstdlib") if key in paths})
    installed = tuple({os.path.abspath(paths[key]) for key in ("purelib", "platlib") if key in paths})
    return standard, installed


def _under(path: str, dirs: tuple[str, ...]) -> bool:
    return any(path == directory or path.startswith(directory + os.sep) for directory in dirs)
