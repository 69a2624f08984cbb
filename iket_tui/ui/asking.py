"""A question put to a live target's agent from a screen, and the wait for its answer.

The source sends the request and files the answer under its id as it reads the stream; a
screen polls :meth:`Question.answer` from a timer, so nothing waits on the app's thread.
"""

from __future__ import annotations

from dataclasses import dataclass

from iket_tui.protocol import messages as m
from iket_tui.sources.base import EventSource, SourceError

POLL_S = 0.1


class NotAsked(Exception):
    """The question could not be put; the message says why in one line."""


@dataclass
class Question:
    """One request in flight: ``answer()`` is None until it came, raises once it is overdue."""

    source: EventSource
    request_id: int
    wait_s: float
    waited_s: float = 0.0

    @classmethod
    def ask(cls, source: EventSource, what: str, *, wait_s: float, **fields: object) -> Question:
        request = getattr(source, "request", None)
        if request is None:
            raise NotAsked("a recording cannot be asked: this needs a live target")
        try:
            return cls(source, request(what, **fields), wait_s)
        except SourceError as exc:
            raise NotAsked(str(exc)) from None

    def answer(self) -> m.Message | None:
        """The answer if it came (once); None while waiting; :class:`NotAsked` when overdue."""
        responses: dict[int, m.Message] = getattr(self.source, "responses", {})
        found = responses.pop(self.request_id, None)
        if found is not None:
            return found
        self.waited_s += POLL_S
        if self.waited_s >= self.wait_s:
            raise NotAsked(f"no answer within {self.wait_s:g} s (is the target still running the agent?)")
        return None
