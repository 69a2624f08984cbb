"""What a compile notes between two of its passes, and how those notes become pass rows.

TVM calls a pass instrument before and after every pass, nested passes included. Each call comes
between two passes whose work has pushed this code out of the CPU's caches, so all the compiler's
thread does there is append a note (:data:`Note`) to the notes of its ``PassContext``
(:class:`PassNotes`). The notes become pass rows (the protocol's positional form,
:data:`~iket_tui.protocol.messages.PassTuple`) in one batch, in order:

- on the compiler's thread, at the compile's next event of another kind (a context, codegen,
  the end), or once a context holds :data:`DRAIN_AT` notes;
- on a client's thread (:meth:`HeldNotes.collect`): a client that attaches collects every
  running compile's notes before its catch-up, and each client's sender, before it writes,
  those of a compile that has been inside one pass for a while, so that a pass that runs long
  is seen while it runs.

One lock per compile (:attr:`NotingCompile.lock`) keeps the two threads from making events of the
same compile at once. This module imports neither TVM nor TileLang:
:mod:`~iket_tui.agent.tilelang_tool` makes :class:`PassNotes` a TVM pass instrument and
:class:`NotingCompile` a TileLang tool, and the registry, which every agent has, holds the
:class:`HeldNotes` of the process.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import weakref
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Sequence
from time import monotonic_ns
from typing import TYPE_CHECKING, Any, Final

from iket_tui.protocol import messages as m
from iket_tui.protocol.messages import PassTuple

if TYPE_CHECKING:
    from iket_tui.agent.registry import Registry

DRAIN_AT: Final = 1024
CHANGES_VARIABLE: Final = "IKET_TUI_PASS_CHANGES"
"""``1``: while the IR is kept, each pass end says whether the pass changed the module. Off by
default: the structural comparison costs about 3% of a lowering (most passes return a new module
even where they change nothing), beyond the 2% a watched compile may cost, and a pass end that
carries the answer travels as a map, not a row."""
"""Notes a context holds before its compiler's thread turns them into pass rows itself."""

Note = tuple[bool, int, Any, Any, "str | None"]
"""A pass's callback as its compiler's thread noted it: started (or finished), time, ``PassInfo``,
module (always at a start, for a failure capture; at a finish when the IR may be kept), phase."""


@functools.cache
def changes_asked(raw: str) -> bool:
    """Whether ``IKET_TUI_PASS_CHANGES`` holding ``raw`` asks for the check; another value than
    ``1`` or ``0`` is said on stderr, once, and taken as ``0``."""
    if raw.strip() in ("", "0"):
        return False
    if raw.strip() == "1":
        return True
    print(
        f"iket-tui agent: {CHANGES_VARIABLE} must be 1 or 0, got {raw!r}; passes are not checked for changes",
        file=sys.stderr,
    )
    return False


_PASS_START: Final = m.PASS_START
_PASS_END: Final = m.PASS_END


class HeldNotes:
    """The running compiles of this process that may hold notes not yet made pass rows."""

    def __init__(self) -> None:
        self._compiles: weakref.WeakSet[NotingCompile] = weakref.WeakSet()
        self._lock = threading.Lock()

    def hold(self, compile: NotingCompile) -> None:
        """``compile`` may hold notes back until :meth:`collect` (or its own thread) makes rows of them."""
        with self._lock:
            self._compiles.add(compile)

    def release(self, compile: NotingCompile) -> None:
        """``compile`` holds nothing back any more (it ended)."""
        with self._lock:
            self._compiles.discard(compile)

    @property
    def waiting(self) -> bool:
        """Whether a running compile may be holding notes back."""
        return bool(self._compiles)

    def collect(self, quiet_ns: int = 0) -> None:
        """Make pass rows of what every running compile noted (with ``quiet_ns``: of every compile
        that has been inside one pass that long), so that a long pass is seen while it runs.
        Called without the registry's lock: a compile emits."""
        with self._lock:
            compiles = list(self._compiles)
        for compile in compiles:
            compile.drain(quiet_ns)


