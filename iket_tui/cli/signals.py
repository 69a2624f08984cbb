"""Signals heard on a helper thread, so that a main thread inside the UI's event loop still answers them."""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def watch_signals(handler: Callable[[int], None], signals: tuple[signal.Signals, ...]) -> Iterator[None]:
    """For a while, call ``handler(signum)`` on a helper thread when one of ``signals`` arrives.

    The main thread may sit in the UI's event loop, which no Python signal handler wakes when
    the kernel delivers the signal to another thread; the signal's wakeup byte always arrives.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    receive, send = socket.socketpair()
    send.setblocking(False)
    wanted = {int(sig) for sig in signals}

    def watch() -> None:
        while data := receive.recv(64):
            for signum in data:
                if signum in wanted:
                    handler(signum)

    previous = {sig: signal.signal(sig, lambda _signum, _frame: None) for sig in signals}
    previous_fd = signal.set_wakeup_fd(send.fileno(), warn_on_full_buffer=False)
    watcher = threading.Thread(target=watch, name="iket-tui signals", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous_fd)
        for sig, old_handler in previous.items():
            signal.signal(sig, old_handler)
        send.close()
        watcher.join(1.0)
        receive.close()
