"""In-memory stand-ins for the sources and the clock, so UI tests control every input."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping

from textual.screen import Screen

from iket_tui.protocol.messages import Message
from iket_tui.sources.base import NOT_LIVE, Answer, SourceBatch, SourceError, SourceState
from iket_tui.ui.messages import ResponseArrived


class FrozenClock:
    """Local time that moves only when a test moves it."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class FakeSource:
    """An EventSource yielding prepared batches, then (unless ``stay_open``) ending.

    ``feed`` hands it more batches while the app runs; ``close`` ends ``batches`` promptly.
    """

    def __init__(
        self, batches: Iterable[SourceBatch] = (), *, description: str = "pid 4242", stay_open: bool = False
    ) -> None:
        self.description = description
        self._pending: list[SourceBatch] = list(batches)
        self._stay_open = stay_open
        self._wake = threading.Condition()
        self._closed = False
        self.closed = threading.Event()
        self.delivered = threading.Event()  # set whenever the pending list runs empty

    def feed(self, *batches: SourceBatch) -> None:
        with self._wake:
            self._pending.extend(batches)
            self.delivered.clear()
            self._wake.notify_all()

    def finish(self) -> None:
        """Stop staying open: ``batches`` ends after what is pending."""
        with self._wake:
            self._stay_open = False
            self._wake.notify_all()

    def batches(self) -> Iterator[SourceBatch]:
        while True:
            with self._wake:
                while not self._pending and self._stay_open and not self._closed:
                    self.delivered.set()
                    self._wake.wait(0.05)
                if self._closed or not self._pending:
                    self.delivered.set()
                    return
                batch = self._pending.pop(0)
            yield batch

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify_all()
        self.closed.set()

    def request(self, what: str, *, timeout_s: float, **fields: object) -> int:
        raise SourceError(NOT_LIVE)


class FakeReplay(FakeSource):
    """A FakeSource that also offers PlaybackControl and records what it was asked."""

    def __init__(self, batches: Iterable[SourceBatch] = (), **kwargs: object) -> None:
        super().__init__(batches, description="replay demo.msgpack", **kwargs)  # type: ignore[arg-type]
        self._paused = False
        self._speed = 1.0
        self.steps = 0

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def speed(self) -> float:
        return self._speed

    def set_paused(self, paused: bool) -> None:
        self._paused = paused

    def step(self) -> None:
        self.steps += 1

    def set_speed(self, speed: float) -> None:
        self._speed = speed


class AnsweringTarget:
    """An ``AskTarget`` with prepared answers, for a screen tested without a source: each
    request is settled by posting :class:`ResponseArrived` to ``screen``, as the app does with
    the answers a source delivers. A ``what`` without an answer is never answered."""

    def __init__(self, answers: Mapping[str, Message]) -> None:
        self.answers = dict(answers)
        self.requests: list[Message] = []
        self.screen: Screen[None] | None = None

    def __call__(self, what: str, *, timeout_s: float, **fields: object) -> int:
        self.requests.append({"what": what, **fields})
        request_id = len(self.requests)
        answer = self.answers.get(what)
        if answer is not None and self.screen is not None:
            response = {**answer, "id": request_id}
            self.screen.post_message(ResponseArrived(Answer(request_id, response=response)))
        return request_id


def batch(messages: Iterable[Message], *, state: SourceState | None = None, error: str | None = None) -> SourceBatch:
    return SourceBatch(messages=tuple(messages), state=state, error=error)
