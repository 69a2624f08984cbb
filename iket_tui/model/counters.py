"""What the stream itself says about loss and health, as counts."""

from __future__ import annotations


class StreamCounters:
    """Counts a user needs to trust what the tree shows.

    ``events`` are compile and pass messages (not session traffic such as heartbeats);
    ``dropped`` is the largest loss count the agent or recorder reported for this client;
    ``unknown`` messages had a type this version does not know; ``malformed`` ones had
    missing keys or fields of the wrong type; ``backlog_lost`` events were too old for the
    catch-up a late client receives; ``observer_errors`` are failures the agent caught in its
    own observers (from its heartbeats: events that may be missing or incomplete);
    ``filtered_passes`` were left out by this client's ``--passes``/``--depth`` filter (asked
    for, not lost); ``reconnections`` count the times the agent came back after a gap.
    """

    __slots__ = (
        "backlog",
        "backlog_lost",
        "dropped",
        "events",
        "filtered_passes",
        "heartbeats",
        "malformed",
        "observer_errors",
        "open_passes",
        "produced",
        "reconnections",
        "unknown",
    )

    def __init__(self) -> None:
        self.events = 0
        self.heartbeats = 0
        self.dropped = 0
        self.unknown = 0
        self.malformed = 0
        self.backlog = 0
        self.backlog_lost = 0
        self.produced = 0  # events produced in the target, from its heartbeats
        self.open_passes = 0  # passes open in the target, from its heartbeats
        self.observer_errors = 0
        self.filtered_passes = 0
        self.reconnections = 0

    def saw_dropped(self, total: int) -> None:
        if total > self.dropped:
            self.dropped = total

    def saw_filtered(self, total: object) -> None:
        """The agent's count of passes this client's filter left out (it only grows)."""
        if type(total) is int and total > self.filtered_passes:
            self.filtered_passes = total
