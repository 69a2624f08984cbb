"""The modules around every pass of the most recent compiles, kept by reference and printed
only when a client asks (``ir`` requests): printing every pass would slow every compile down,
holding a reference to its module only adds a dictionary store per pass. The registry owns the
process's store (:attr:`~iket_tui.agent.registry.Registry.ir_store`).

The IR of a pass is kept only while someone may ask for it: while at least one client is
attached (the registry says when, :meth:`IRStore.watch`), or always with ``IKET_TUI_IR=always``.
Otherwise the store holds only the module given to each pass still running, one reference per
pass, dropped when the pass ends: what a failure capture and a stuck pass's capture need
(:mod:`~iket_tui.agent.capture`, :mod:`~iket_tui.agent.stuck`). A compile that ran while nobody
watched is let go of when it ends, and a request for its IR says so in one line.

TVM's passes return new modules and share what they did not change, so holding the module
before and after each pass of a compile keeps alive what that compile built, no more. Two
bounds, both configurable, decide how much is held:

- count: the last ``IKET_TUI_IR_COMPILES`` compiles (default 8; 0 keeps none), and the one
  running while it runs (running compiles are counted apart from finished ones, so a compile
  stuck in a pass keeps its IR however many compiles end after it started);
- memory: ``IKET_TUI_IR_MEMORY`` bytes (default 256 MiB; suffixes K, M, G; 0 lifts the bound).

What a compile holds is measured, not guessed: the C heap in use when its first pass starts and
when it ends (glibc's ``mallinfo2``, twice per compile). TVM allocates its nodes there, and
once the compile is over what it left in use is what the store keeps of it (a thread allocating
at the same time is counted with it: the bound errs on the side of holding less). Where the C
library cannot say (not glibc), only the count bounds the store, and :attr:`IRStore.measured`
says so.

Compiles are let go of when one ends, just after it was measured: the oldest beyond the count,
then, oldest first, finished compiles while the total is over the memory bound (the one that
just ended included when it alone is larger). A compile still running is never released for
memory, and its size is not known until it ends. Released compiles are freed there, between
two compiles, rather than while the next one runs, which freeing would slow down (measured in
docs/benchmark-log.md).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

DEFAULT_COMPILES: Final = 8
DEFAULT_MEMORY: Final = 256 * 1024 * 1024
LIMIT_VARIABLE: Final = "IKET_TUI_IR_COMPILES"
MEMORY_VARIABLE: Final = "IKET_TUI_IR_MEMORY"
KEEP_VARIABLE: Final = "IKET_TUI_IR"
"""``always``: keep the IR while no client is attached too."""
UNWATCHED: Final = "ran while no client was attached: its IR was not kept (IKET_TUI_IR=always keeps it)"
MAX_REASONS: Final = 1024
"""Released compiles whose reason is remembered, for the message that answers a late request."""

# One pass: [name, module before (None once it ended unwatched), module after (None while it
# runs, or when it ended unwatched)]
Held = list[Any]


class IRUnavailable(Exception):
    """The IR asked for is not held; the message says why in one line."""


@dataclass
class _Compile:
    passes: dict[int, Held] = field(default_factory=dict)
    heap_at_start: int | None = None
    size: int | None = None  # bytes it holds, known once it ended
    watched: bool = True  # no part of it ran while the store kept no IR


class IRStore:
    """Per compile, per pass sequence number: the modules before and after the pass."""

    def __init__(
        self,
        limit: int = DEFAULT_COMPILES,
        memory: int = DEFAULT_MEMORY,
        heap_in_use: Callable[[], int | None] | None = None,
        *,
        always: bool = False,
    ) -> None:
        self.memory = memory
        self.always = always
        """Keep the IR whether or not a client is attached (``IKET_TUI_IR=always``)."""
        self._watched = True  # until the registry says otherwise
        self._limit = limit
        self.keeping = limit > 0
        """Whether the IR of a pass that ends now is kept for requests (read once per pass)."""
        self._heap = heap_in_use if heap_in_use is not None else _heap_in_use
        self.measured = self._heap() is not None
        self._compiles: OrderedDict[int, _Compile] = OrderedDict()
        self._released: OrderedDict[int, str] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def from_environment(cls) -> IRStore:
        """A store bounded as ``IKET_TUI_IR_COMPILES`` and ``IKET_TUI_IR_MEMORY`` say, keeping IR
        while no client is attached only with ``IKET_TUI_IR=always`` (a bad value is one line
        on stderr, and the default is used)."""
        return cls(_limit(), _memory(), always=_always())

    @property
    def limit(self) -> int:
        """Compiles whose IR is kept after they end (0: none)."""
        return self._limit

    @limit.setter
    def limit(self, value: int) -> None:
        self._limit = value
        self._update_keeping()

    def watch(self, watched: bool) -> None:
        """Whether a client is attached now. Without one (and without :attr:`always`), passes
        that end from now on keep no IR, and the running compiles count as unwatched."""
        self._watched = watched
        self._update_keeping()

    def _update_keeping(self) -> None:
        keeping = self._limit > 0 and (self.always or self._watched)
        if not keeping:
            with self._lock:
                for held in self._compiles.values():
                    if held.size is None:
                        held.watched = False
        self.keeping = keeping

    def forget(self) -> None:
        """Hold nothing, as if no compile had been seen, within the same bounds: in a child made
        by ``fork``, whose parent's compiles are not its own. The lock is made anew: another
        thread of the parent may have held it at the fork."""
        self._lock = threading.Lock()
        self._compiles = OrderedDict()
        self._released = OrderedDict()

    def held(self) -> dict[int, int | None]:
        """The compiles held, oldest first, with the bytes each holds (None while it runs)."""
        with self._lock:
            return {compile_id: held.size for compile_id, held in self._compiles.items()}

    def passes_of(self, compile_id: int) -> dict[int, Held]:
        """The dictionary a compile's passes go into (the compiler thread keeps it at hand).
        Held while the compile runs, even when no IR is kept: its running passes' modules are."""
        released: list[_Compile] = []
        with self._lock:
            found = self._compiles.get(compile_id)
            if found is None:
                released = self._over_count()  # none unless compiles started and did not end
                found = self._compiles[compile_id] = _Compile(
                    heap_at_start=self._heap() if self.memory > 0 and self._limit > 0 else None, watched=self.keeping
                )
            passes = found.passes
        del released  # their modules are freed here, outside the lock
        return passes

    def compile_ended(self, compile_id: int) -> None:
        """Measure what the compile holds, then release the compiles beyond the count and those
        over the memory bound."""
        with self._lock:
            held = self._compiles.get(compile_id)
            if held is None or held.size is not None:
                return
            if self._limit <= 0 or not (held.watched or any(found[2] is not None for found in held.passes.values())):
                del self._compiles[compile_id]  # it kept nothing for requests
                if self._limit > 0:
                    self._release(compile_id, f"compile {compile_id} {UNWATCHED}")
                released = [held]
            else:
                released = self._measured(held)
        del released  # their modules are freed here, outside the lock

    def _measured(self, held: _Compile) -> list[_Compile]:
        """Measure what the compile ``held`` holds, and take the compiles over the bounds out."""
        now = self._heap() if held.heap_at_start is not None else None
        held.size = 0 if now is None or held.heap_at_start is None else max(0, now - held.heap_at_start)
        return self._over_count() + self._over_memory()

    def _over_count(self) -> list[_Compile]:
        """Take the oldest compiles beyond the count out of the store, finished and running ones
        counted apart: a compile still running (a stuck one, the one a user asks about) keeps its
        IR however many compiles end after it started, and running ones are bounded only against
        each other (compiles that started and never ended)."""
        # A compile running unwatched holds only its running passes' modules: not counted.
        counted = [key for key, held in self._compiles.items() if held.watched or held.size is not None]
        finished = [key for key in counted if self._compiles[key].size is not None]
        running = [key for key in counted if self._compiles[key].size is None]
        over = [*finished[: max(0, len(finished) - self._limit)], *running[: max(0, len(running) - self._limit)]]
        released = [self._compiles.pop(oldest) for oldest in over]
        for oldest in over:
            self._release(oldest, f"compile {oldest} is no longer held (the agent keeps the last {self._limit})")
        return released

    def _over_memory(self) -> list[_Compile]:
        """Take finished compiles, oldest first, out of the store while the total is over the bound."""
        released: list[_Compile] = []
        if self.memory <= 0:
            return released
        total = sum(c.size or 0 for c in self._compiles.values())
        for older_id in list(self._compiles):
            if total <= self.memory:
                break
            older = self._compiles[older_id]
            if older.size is None:
                continue  # still running
            released.append(self._compiles.pop(older_id))
            total -= older.size
            self._release(
                older_id,
                f"compile {older_id} is no longer held: the IR of recent compiles is kept within "
                f"{_mib(self.memory)} ({MEMORY_VARIABLE}), and it held {_mib(older.size)}",
            )
        return released

    def names(self, compile_id: int) -> dict[int, str]:
        """The name of every pass of ``compile_id`` held, by sequence number (empty when none is)."""
        with self._lock:
            held = self._compiles.get(compile_id)
            return {} if held is None else {seq: str(found[0]) for seq, found in list(held.passes.items())}

    def module_before(self, compile_id: int, seq: int) -> Any:
        """The module pass ``seq`` of ``compile_id`` was given, if held."""
        with self._lock:
            held = self._compiles.get(compile_id)
            found = None if held is None else held.passes.get(seq)
        return None if found is None else found[1]

    def script(self, compile_id: int, seq: int, which: str) -> tuple[str, str]:
        """The pass's name and the TVMScript of the module ``which`` (``before`` or ``after``) it."""
        if which not in ("before", "after"):
            raise IRUnavailable(f"IR is asked 'before' or 'after' a pass, not {which!r}")
        with self._lock:
            held = self._compiles.get(compile_id)
            found = None if held is None else held.passes.get(seq)
            released = self._released.get(compile_id)
        if held is None:
            if self.limit <= 0:
                raise IRUnavailable(f"this agent keeps no IR ({LIMIT_VARIABLE}=0)")
            if released is not None:
                raise IRUnavailable(released)
            raise IRUnavailable(f"no compile {compile_id} was seen with IR")
        if found is None:
            if not held.watched:
                raise IRUnavailable(f"pass {seq} of compile {compile_id} {UNWATCHED}")
            raise IRUnavailable(f"compile {compile_id} has no pass {seq}")
        name, before, after = found
        if before is None:
            raise IRUnavailable(f"pass {seq} ({name}) of compile {compile_id} {UNWATCHED}")
        module = before if which == "before" else after
        if module is None:
            raise IRUnavailable(f"pass {seq} ({name}) has not finished: there is no IR after it yet")
        return name, _script(module)

    def _release(self, compile_id: int, reason: str) -> None:
        self._released[compile_id] = reason
        while len(self._released) > MAX_REASONS:
            self._released.popitem(last=False)