class NotingCompile(ABC):
    """One compile whose passes are noted, context by context, and made pass rows in batches.

    The notes of each context call the hooks below, under :attr:`lock`, for what a compile does
    besides its passes: announcing itself, entering and leaving contexts, passes that never
    finished. A subclass gives them their meaning.
    """

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.lock = threading.RLock()
        """Held while this compile's events are made, on its compiler's thread or a sender's."""
        self.compile_id: int | None = None
        """The compile's id once it is announced (:meth:`announce`)."""
        self.next_seq = 0
        """The sequence number of the compile's next pass, across all its contexts."""
        self.contexts: list[PassNotes] = []
        """The notes of every context of the compile, in the order they were created."""

    def add_context(self, notes: PassNotes) -> None:
        """Take ``notes`` as those of the compile's next context (the caller holds :attr:`lock`);
        from its first, the compile may hold notes back for a sender to collect."""
        if not self.contexts:
            self.registry.held_notes.hold(self)
        self.contexts.append(notes)

    def release_notes(self) -> None:
        """The compile has ended: it holds no notes any more."""
        self.registry.held_notes.release(self)

    def drain(self, quiet_ns: int = 0) -> None:
        """Make pass rows of what the compile's contexts noted: all of it, or with ``quiet_ns``
        only once no pass began or ended for that long (the compiler is inside a long pass) or
        the oldest note is four times that old. Otherwise the notes wait for the compile's next
        event of another kind, which makes rows of them in one batch on the compiler's thread,
        where that costs least. Never raises: a failure is counted in the registry."""
        try:
            if quiet_ns and not self._waited(quiet_ns):
                return
            with self.lock:
                for notes in self.contexts:
                    notes.drain()
        except Exception:
            self.registry.observer_errors += 1

    def _waited(self, quiet_ns: int) -> bool:
        """Whether some context's notes waited long enough for :meth:`drain` (read without the
        lock: the compiler's thread may be appending or draining meanwhile)."""
        now = monotonic_ns()
        for context in list(self.contexts):
            notes = context.notes
            try:
                newest, oldest = notes[-1][1], notes[0][1]
            except IndexError:
                continue
            if now - newest >= quiet_ns or now - oldest >= 4 * quiet_ns:
                return True
        return False

    @abstractmethod
    def announce(self, mod: Any = None) -> int:
        """The compile's id, announcing the compile the first time (``mod``: the module its
        first pass was given, which may name its kernel)."""

    @abstractmethod
    def context_entered(self) -> int | None:
        """A context of the compile was entered; its number (``None`` if it cannot be told)."""

    @abstractmethod
    def context_exited(self, context: int) -> None:
        """Context ``context`` was left, after its notes were made rows."""

    @abstractmethod
    def callback_mismatch(self, context: int, actual: str, expected: str | None) -> None:
        """An after-pass callback named pass ``actual`` while ``expected`` was the one running."""

    @abstractmethod
    def passes_incomplete(self, context: int, passes: Sequence[PassTuple], error: BaseException | None) -> None:
        """``passes`` (their start rows, outermost first) never finished; the innermost is the one that failed."""


