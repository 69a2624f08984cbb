"""Where a replay's jump keys lead: the next or previous mark of a kind on the recording's
timeline, and back to where the replay stood before the last jump."""

from __future__ import annotations

from dataclasses import dataclass

from iket_tui.sources.timeline import Mark, MarkKind, RecordingTimeline

BACK_KEPT = 100
"""Jumps remembered for going back."""


@dataclass(frozen=True)
class JumpKey:
    """One jump action: the marks it goes to, forwards or backwards, and its words."""

    kinds: tuple[MarkKind, ...]
    forward: bool
    words: str


JUMPS: dict[str, JumpKey] = {
    "next_failure": JumpKey((MarkKind.FAILURE,), True, "failure"),
    "previous_failure": JumpKey((MarkKind.FAILURE,), False, "failure"),
    "next_stuck": JumpKey((MarkKind.STUCK,), True, "stuck pass"),
    "previous_stuck": JumpKey((MarkKind.STUCK,), False, "stuck pass"),
    "next_quiet": JumpKey((MarkKind.QUIET,), True, "quiet warp"),
    "previous_quiet": JumpKey((MarkKind.QUIET,), False, "quiet warp"),
    "next_process": JumpKey((MarkKind.PROCESS,), True, "process event"),
    "previous_process": JumpKey((MarkKind.PROCESS,), False, "process event"),
    "next_compile": JumpKey((MarkKind.COMPILE,), True, "compile"),
    "previous_compile": JumpKey((MarkKind.COMPILE,), False, "compile"),
}
"""The jump actions, by the name the app's bindings give them (``jump('next_failure')``)."""


class ReplayJumps:
    """The marks a replay jumps between, once its timeline is read, and the way back."""

    def __init__(self) -> None:
        self.timeline: RecordingTimeline | None = None
        self._back: list[int] = []

    def target(self, jump: JumpKey, position_ns: int) -> Mark | None:
        """The mark ``jump`` leads to from ``position_ns``; None when there is none that way."""
        timeline = self.timeline
        if timeline is None:
            return None
        if jump.forward:
            return timeline.next_mark(jump.kinds, position_ns)
        return timeline.previous_mark(jump.kinds, position_ns)

    def leave(self, position_ns: int) -> None:
        """The replay jumps away from ``position_ns``: remember it for :meth:`back`."""
        self._back.append(position_ns)
        del self._back[:-BACK_KEPT]

    def back(self) -> int | None:
        """Where the replay stood before its last jump, forgotten once gone back to."""
        return self._back.pop() if self._back else None

    def none_said(self, jump: JumpKey) -> str:
        """Why a jump key did nothing, in one line."""
        if self.timeline is None:
            return "the recording's timeline is still being read"
        return f"no {jump.words} {'after' if jump.forward else 'before'} this point of the recording"
