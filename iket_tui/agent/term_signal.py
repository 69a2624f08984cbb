"""What the agent had to say reaches its clients when its process is ended by SIGTERM.

A multiprocessing pool's ``terminate`` (what ``with Pool() as pool:`` does on leaving) sends
SIGTERM to its workers as soon as their results are back; the default action ends a process at
once, and what the agent still held for its clients (a failing compile's capture and its end,
held back a moment so that a burst goes out in one write) would die with it.

While the agent runs, SIGTERM is handled by :class:`TermFlush` (installed from the main thread
only, and only where SIGTERM was not ignored and not handled from C). When it arrives:

- where the program's own disposition is the default, the agent collects the passes its running
  compiles noted, sends every client what its queue holds and a ``bye`` (reason ``"SIGTERM"``),
  waiting at most :data:`TERM_FLUSH_S` (not at all with no client attached), then the default
  action is delivered again, so the process still ends killed by SIGTERM;
- where the program had its own handler, the agent sends every client what its queue holds
  (the same bound, no ``bye``: the program may go on) and then calls that handler;
- a program that installs its own handler later replaces this one, and SIGTERM is then its alone.

A SIGTERM that arrives while a compile's end is being written on the main thread (its failure
capture, its ``compile_end``) is acted on once that end is written. One that interrupts the main
thread inside the agent's own code (or :mod:`threading`'s), where it may hold a lock the flush
needs, does not wait there: the flush runs on a thread of its own, which then delivers the
default action itself.

A Python handler runs only when the main thread comes back to Python code: where it stays in
native code that releases the GIL (a long C++ pass, a wait on the GPU), a watcher thread woken
through :func:`signal.set_wakeup_fd` notices that the handler did not run within
:data:`STUCK_S`, sends what it can, and delivers the default action itself, so that ``kill``
still ends such a process. Native code that holds the GIL throughout delays the end until it
returns, as it delays every Python handler.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from iket_tui.agent.lifecycle import Agent

TERM_FLUSH_S: Final = 0.5
"""The longest a SIGTERM waits for the agent's clients to receive what they are owed."""
STUCK_S: Final = 1.0
"""How long the main thread may take to run the handler before the watcher acts in its stead."""

Handler = Callable[[int, FrameType | None], Any] | int | None


