"""One interface for where the UI's events come from: a live socket or a recording."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from iket_tui.protocol.messages import Message

if TYPE_CHECKING:
    from iket_tui.sources.checkpoints import Checkpoint


class SourceState(Enum):
    CONNECTING = "connecting"
    LIVE = "live"  # messages flowing (or a replay playing)
    ENDED = "ended"  # the target said bye, the socket closed, or the recording ended
    FAILED = "failed"  # an error ended the source; ``SourceBatch.error`` says what


@dataclass(frozen=True)
class Answer:
    """What came of one :meth:`EventSource.request`: the agent's ``response`` message, or
    ``error``, a one-line reason why none will come (overdue, the target went away)."""

    request_id: int
    response: Message | None = None
    error: str | None = None


@dataclass(frozen=True)
class HostState:
    """One machine of a watch across machines (``attach node1: node2:``): ``lost_at_s`` (on the
    monotonic clock) while its ssh connection is lost and being made again, with ``why``."""

    host: str
    lost_at_s: float | None = None
    why: str = ""


@dataclass(frozen=True)
class SourceBatch:
    """What a source produced since its last batch (about every 30 ms).

    ``state`` is set when the source's state changed; ``error`` is a one-line message when
    it failed; ``notes`` are one-line remarks for the user (a recording cut short, say);
    ``answers`` settle requests this client made (their responses are in ``messages`` too, as
    they are in a recording); ``recording_stopped`` is set once, when recording the stream to
    a file stopped while the stream goes on (the disk is full, say): one line saying why and
    where the file was cut. ``hosts`` is set when a machine of a watch across machines was lost
    or came back: the state of each one.
    """

    messages: tuple[Message, ...] = ()
    state: SourceState | None = None
    error: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    answers: tuple[Answer, ...] = ()
    recording_stopped: str | None = None
    restart: bool = False
    """The stream starts again from its beginning with these messages (a replay jumped back):
    what was built from the messages before them is to be built anew."""
    jumped_to: int | None = None
    """Set on the last batch of a replay's jump: the time (the recording's clock) it jumped to."""
    resumed_from: Checkpoint | None = None
    """On the first batch of a replay's jump that reads on from a checkpoint
    (:class:`~iket_tui.sources.checkpoints.Checkpoint`): its messages follow the checkpoint's
    model, not a new one."""
    hosts: tuple[HostState, ...] | None = None


class EventSource(Protocol):
    """A blocking producer of batches, run on a worker thread; ``close`` may be called from any
    thread and makes ``batches`` return soon."""

    description: str

    def batches(self) -> Iterator[SourceBatch]: ...

    def close(self) -> None: ...

    def request(self, what: str, *, timeout_s: float, **fields: object) -> int:
        """Ask the target for ``what`` (``messages.WHAT_*``, with its fields, or
        :data:`NATIVE_STACKS`, which the source answers itself); returns the request
        id. Exactly one :class:`Answer` for it arrives in a later batch, within ``timeout_s``.
        Raises :class:`SourceError` (one line) when this source cannot be asked at all: a
        recording, or a connection that already ended. May be called from any thread."""
        ...


@runtime_checkable
class PlaybackControl(Protocol):
    """What a replay offers beyond a live source; called from the app thread."""

    @property
    def paused(self) -> bool: ...

    @property
    def speed(self) -> float: ...

    def set_paused(self, paused: bool) -> None: ...

    def step(self) -> None: ...

    def set_speed(self, speed: float) -> None: ...


class SourceError(Exception):
    """A source cannot start or go on; the message is a one-line explanation for the user."""


NOT_LIVE = "a recording cannot be asked: this needs a live target"
"""Why a source that is not a live target refuses :meth:`EventSource.request`."""

NATIVE_STACKS = "native_stacks"
"""A request a live source answers itself, never sending it to the agent: the native stacks of
the process it is connected to, read by py-spy where that process runs (its ``response`` has
``ok``, ``pid``, ``target``, the process in the user's words, and ``text``, py-spy's dump). Only
the process the source verified is read, never a pid given to it. The answer is only in a
batch's ``answers``: the agent said none of it, so neither the stream's messages nor a recording
hold it."""
