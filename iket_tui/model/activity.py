"""How lively the stream is: events per second and the connection state a user sees."""

from __future__ import annotations

from collections import deque
from enum import StrEnum

RATE_WINDOW_S = 5.0
LIVE_WITHIN_S = 2.0  # events this recent: live
SILENT_AFTER_S = 5.0  # nothing at all for this long, not even a heartbeat: silent


class Connection(StrEnum):
    CONNECTING = "connecting"  # nothing received yet
    LIVE = "live"  # events arriving
    QUIET = "quiet"  # only heartbeats: the target is alive and not compiling
    SILENT = "silent"  # not even heartbeats: the target may be hung or stopped
    ENDED = "ended"  # the target exited, the socket closed, or the recording ended
    FAILED = "failed"  # an error ended the source


class StreamActivity:
    """Arrival times of messages on the local clock (seconds, given explicitly so tests can
    freeze it)."""

    __slots__ = ("_first_s", "_samples", "ended", "last_event_s", "last_message_s", "received")

    def __init__(self) -> None:
        self._samples: deque[tuple[float, int]] = deque()
        self._first_s: float | None = None
        self.received = 0
        self.last_event_s: float | None = None
        self.last_message_s: float | None = None
        self.ended = False

    def record(self, local_s: float, *, events: int, messages: int) -> None:
        """``messages`` arrived at ``local_s``; ``events`` of them were compile or pass events."""
        if messages:
            self.last_message_s = local_s
        if events:
            if self._first_s is None:
                self._first_s = local_s
            self.last_event_s = local_s
            self.received += events
            self._samples.append((local_s, events))

    def end(self) -> None:
        """No more events will come (the target disconnected, the recording ended)."""
        self.ended = True
        self._samples.clear()

    def rate(self, now_s: float) -> float:
        """Events per second over the last few seconds: it falls as time passes without
        events, to 0 once the last of them is older than the window or the stream ended."""
        if self.ended:
            return 0.0
        samples = self._samples
        while samples and samples[0][0] <= now_s - RATE_WINDOW_S:
            samples.popleft()
        if not samples or self._first_s is None:
            return 0.0
        span = min(RATE_WINDOW_S, max(1.0, now_s - self._first_s))
        return sum(count for _, count in samples) / span

    def connection(self, now_s: float, *, ended: bool = False, failed: bool = False) -> Connection:
        if failed:
            return Connection.FAILED
        if ended:
            return Connection.ENDED
        if self.last_message_s is None:
            return Connection.CONNECTING
        if self.last_event_s is not None and now_s - self.last_event_s <= LIVE_WITHIN_S:
            return Connection.LIVE
        if now_s - self.last_message_s <= SILENT_AFTER_S:
            return Connection.QUIET
        return Connection.SILENT