class TermFlush:
    """This process's SIGTERM handler while the agent runs; see the module's docstring."""

    def __init__(self, agent: Agent, previous: Handler, flush_s: float) -> None:
        self._agent = agent
        self._previous = previous
        self._flush_s = flush_s
        self._active = True
        self._handled = 0  # SIGTERMs the main thread's handler has run for
        self._arrived = 0  # SIGTERMs the watcher was woken for
        self._acted = threading.Lock()  # held by whoever ends the process
        self._wakeup: tuple[int, int] | None = None  # the pipe the watcher reads, and its write end

    @classmethod
    def install(cls, agent: Agent, flush_s: float) -> TermFlush | None:
        """Handle SIGTERM for ``agent`` from now on; ``None`` where it is not installed (not the
        main thread, SIGTERM ignored or handled from C)."""
        if threading.current_thread() is not threading.main_thread():
            return None
        previous = signal.getsignal(signal.SIGTERM)
        inherited = getattr(previous, "__self__", None)
        if isinstance(inherited, TermFlush):  # the parent's, in a child made by fork
            previous = inherited._previous
        if previous is None or previous == signal.SIG_IGN:
            return None
        term = cls(agent, previous, flush_s)
        signal.signal(signal.SIGTERM, term.handle)
        term._watch()
        return term

    def handle(self, signum: int, frame: FrameType | None) -> None:
        """The SIGTERM handler, on the main thread."""
        self._handled += 1
        registry = self._agent.registry
        if registry.ending_on_main:  # a compile's end is being written below this frame
            registry.after_ending = lambda: self._flush_then_chain(signum, None)
            return
        self._flush_then_chain(signum, frame)

    def uninstall(self) -> None:
        """The agent stopped: give SIGTERM back to what handled it before, where this can be done
        (the main thread, and still this handler); otherwise this handler only passes it on."""
        self._active = False
        if threading.current_thread() is threading.main_thread():
            if signal.getsignal(signal.SIGTERM) == self.handle:
                signal.signal(signal.SIGTERM, self._previous)
            self._stop_watching()

    def abandon(self) -> None:
        """In a child made by ``fork``: this handler and its watcher are the parent's. Signals of
        the child must not wake the parent's watcher, so the child's wakeup fd is cleared."""
        self._active = False
        wakeup, self._wakeup = self._wakeup, None
        if wakeup is not None:
            with contextlib.suppress(ValueError, OSError):
                current = signal.set_wakeup_fd(-1)
                if current != wakeup[1]:
                    signal.set_wakeup_fd(current)  # the program's own: keep it
            for fd in wakeup:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _flush_then_chain(self, signum: int, frame: FrameType | None) -> None:
        # Interrupted under the agent's own code, the main thread may hold a lock the flush
        # needs: it must not wait for the flush, which then ends the process itself.
        safe = not _inside_agent(frame)
        previous = self._previous
        if callable(previous):
            if self._active and safe:
                flush = threading.Thread(target=self._deliver, name="iket-tui exit flush", daemon=True)
                flush.start()
                flush.join(self._flush_s + 0.25)
            previous(signum, frame)
            return
        if not self._acted.acquire(blocking=False):
            return  # the watcher ends the process already
        ending = threading.Thread(target=self._end, args=(not safe,), name="iket-tui exit flush", daemon=True)
        ending.start()
        if not safe:
            return
        ending.join(self._flush_s + 0.25)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        os.kill(os.getpid(), signal.SIGTERM)

    def _deliver(self) -> None:
        self._agent.deliver_queued(self._flush_s)

    def _end(self, then_kill: bool) -> None:
        """Flush and say ``bye``; with ``then_kill``, deliver the default action from this thread."""
        try:
            if self._active:
                self._agent.close_at_exit("SIGTERM", self._flush_s)
        finally:
            if then_kill:
                default_action_now()

    def _watch(self) -> None:
        """Be woken by every signal Python handles, unless the program has a wakeup fd of its own."""
        read, write = os.pipe()
        os.set_blocking(write, False)
        try:
            old = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        except (ValueError, OSError):
            old = None
        if old != -1:
            if old is not None:
                signal.set_wakeup_fd(old)
            os.close(read)
            os.close(write)
            return
        self._wakeup = (read, write)
        threading.Thread(target=self._watcher, args=(read,), name="iket-tui SIGTERM watch", daemon=True).start()

    def _stop_watching(self) -> None:
        wakeup, self._wakeup = self._wakeup, None
        if wakeup is None:
            return
        with contextlib.suppress(ValueError, OSError):
            current = signal.set_wakeup_fd(-1)
            if current != wakeup[1]:
                signal.set_wakeup_fd(current)  # the program's own since: keep it
        os.close(wakeup[1])  # the watcher reads the end of the pipe and returns

    def _watcher(self, read: int) -> None:
        try:
            while True:
                data = os.read(read, 512)
                if not data:
                    return
                self._arrived += data.count(signal.SIGTERM)
                if signal.SIGTERM in data:
                    self._unless_handled()
        except OSError:
            return
        finally:
            with contextlib.suppress(OSError):
                os.close(read)

    def _unless_handled(self) -> None:
        """A SIGTERM arrived: if the main thread does not run the handler within :data:`STUCK_S`
        (it is in native code), do what the default action would after a flush."""
        arrived = self._arrived
        waited = threading.Event()
        for _ in range(int(STUCK_S / 0.02)):
            if self._handled >= arrived or not self._active:
                return
            waited.wait(0.02)
        if self._previous != signal.SIG_DFL or signal.getsignal(signal.SIGTERM) != self.handle:
            return  # the program's own handler: it runs when the main thread can, as without the agent
        if self._acted.acquire(blocking=False):
            self._end(then_kill=True)


_AGENT_DIR: Final = os.path.dirname(os.path.abspath(__file__)) + os.sep
_THREADING: Final = threading.__file__


def _inside_agent(frame: FrameType | None) -> bool:
    """Whether the stack from ``frame`` runs the agent's code, or :mod:`threading`'s, whose locks
    the agent takes."""
    while frame is not None:
        name = frame.f_code.co_filename
        if name == _THREADING or name.startswith(_AGENT_DIR):
            return True
        frame = frame.f_back
    return False


def default_action_now() -> None:
    """End this process by SIGTERM's default action, from any thread (Python sets dispositions
    only from the main thread, so libc's ``signal`` is called); ends it with exit code 143
    where that cannot be done."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.signal.restype = ctypes.c_void_p
        libc.signal.argtypes = (ctypes.c_int, ctypes.c_void_p)
        libc.signal(signal.SIGTERM, None)  # SIG_DFL
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        os.kill(os.getpid(), signal.SIGTERM)
        threading.Event().wait(1.0)
    finally:
        os._exit(128 + signal.SIGTERM)
