"""Asking a live target's agent for something and waiting for the answer, for a command that
has nothing else to do meanwhile (``request`` and ``response`` messages, docs/protocol.md
"Requests")."""

from __future__ import annotations

from iket_tui.protocol import messages as m
from iket_tui.sources.base import SourceError, SourceState
from iket_tui.sources.socket import DEFAULT_REQUEST_TIMEOUT_S, SocketSource

DEFAULT_TIMEOUT_S = DEFAULT_REQUEST_TIMEOUT_S


def ask(source: SocketSource, what: str, timeout_s: float = DEFAULT_TIMEOUT_S, **fields: object) -> m.Message:
    """Send one request on a connected source and read its stream until the answer comes.
    Raises :class:`SourceError` with a one-line reason when none comes."""
    request_id = source.request(what, timeout_s=timeout_s, **fields)
    for batch in source.batches():
        for answer in batch.answers:
            if answer.request_id != request_id:
                continue
            if answer.response is not None:
                return answer.response
            raise SourceError(answer.error or f"{source.who} did not answer")
        if batch.state in (SourceState.ENDED, SourceState.FAILED):
            break
    raise SourceError(source.error or f"{source.who} did not answer within {timeout_s:g} s")
