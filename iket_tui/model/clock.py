"""The agent's clock as seen from here: its ``t_ns`` values mapped onto local time."""

from __future__ import annotations


class AgentClock:
    """Estimates the agent's monotonic time now from the latest ``t_ns`` seen and the local
    time it arrived, so running passes tick between messages. In a replay ``rate`` is the
    playback speed and a paused replay is ``frozen`` at its position. Never runs backwards."""

    __slots__ = ("_agent_ns", "_last_ns", "_local_s")

    def __init__(self) -> None:
        self._agent_ns: int | None = None
        self._local_s = 0.0
        self._last_ns = 0

    def observe(self, agent_ns: int, local_s: float) -> None:
        """The agent's time was ``agent_ns`` when local time was ``local_s``."""
        if self._agent_ns is None or agent_ns >= self._agent_ns:
            self._agent_ns = agent_ns
            self._local_s = local_s

    def now_ns(self, local_s: float, *, rate: float = 1.0, frozen: bool = False) -> int:
        if self._agent_ns is None:
            return self._last_ns
        now = self._agent_ns
        if not frozen:
            now += int(max(0.0, local_s - self._local_s) * rate * 1e9)
        self._last_ns = max(self._last_ns, now)
        return self._last_ns