class PassNotes:
    """The passes of one TVM ``PassContext`` of a compile: noted between passes, paired and told
    to the registry as pass rows in batches.

    Before and after each pass, the compiler's thread appends a note; the first one of a compile
    also announces the compile, while its target is in scope. :meth:`drain`, under the compile's
    lock, pairs the notes on a stack of the start rows of the passes still running, outermost
    first, and builds each pass row as a tuple of plain values, which the sender writes as it is
    and the garbage collector soon stops tracking.
    """

    def __init__(self, compile: NotingCompile, *, keep_ir: bool, phase_now: Callable[[], str | None]) -> None:
        self.compile = compile
        self.registry = compile.registry
        self.context = -1
        self.keep_ir = keep_ir
        """Whether the notes hold the modules passes return (the IR store may keep them for
        requests). The module given to each pass is noted either way: the IR store holds it while
        the pass runs, for a failure capture or a stuck pass's."""
        self._store = self.registry.ir_store
        self._changes = changes_asked(os.environ.get(CHANGES_VARIABLE, ""))  # read at each compile
        self._phase_now = phase_now
        """The pass phase in force on the compiler's thread now."""
        self.begun = compile.compile_id is not None
        self.notes: deque[Note] = deque()
        """Appended on the compiler's thread; taken by :meth:`drain`, on either thread."""
        self.open: list[PassTuple] = []
        """The start row of every pass of this context still running, outermost first."""
        self._infos: list[Any] = []
        """The ``PassInfo`` of each open pass. TVM hands the same one to both callbacks of a
        pass, so the finish of a pass is paired with its start by address, without reading the
        name; holding it keeps that address from being reused meanwhile."""
        self._ir: dict[int, Any] | None = None  # this compile's passes in the IR store
        self._ir_compile: int | None = None

    # TVM's pass instrument interface

    def enter_pass_ctx(self) -> None:
        with self.compile.lock:
            self.notes.clear()
            self.open.clear()
            self._infos.clear()
        context = self.compile.context_entered()
        self.context = -1 if context is None else context

    def exit_pass_ctx(self) -> None:
        compile = self.compile
        with compile.lock:
            self.drain()
            if self.open:
                self.abort(None)
            self._ir = None  # TVM may keep this instrument alive; the IR store alone decides what is held
            self._ir_compile = None
            compile.context_exited(self.context)

    def run_before_pass(self, mod: Any, info: Any) -> None:
        if self.registry.running.aborting:  # some compile is being aborted: this one, if it goes on after it?
            from iket_tui.agent.abort import raise_again

            raise_again(self.registry.running, self.compile.compile_id)
        try:
            if not self.begun:
                self._begin(mod)
            self.notes.append((True, monotonic_ns(), info, mod, self._phase_now()))
        except Exception:
            self.registry.observer_errors += 1

    def run_after_pass(self, mod: Any, info: Any) -> None:
        try:
            notes = self.notes
            notes.append((False, monotonic_ns(), info, mod if self.keep_ir else None, None))
            if len(notes) >= DRAIN_AT:
                self.compile.drain()
        except Exception:
            self.registry.observer_errors += 1

    # Notes into pass rows

    def drain(self) -> None:
        """Turn the notes taken so far into pass rows, in order (the caller holds the compile's lock)."""
        notes = self.notes
        while notes:
            started, t_ns, info, mod, phase = notes.popleft()
            try:
                if started:
                    self._started(t_ns, info, mod, phase)
                else:
                    self._finished(t_ns, info, mod)
            except Exception:
                self.registry.observer_errors += 1

    def abort(self, error: BaseException | None) -> None:
        """Report every pass of this context still running as incomplete, stopped by ``error``
        (``None``: not known here). The caller holds the compile's lock."""
        passes, self.open = self.open, []
        self._infos = []
        if passes:
            self.compile.passes_incomplete(self.context, passes, error)

    def _begin(self, mod: Any) -> None:
        """This context's first pass: announce the compile (naming the kernel its module holds)
        if no other context did, and open its place in the IR store, which measures what a
        compile holds from its first pass on."""
        with self.compile.lock:
            compile_id = self.compile.announce(mod)
            self._store.passes_of(compile_id)
        self.begun = True

    def _started(self, t_ns: int, info: Any, mod: Any, phase: str | None) -> None:
        compile = self.compile
        compile_id = compile.compile_id
        if compile_id is None:
            compile_id = compile.announce(mod)
        seq = compile.next_seq
        compile.next_seq = seq + 1
        open_ = self.open
        row = (
            _PASS_START,
            compile_id,
            self.context,
            str(info.name),  # a plain str: TVM's own String is one more object the GC tracks
            seq,
            len(open_),
            open_[-1][4] if open_ else None,
            phase,
            t_ns,
            None,
        )
        open_.append(row)
        self._infos.append(info)
        if compile_id != self._ir_compile:
            self._ir_compile = compile_id
            self._ir = self._store.passes_of(compile_id)
        if self._ir is not None and mod is not None:
            self._ir[seq] = [row[3], mod, None]
        self.registry.emit_pass_start(row, compile_id, seq)

    def _finished(self, t_ns: int, info: Any, mod: Any) -> None:
        open_ = self.open
        infos = self._infos
        if not open_ or infos[-1].__chandle__() != info.__chandle__():
            name = str(info.name)
            if not open_ or open_[-1][3] != name:
                expected = open_[-1][3] if open_ else None
                self.compile.callback_mismatch(self.context, name, expected)
                self.abort(RuntimeError(f"unmatched after-pass callback for {name!r}; expected {expected!r}"))
                return
        infos.pop()
        start = open_.pop()
        compile_id = start[1]
        seq = start[4]
        held = self._ir.get(seq) if self._ir is not None else None
        row = (_PASS_END, compile_id, start[2], start[3], seq, start[5], start[6], start[7], t_ns, t_ns - start[8])
        if held is not None:
            if self._store.keeping:
                held[2] = mod
                compare = self._changes and mod is not None and held[1] is not None
                changed = self._changed(held[1], mod) if compare else None
                if changed is not None:
                    self.registry.emit_pass_end(m.message_of(row) | {"changed": changed}, compile_id, seq)
                    return
            else:  # nobody may ask for it: only a running pass's module is held
                held[1] = None
        self.registry.emit_pass_end(row, compile_id, seq)

    def _changed(self, before: Any, after: Any) -> bool | None:
        """Whether a pass given ``before`` returned a module that differs from it in structure
        (``None`` where they cannot be compared: the pass still ends, without the answer).

        Called only where asked (``IKET_TUI_PASS_CHANGES=1``) while the IR is kept. A pass that returns the
        module it was given changed nothing; otherwise the two are compared structurally, which
        stops at the first difference: tens of microseconds for a GEMM's module that a pass
        rebuilt unchanged, a few for one it changed (cheaper than hashing each module)."""
        try:
            return not after.same_as(before) and not _structurally_equal(before, after)
        except Exception:
            self.registry.observer_errors += 1
            return None


def _structurally_equal(before: Any, after: Any) -> bool:
    """TVM's structural equality of two modules (imported here: this module imports no TVM of its own)."""
    import tvm

    return bool(tvm.ir.structural_equal(before, after))
