"""Messages that cross widgets: what the source reader thread posts to the app."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from iket_tui.sources.base import SourceBatch


@dataclass
class BatchArrived(Message):
    """The source produced a batch; posted from the reader thread, applied on the app's."""

    batch: SourceBatch


@dataclass
class SourceFinished(Message):
    """The source's ``batches()`` returned or raised: nothing more will arrive."""

    error: str | None = None
