"""A screen's catch-up with the model, run at most once per interval however often it is asked."""

from __future__ import annotations

import time
from collections.abc import Callable

from textual.message_pump import MessagePump


class Throttle:
    """Runs ``sync`` when asked, unless it ran less than ``interval_s`` ago: then once, on a
    timer of ``owner``, when the interval has passed. ``sync`` calls :meth:`ran` itself, so
    that a sync for any other reason counts too."""

    def __init__(self, owner: MessagePump, sync: Callable[[], None], interval_s: float) -> None:
        self._owner = owner
        self._sync = sync
        self._interval_s = interval_s
        self._ran_at = -interval_s
        self._due = False

    def ask(self) -> None:
        if self._due:
            return
        wait = self._ran_at + self._interval_s - time.monotonic()
        if wait <= 0:
            self._sync()
        else:
            self._due = True
            self._owner.set_timer(wait, self._sync)

    def ran(self) -> None:
        self._ran_at = time.monotonic()
        self._due = False
