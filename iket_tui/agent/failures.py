"""How a compile's exception is told to the user: type and message, the compiler's own words, the traceback.

Texts are bounded so that one enormous error (nvcc echoes the whole generated source before
its diagnostics) cannot make a frame too large for the wire.
"""

from __future__ import annotations

import sys
import traceback
from types import FrameType, TracebackType
from typing import Final

MAX_ERROR_CHARS: Final = 64 * 1024
MAX_TRACEBACK_CHARS: Final = 256 * 1024

_NVCC_MARKER: Final = "Compilation error:"


def describe(exc: BaseException) -> str:
    """``"Type: message"``, the message reduced to what the compiler said."""
    return bounded(f"{type(exc).__name__}: {compiler_message(exc)}", MAX_ERROR_CHARS)


def compiler_message(exc: BaseException) -> str:
    """The exception's message; for an nvcc failure, nvcc's diagnostics without the echoed source."""
    return compiler_text(str(exc))


def compiler_text(text: str) -> str:
    """An error message without the generated source that nvcc's failures echo before ``Compilation error:``."""
    cut = text.find(_NVCC_MARKER)
    return text[cut:] if cut > 0 else text


def type_name(exc: BaseException) -> str:
    """The exception's class, qualified by its module unless it is a builtin."""
    cls = type(exc)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def format_traceback(exc: BaseException) -> str:
    """The traceback as the interpreter would print it if nobody caught ``exc``.

    Seen from inside the compile session that ``exc`` is leaving, the exception's own
    traceback starts at the compiler's entry point; the program's frames that called the
    compiler are still on the stack and are put back in front, so the user sees which line
    of their program started the failing compile.
    """
    whole = traceback.TracebackException(type(exc), exc, _with_callers(exc.__traceback__))
    return bounded("".join(whole.format()), MAX_TRACEBACK_CHARS)


def _with_callers(tb: TracebackType | None) -> TracebackType | None:
    """``tb`` from the outermost frame on the current stack that it passes through, with that frame's callers."""
    entries: dict[int, TracebackType] = {}
    walk = tb
    while walk is not None:
        entries.setdefault(id(walk.tb_frame), walk)
        walk = walk.tb_next
    callers: list[FrameType] = []
    joint: TracebackType | None = None
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if id(frame) in entries:
            joint = entries[id(frame)]
            callers = []
        else:
            callers.append(frame)
        frame = frame.f_back
    if joint is None:
        return tb
    head = joint
    for caller in callers:
        head = TracebackType(head, caller, caller.f_lasti, caller.f_lineno)
    return head


def bounded(text: str, limit: int) -> str:
    """``text`` cut in the middle when longer than ``limit``: its start and its end say the most."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters left out ...]\n{text[-half:]}"
