"""What the stream itself says about loss and health, as counts."""

from __future__ import annotations


class StreamCounters:
    """Counts a user needs to trust what the tree shows.

    ``events`` are compile and pass messages (not session traffic such as heartbeats);
    ``dropped`` is what the agent reported lost for this client, over all of its connections
    to the process (each connection's reports are running totals that start again at 0);
    ``unknown`` messages had a type this version does not know; ``malformed`` ones had
    missing keys or fields of the wrong type; ``backlog_lost`` events were too old for the
    catch-up a late client receives; ``observer_errors`` are failures the agent caught in its
    own observers (from its heartbeats: events that may be missing or incomplete);
    ``filtered_passes`` were left out by this client's ``--passes``/``--depth`` filter (asked
    for, not lost; counted over all connections as ``dropped`` is); ``reconnections`` count
    the times the agent came back after a gap.
    """

    __slots__ = (
        "_dropped_before",
        "_filtered_before",
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
        self._dropped_before = 0  # what earlier connections to the process reported
        self._filtered_before = 0

    def reconnected(self) -> None:
        """The agent again, on a new connection (docs/protocol.md "Reconnecting"): its running
        totals for this client start again from 0, and what the earlier ones reported stays."""
        self.reconnections += 1
        self._dropped_before = self.dropped
        self._filtered_before = self.filtered_passes

    def saw_dropped(self, total: int) -> None:
        """The agent's running total of events dropped for this connection."""
        total += self._dropped_before
        if total > self.dropped:
            self.dropped = total

    def saw_dropped_in_all(self, total: int) -> None:
        """A recorder's count of events dropped over the whole stream (a ``checkpoint``): a
        floor for what the reports it saw add up to, where some of them were lost."""
        if total > self.dropped:
            self.dropped = total

    def saw_filtered(self, total: object) -> None:
        """The agent's running total of passes this connection's filter left out."""
        if type(total) is int and total + self._filtered_before > self.filtered_passes:
            self.filtered_passes = total + self._filtered_before
