"""The modules around every pass of the most recent compiles, kept by reference and printed
only when a client asks (``ir`` requests): watching costs a dictionary store per pass.

TVM's passes return new modules and share what they did not change, so holding the module
before and after each pass of a compile keeps alive what that compile built, no more. Only the
last ``limit`` compiles are held (``IKET_TUI_IR_COMPILES``, default 8; 0 keeps none).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any, Final

DEFAULT_COMPILES: Final = 8
LIMIT_VARIABLE: Final = "IKET_TUI_IR_COMPILES"

# One pass: [name, module before, module after (None while it runs)]
Held = list[Any]


class IRUnavailable(Exception):
    """The IR asked for is not held; the message says why in one line."""


class IRStore:
    """Per compile, per pass sequence number: the modules before and after the pass."""

    def __init__(self, limit: int = DEFAULT_COMPILES) -> None:
        self.limit = limit
        self._compiles: OrderedDict[int, dict[int, Held]] = OrderedDict()
        self._lock = threading.Lock()

    def passes_of(self, compile_id: int) -> dict[int, Held] | None:
        """The dictionary a compile's passes go into (the compiler thread keeps it at hand);
        None when nothing is kept. Starting a compile lets the oldest beyond the limit go."""
        if self.limit <= 0:
            return None
        with self._lock:
            found = self._compiles.get(compile_id)
            if found is None:
                found = self._compiles[compile_id] = {}
                while len(self._compiles) > self.limit:
                    self._compiles.popitem(last=False)
            return found

    def module_before(self, compile_id: int, seq: int) -> Any:
        """The module pass ``seq`` of ``compile_id`` was given, if held."""
        with self._lock:
            passes = self._compiles.get(compile_id)
            held = None if passes is None else passes.get(seq)
        return None if held is None else held[1]

    def script(self, compile_id: int, seq: int, which: str) -> tuple[str, str]:
        """The pass's name and the TVMScript of the module ``which`` (``before`` or ``after``) it."""
        with self._lock:
            passes = self._compiles.get(compile_id)
            held = None if passes is None else passes.get(seq)
            oldest = next(iter(self._compiles), None)
        if passes is None:
            if self.limit <= 0:
                raise IRUnavailable(f"this agent keeps no IR ({LIMIT_VARIABLE}=0)")
            if oldest is not None and compile_id < oldest:
                raise IRUnavailable(f"compile {compile_id} is no longer held (the agent keeps the last {self.limit})")
            raise IRUnavailable(f"no compile {compile_id} was seen with IR")
        if held is None:
            raise IRUnavailable(f"compile {compile_id} has no pass {seq}")
        name, before, after = held
        module = before if which == "before" else after
        if which not in ("before", "after"):
            raise IRUnavailable(f"IR is asked 'before' or 'after' a pass, not {which!r}")
        if module is None:
            raise IRUnavailable(f"pass {seq} ({name}) has not finished: there is no IR after it yet")
        return name, _script(module)


def _script(module: Any) -> str:
    script = getattr(module, "script", None)
    if script is None:
        return str(module)
    return str(script())


def _limit() -> int:
    raw = os.environ.get(LIMIT_VARIABLE, "")
    try:
        return max(0, int(raw)) if raw else DEFAULT_COMPILES
    except ValueError:
        return DEFAULT_COMPILES


ir_store: Final = IRStore(_limit())
"""The IR of this process's recent compiles."""
