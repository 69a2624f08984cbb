"""Asking a live target's agent for something and waiting for the answer (``request`` and
``response`` messages, docs/protocol.md "Requests")."""

from __future__ import annotations

import threading

from iket_tui.protocol import messages as m
from iket_tui.sources.base import SourceError, SourceState
from iket_tui.sources.socket import SocketSource

DEFAULT_TIMEOUT_S = 10.0


def ask(source: SocketSource, what: str, timeout_s: float = DEFAULT_TIMEOUT_S, **fields: object) -> m.Message:
    """Send one request on a connected source and read its stream until the answer comes."""
    request_id = source.request(what, **fields)
    timer = threading.Timer(timeout_s, source.close, args=("no answer in time",))
    timer.start()
    try:
        for batch in source.batches():
            found = source.responses.get(request_id)
            if found is not None:
                return found
            if batch.state in (SourceState.ENDED, SourceState.FAILED):
                break
    finally:
        timer.cancel()
    found = source.responses.get(request_id)
    if found is not None:
        return found
    if source.error:
        raise SourceError(source.error)
    raise SourceError(f"{source.who} did not answer within {timeout_s:g} s (an agent older than this iket-tui?)")
