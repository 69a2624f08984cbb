"""Messages that cross widgets and screens: what the source's reader thread posts to the app,
and what the app tells the screens once it applied it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from textual.message import Message

from iket_tui.protocol import messages as m
from iket_tui.sources.base import Answer, SourceBatch


class AskTarget(Protocol):
    """Put a request to the target through the app's source; returns its id, whose
    :class:`ResponseArrived` comes later. Raises ``SourceError`` (one line) when it cannot be asked."""

    def __call__(self, what: str, *, timeout_s: float, **fields: object) -> int: ...


@dataclass
class BatchArrived(Message):
    """The source produced a batch; posted from the reader thread, applied on the app's."""

    batch: SourceBatch


@dataclass
class SourceFinished(Message):
    """The source's ``batches()`` returned or raised: nothing more will arrive."""

    error: str | None = None


@dataclass
class SampleRead(Message):
    """The kernel messages of the sample recording, read off the app's thread (``error``: why not)."""

    messages: tuple[m.Message, ...]
    error: str | None = None


@dataclass
class ResponseArrived(Message):
    """A request put through :class:`AskTarget` was settled: the agent answered, or never will."""

    answer: Answer

    def outcome(self, *, unsaid: str) -> tuple[m.Message | None, str]:
        """The agent's answer when it says ``ok``; else ``None`` and why not in one line (the
        agent's error, why no answer came, or ``unsaid`` when neither says)."""
        found = self.answer.response
        if found is None:
            return None, self.answer.error or unsaid
        if not found.get("ok"):
            return None, str(found.get("error") or unsaid)
        return found, ""


class ModelChanged(Message):
    """The app applied a batch to the session, or the clock moved on: screens showing either catch up."""
