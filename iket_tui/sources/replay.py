"""A recording played back as a live source: paced by its timestamps, with pause, step and speed.

Messages are released when the playback clock reaches their ``t_ns`` (scaled by the speed);
speed 0 plays as fast as the reader goes. What comes before the first message the UI shows
(a hello, heartbeats: a program importing its modules) is released at once, so a replay starts
with the first compile rather than seconds of an empty tree. Messages without a timestamp, or with one earlier
than the clock, are released at once. Pass events batched as pass rows are handed out as rows
(see :mod:`iket_tui.protocol.messages`), so a replay builds no map per pass event.

A replay can jump (:meth:`RecordingSource.seek`): to a later time by releasing every message
up to it at once, to an earlier one by reading the file again from its start at full speed, in
a batch marked ``restart``, after which the model is built anew. Either way the messages
released are exactly those a replay from the start releases before the first message stamped
later than that time, so what is shown there is what a replay from the start shows.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Literal, cast

from iket_tui.protocol import messages as m
from iket_tui.sources.base import NOT_LIVE, SourceBatch, SourceError, SourceState
from iket_tui.sources.checkpoints import Checkpoint, shown_in_replay
from iket_tui.sources.reading import RecordingInfo, RecordingReader, read_recording, recording_notes

__all__ = ["RecordingInfo", "RecordingSource", "read_recording"]

_MAX_BATCH = 20_000
_IDLE_WAIT_S = 0.5


class RecordingSource:
    """An :class:`~iket_tui.sources.base.EventSource` and
    :class:`~iket_tui.sources.base.PlaybackControl` over one recording file.

    ``speed`` 0 or ``"max"`` plays as fast as the file is read. :meth:`open` may be called
    first to report an unreadable file before any UI starts.
    """

    def __init__(
        self,
        path: Path,
        *,
        speed: float | Literal["max"] = 1.0,
        start_paused: bool = False,
        batch_interval_s: float = 0.03,
        seekable: bool = False,
    ) -> None:
        """``seekable``: the replay waits at the end of the file for a :meth:`seek` or
        :meth:`close`, rather than ending its batches there (the UI's replay)."""
        self.path = Path(path)
        self.description = f"recording {self.path}"
        self.error: str | None = None
        self._reader = RecordingReader(self.path, rows=True)
        self._chunks: Iterator[list[m.Item]] | None = None
        self._buffer: deque[m.Item] = deque()
        self._batch_interval_s = batch_interval_s
        self._cond = threading.Condition()
        self._speed = 0.0 if speed == "max" else max(0.0, float(speed))
        self._paused = start_paused
        self._steps = 0
        self._closed = False
        self._clock_t_ns: int | None = None
        self._clock_wall = time.monotonic()
        self._seekable = seekable
        self._seek_to: int | None = None  # a jump asked for and not yet made
        self._seek_from: Checkpoint | None = None  # where that jump starts reading, if not from here
        self._released_t_ns: int | None = None  # the newest timestamp released
        self._shown_anything = False  # whether a message the UI shows has been released yet
        self._at_end = False

    @property
    def info(self) -> RecordingInfo:
        return self._reader.info

    def request(self, what: str, *, timeout_s: float, **fields: object) -> int:
        """A recording holds what was said; it cannot be asked anything new."""
        raise SourceError(NOT_LIVE)

    # -- PlaybackControl ------------------------------------------------------------------

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def speed(self) -> float:
        """Playback speed; 0 means as fast as possible."""
        return self._speed

    def set_paused(self, paused: bool) -> None:
        with self._cond:
            if paused == self._paused:
                return
            self._clock_t_ns = self._clock_now()
            self._clock_wall = time.monotonic()
            self._paused = paused
            self._steps = 0
            self._cond.notify_all()

    def step(self) -> None:
        """While paused, release the next message."""
        with self._cond:
            if self._paused:
                self._steps += 1
                self._cond.notify_all()

    def set_speed(self, speed: float) -> None:
        with self._cond:
            self._clock_t_ns = self._clock_now()
            self._clock_wall = time.monotonic()
            self._speed = max(0.0, speed)
            self._cond.notify_all()

    def seek(self, t_ns: int, start: Checkpoint | None = None) -> None:
        """Jump to the recording's time ``t_ns`` (its own clock): the next batches hold every
        message a replay from the start releases before the first one stamped later, and
        playback goes on from there at its speed, or stays paused. From ``start``, a checkpoint
        of the recording no later than ``t_ns``, they hold only the messages after it: the
        first batch says it (``restart``, ``resumed_from``), and whoever applies them starts
        from the checkpoint's model. May be called from any thread."""
        with self._cond:
            self._seek_to = t_ns
            self._seek_from = start
            self._cond.notify_all()

    @property
    def seekable(self) -> bool:
        """Whether the replay waits at its end for a jump rather than ending (the UI's replay)."""
        return self._seekable

    @property
    def position_t_ns(self) -> int | None:
        """The newest timestamp released so far: where the replay stands."""
        return self._released_t_ns

    # -- EventSource ----------------------------------------------------------------------

    def open(self) -> m.Item:
        """Read up to the recording's first message (its header, unless that was damaged);
        returns it. Raises :class:`SourceError`."""
        if self._chunks is None:
            self._chunks = self._reader.chunks()
        if not self._fill():
            raise SourceError(f"{self.path}: no complete frame in this recording")
        if self.info.source:  # the reader found the header (a damaged one leaves it empty)
            self.description = f"recording {self.path.name} of {self.info.source}"
        return self._buffer[0]

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def batches(self) -> Iterator[SourceBatch]:
        try:
            self.open()
        except SourceError as exc:
            self.error = str(exc)
            yield SourceBatch(state=SourceState.FAILED, error=self.error)
            return
        yield SourceBatch(state=SourceState.LIVE)
        pending: list[m.Item] = []
        flush_at = 0.0
        while not self._closed:
            with self._cond:
                seek, self._seek_to = self._seek_to, None
                start, self._seek_from = self._seek_from, None
            try:
                if seek is not None:
                    if pending:
                        yield SourceBatch(messages=_batched(pending))
                        pending = []
                    yield from self._jump(seek, start)
                    continue
                if self._at_end:
                    self._sleep(math.inf)
                    continue
                more = self._fill()
            except SourceError as exc:
                self.error = str(exc)
                if pending:
                    yield SourceBatch(messages=_batched(pending))
                yield SourceBatch(state=SourceState.FAILED, error=self.error)
                return
            if not more:
                notes = recording_notes(self.info, verb="replayed")
                yield SourceBatch(messages=_batched(pending), state=SourceState.ENDED, notes=notes)
                if not self._seekable:
                    return
                pending = []
                self._at_end = True
                continue
            had_pending = bool(pending)
            wait = self._release(pending)
            if not pending:
                self._sleep(wait)
                continue
            now = time.monotonic()
            if not had_pending:
                flush_at = now + self._batch_interval_s
            if wait > 0 or len(pending) >= _MAX_BATCH or now >= flush_at:
                yield SourceBatch(messages=_batched(pending))
                pending = []

    # -- jumps ----------------------------------------------------------------------------

    def _jump(self, t_ns: int, start: Checkpoint | None = None) -> Iterator[SourceBatch]:
        """The batches of a jump to ``t_ns``: from ``start`` when given, else from where the
        replay stands when that is later, else from the file's start; the first batch marked
        ``restart`` unless the replay goes on from where it stands."""
        if start is not None and start.t_ns > t_ns:
            start = None  # holds messages stamped after where the jump goes: not from there
        restart = start is not None or (self._released_t_ns is not None and t_ns < self._released_t_ns)
        if restart:
            self._reader = RecordingReader(self.path, rows=True, start=None if start is None else start.read)
            self._chunks = self._reader.chunks()
            self._buffer.clear()
            self._released_t_ns = None if start is None else start.t_ns
            self._shown_anything = start is not None and start.shown
            self._at_end = False
        skipped = 0 if restart else self.info.skipped_bytes  # a checkpoint's reader counts what came before it
        buffer = self._buffer
        out: list[m.Item] = []
        first = True
        while buffer or self._fill():
            items = list(buffer)
            buffer.clear()
            cut, newest = _due(items, t_ns)
            released = items[:cut] if cut < len(items) else items
            out += released
            if not self._shown_anything:
                self._shown_anything = any(shown_in_replay(item) for item in released)
            if newest is not None and (self._released_t_ns is None or newest > self._released_t_ns):
                self._released_t_ns = newest
            if cut < len(items):
                buffer.extend(items[cut:])
                break
            if len(out) >= _MAX_BATCH:
                yield SourceBatch(
                    messages=_batched(out), restart=restart and first, resumed_from=start if first else None
                )
                out, first = [], False
        with self._cond:
            self._clock_t_ns = t_ns
            self._clock_wall = time.monotonic()
            self._steps = 0
        skipped = self.info.skipped_bytes - skipped
        notes = (f"the jump passed over {skipped} damaged bytes: what they held is not shown",) if skipped else ()
        state = SourceState.LIVE if restart else None
        yield SourceBatch(
            messages=_batched(out),
            restart=restart and first,
            resumed_from=start if first else None,
            state=state,
            notes=notes,
            jumped_to=t_ns,
        )

    # -- pacing ---------------------------------------------------------------------------

    def _release(self, pending: list[m.Item]) -> float:
        """Move due messages from the buffer to ``pending``; seconds until the next is due."""
        buffer = self._buffer
        with self._cond:
            if not self._paused and self._speed == 0:
                room = _MAX_BATCH - len(pending)
                if room >= len(buffer):
                    pending.extend(buffer)
                    buffer.clear()
                else:
                    pending.extend(buffer.popleft() for _ in range(room))
                for msg in reversed(pending):
                    t_ns = _t_ns(msg)
                    if t_ns is not None:
                        self._advance(t_ns)
                        break
                return 0.0
            while buffer:
                t_ns = _t_ns(buffer[0])
                if self._paused:
                    if self._steps == 0:
                        return math.inf
                    self._steps -= 1
                else:
                    clock = self._clock_now()
                    if t_ns is not None and clock is not None and t_ns > clock:
                        context = self.info.context_until_ns  # a cut: its context before its stretch
                        if self._shown_anything and (context is None or t_ns > context):
                            return (t_ns - clock) / 1e9 / self._speed
                        self._clock_t_ns, self._clock_wall = t_ns, time.monotonic()  # nothing to wait for
                self._advance(t_ns)
                self._shown_anything = self._shown_anything or shown_in_replay(buffer[0])
                pending.append(buffer.popleft())
                if len(pending) >= _MAX_BATCH:
                    return 0.0
            return 0.0

    def _advance(self, t_ns: int | None) -> None:
        """The clock reaches a released message's time (first timestamp, a step, max speed)."""
        if t_ns is None:
            return
        if self._released_t_ns is None or t_ns > self._released_t_ns:
            self._released_t_ns = t_ns
        if self._clock_t_ns is None or self._paused or self._speed == 0:
            if self._clock_t_ns is None or t_ns > self._clock_t_ns:
                self._clock_t_ns = t_ns
            self._clock_wall = time.monotonic()

    def _clock_now(self) -> int | None:
        if self._clock_t_ns is None or self._paused or self._speed == 0:
            return self._clock_t_ns
        return self._clock_t_ns + int((time.monotonic() - self._clock_wall) * 1e9 * self._speed)

    def _sleep(self, seconds: float) -> None:
        with self._cond:
            if not self._closed:
                self._cond.wait(min(seconds, _IDLE_WAIT_S))

    def _fill(self) -> bool:
        """At least one message buffered, reading more of the file if needed; ``False`` at its end."""
        assert self._chunks is not None
        while not self._buffer:
            batch = next(self._chunks, None)
            if batch is None:
                return False
            self._buffer.extend(batch)
        return True


def _due(items: list[m.Item], t_ns: int) -> tuple[int, int | None]:
    """How many of ``items`` come before the first one stamped later than ``t_ns``, and the
    newest timestamp among those. The hot loop of a jump: a pass row's time is read in place."""
    newest: int | None = None
    for index, item in enumerate(items):
        t = item[8] if type(item) is list else item.get("t_ns")  # type: ignore[union-attr]
        if type(t) is int and t > 0:
            if t > t_ns:
                return index, newest
            if newest is None or t > newest:
                newest = t
    return len(items), newest


def _t_ns(item: m.Item) -> int | None:
    t_ns = m.t_ns_of(item)
    return t_ns if t_ns is not None and t_ns > 0 else None


def _batched(items: list[m.Item]) -> tuple[m.Message, ...]:
    """``items`` for a :class:`SourceBatch`, whose messages may be pass rows as well as maps."""
    return cast("tuple[m.Message, ...]", tuple(items))