def _script(module: Any) -> str:
    script = getattr(module, "script", None)
    if script is None:
        return str(module)
    return str(script())


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):,.1f} MiB"


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks")
    ] + [("keepcost", ctypes.c_size_t)]


def _glibc_mallinfo2() -> Callable[[], int | None]:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallinfo2 = libc.mallinfo2
    except (OSError, AttributeError):
        return lambda: None
    mallinfo2.restype = _MallInfo2
    mallinfo2.argtypes = []

    def in_use() -> int | None:
        info = mallinfo2()
        return int(info.uordblks + info.hblkhd)  # allocated from the arenas, and in their own mappings

    return in_use


_heap_in_use: Final = _glibc_mallinfo2()
"""Bytes of the C heap in use now, or None where the C library cannot say."""

_SIZE: Final = re.compile(r"\s*(\d+)\s*([kmg]?)i?b?\s*", re.IGNORECASE)


def parse_size(text: str) -> int | None:
    """``"256M"``, ``"1G"``, ``"4096"`` (bytes); None when it is not a size."""
    match = _SIZE.fullmatch(text)
    if match is None:
        return None
    scale = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[match.group(2).lower()]
    return int(match.group(1)) * scale


def _warn(text: str) -> None:
    print(f"iket-tui agent: {text}", file=sys.stderr)


def _limit() -> int:
    raw = os.environ.get(LIMIT_VARIABLE, "")
    if not raw:
        return DEFAULT_COMPILES
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        _warn(f"{LIMIT_VARIABLE} must be a whole number of compiles, got {raw!r}; keeping the last {DEFAULT_COMPILES}")
        return DEFAULT_COMPILES
    return value


def _always() -> bool:
    raw = os.environ.get(KEEP_VARIABLE, "")
    if raw.strip().lower() in ("", "attached"):
        return False
    if raw.strip().lower() == "always":
        return True
    _warn(f"{KEEP_VARIABLE} must be 'always' or 'attached', got {raw!r}; keeping IR while a client is attached")
    return False


def _memory() -> int:
    raw = os.environ.get(MEMORY_VARIABLE, "")
    if not raw:
        return DEFAULT_MEMORY
    found = parse_size(raw)
    if found is None:
        _warn(f"{MEMORY_VARIABLE} must be a size such as 512M or 2G, got {raw!r}; using {_mib(DEFAULT_MEMORY)}")
        return DEFAULT_MEMORY
    if found > 0 and _heap_in_use() is None:
        _warn(f"{MEMORY_VARIABLE} is not applied: this C library cannot say how much heap is in use")
    return found
