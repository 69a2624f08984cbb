"""A signal of the agent's own that interrupts what the main thread waits in, while a compile
runs there, so that an abort reaches a compile blocked in a lock, an event, ``time.sleep``,
``select`` or ``subprocess``'s waits.

Python runs signal handlers on the main thread only, between two bytecodes, and a blocking call
of the main thread that a signal interrupts runs the handler before it would retry (PEP 475): a
handler that raises ends the call with its exception. Only the main thread may install a
handler, so one is installed as each compile starts on the main thread (the outermost, for
nested compiles) and the handler it replaced is put back as the compile ends: outside compiles
the program's signal dispositions are its own.

The signal is the highest real-time signal (``SIGRTMAX``, then downwards to ``SIGRTMIN``) that
the program has not claimed: its handler is the default one and the main thread does not block
it. ``SIGINT``, ``SIGTERM``, ``SIGUSR1``, ``SIGUSR2`` and ``SIGALRM`` are never used. Where every
real-time signal is claimed, nothing is installed and an abort falls back to raising at the
thread's next Python bytecode. A signal sent but not yet handled when the compile ends is taken
off the main thread before the default disposition (which would end the process) is put back.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

Handler = Callable[[int, FrameType | None], Any]
"""A Python signal handler."""


class MainThreadInterrupt:
    """The agent's signal handler on the main thread while compiles run there; entered and left on
    the compiler's thread, delivered from a client's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._signum: int | None = None
        self._handler: Handler | None = None
        self._previous: Any = None
        self._sent = False

    @property
    def signum(self) -> int | None:
        """The signal installed now, or None (no compile on the main thread, or none left unclaimed)."""
        return self._signum

    def enter(self, handler: Handler) -> bool:
        """A compile starts on this thread: if it is the main thread and no compile there installed
        one yet, install ``handler`` for an unclaimed signal. Whether this thread is the main one
        (and :meth:`leave` must be called as the compile ends)."""
        if threading.get_ident() != threading.main_thread().ident:
            return False
        with self._lock:
            self._depth += 1
            if self._depth > 1:
                return True
            signum = _unclaimed()
            if signum is None:
                return True
            self._previous = signal.signal(signum, handler)
            self._signum, self._handler = signum, handler
        return True

    def leave(self) -> None:
        """A compile that :meth:`enter` was told of ends (on the main thread): once the outermost
        ends, put the handler it replaced back, after taking off any signal still pending."""
        with self._lock:
            if self._depth == 0:
                return
            self._depth -= 1
            if self._depth or self._signum is None:
                return
            signum, handler, previous, sent = self._signum, self._handler, self._previous, self._sent
            self._signum = self._handler = self._previous = None
            self._sent = False
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signum}) if sent else None
        try:
            if sent:
                _python_runs()  # the handler of one delivered before it was blocked runs now, not too late
                signal.sigtimedwait({signum}, 0)  # one sent but not yet delivered: take it off
            if signal.getsignal(signum) is handler:  # unless the program claimed it meanwhile
                signal.signal(signum, previous)
        finally:
            if mask is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    def interrupt(self) -> bool:
        """Send the signal to the main thread, interrupting what it waits in; whether one is installed."""
        with self._lock:
            if self._signum is None:
                return False
            self._sent = True
            main = threading.main_thread().ident
            assert main is not None
            signal.pthread_kill(main, self._signum)
            return True


def _python_runs() -> None:
    """Nothing: calling a Python function runs the handlers of signals already delivered (a handler
    run after the default disposition is back would be reported as a signal ignored)."""


def _unclaimed() -> int | None:
    """The highest real-time signal whose handler is the default one and that this thread does not block."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, ())
    for signum in range(signal.SIGRTMAX, signal.SIGRTMIN - 1, -1):
        if signum not in blocked and signal.getsignal(signum) == signal.SIG_DFL:
            return signum
    return None
