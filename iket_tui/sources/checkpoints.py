"""The model's state at points of a recording, so that a replay jumps from the nearest one
before where it goes rather than from the recording's start.

A jump shows what a replay from the start shows at the time jumped to; without these, a jump
back (or far ahead) reads the recording again from its start and applies every message to a new
model: about 1.5 to 2.4 s for 1,000,000 pass events, of which reading and decoding alone take
0.5 s. :class:`ReplayCheckpoints` reads the recording once, on a thread, into a model of its own
made with the replay's settings, and every :data:`EVERY` messages keeps that model pickled (0.08 s
to load the state of 1,000,000 pass events) with where reading stood
(:class:`~iket_tui.sources.reading.ReadPoint`). A jump then loads the latest checkpoint before
the time it goes to and reads on from there: at most :data:`EVERY` messages.

A checkpoint holds every message read before it; it may stand for a jump to ``t`` only when none
of them is stamped later than ``t`` (a replay's jump releases the messages before the first one
stamped later), so each is kept with the newest timestamp read before it.
"""

from __future__ import annotations

import pickle
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from iket_tui.model.session import Session
from iket_tui.protocol import messages as m
from iket_tui.sources.base import SourceError
from iket_tui.sources.reading import CHUNK_SIZE, ReadPoint, RecordingReader

EVERY: Final = 200_000
"""Messages between two checkpoints (at the first chunk of the file read that reaches it)."""
MAX_BYTES: Final = 192 << 20
"""The pickled states kept, at most: past it every other checkpoint is let go, and they are made
half as often from then on."""


@dataclass(frozen=True)
class Checkpoint:
    """The model after the messages of a recording up to a point, and where reading goes on."""

    t_ns: int
    """The newest timestamp among the messages before it."""
    read: ReadPoint
    model: bytes
    """The :class:`~iket_tui.model.session.Session`, pickled."""
    shown: bool
    """Whether a message the UI shows came before it (a replay waits real time only after one)."""
    first_t_ns: int | None
    """The first timestamp of the recording, from which a replay's position is counted."""

    def session(self) -> Session:
        """The model as it stood, a copy of its own."""
        session = pickle.loads(self.model)  # pickled by this process, from a model of its own
        assert isinstance(session, Session)
        return session


class ReplayCheckpoints:
    """Checkpoints of one recording, made by :meth:`build` (on a thread of its own), read by
    :meth:`before` from any thread."""

    def __init__(
        self,
        path: Path,
        make_session: Callable[[], Session],
        *,
        every: int = EVERY,
        max_bytes: int = MAX_BYTES,
        chunk_size: int = CHUNK_SIZE,
    ) -> None:
        """``make_session``: a new model with the replay's settings (its stuck thresholds,
        ranks, bound on passes), so that a checkpoint's model is the replay's own. A checkpoint
        is taken between two chunks of ``chunk_size`` bytes read."""
        self.path = Path(path)
        self._chunk_size = chunk_size
        self._make_session = make_session
        self._every = every
        self._max_bytes = max_bytes
        self._lock = threading.Lock()
        self._points: list[Checkpoint] = []
        self._closed = False
        self.done = False
        """The whole recording was read (or reading it stopped: :attr:`error` says why)."""
        self.error: str | None = None

    @property
    def count(self) -> int:
        return len(self._points)

    @property
    def kept_bytes(self) -> int:
        """The pickled states kept."""
        with self._lock:
            return sum(len(point.model) for point in self._points)

    def close(self) -> None:
        """Stop :meth:`build` at its next chunk."""
        self._closed = True

    def before(self, t_ns: int) -> Checkpoint | None:
        """The latest checkpoint a jump to ``t_ns`` may start from, if there is one."""
        with self._lock:
            found = [point for point in self._points if point.t_ns <= t_ns]
        return found[-1] if found else None

    def start_for(self, t_ns: int, here: int | None) -> Checkpoint | None:
        """Where a jump to ``t_ns`` from ``here`` (where the replay stands; None: nothing
        played yet) reads on from: the latest checkpoint before ``t_ns``, unless going on from
        where the replay stands reads less (a jump forwards, short of the next checkpoint)."""
        point = self.before(t_ns)
        if point is None or (here is not None and here <= t_ns and point.t_ns <= here):
            return None
        return point

    def build(self) -> None:
        """Read the recording once, applying it to a model of its own, keeping a checkpoint
        every :data:`EVERY` messages. Blocks until the file is read or :meth:`close` is called."""
        reader = RecordingReader(self.path, rows=True, chunk_size=self._chunk_size)
        session = self._make_session()
        newest: int | None = None
        first: int | None = None
        shown = False
        since = 0
        try:
            for chunk in reader.chunks():
                if self._closed:
                    return
                session.apply(chunk)
                for item in chunk:
                    t = item[8] if type(item) is list else m.t_ns_of(item)
                    if type(t) is int and t > 0:
                        if first is None:
                            first = t
                        if newest is None or t > newest:
                            newest = t
                shown = shown or any(shown_in_replay(item) for item in chunk)
                since += len(chunk)
                if since >= self._every and newest is not None:
                    model = pickle.dumps(session, protocol=pickle.HIGHEST_PROTOCOL)
                    self._keep(Checkpoint(newest, reader.point(), model, shown, first))
                    since = 0
        except SourceError as exc:
            self.error = str(exc)
        except (pickle.PicklingError, TypeError, AttributeError, RecursionError) as exc:
            self.error = f"the model could not be kept: {exc}"
        finally:
            self.done = True

    def _keep(self, point: Checkpoint) -> None:
        with self._lock:
            self._points.append(point)
            if sum(len(kept.model) for kept in self._points) > self._max_bytes:
                self._points = self._points[::-1][::2][::-1]  # the latest stays
                self._every *= 2


_LEAD_IN: Final = frozenset({m.HELLO, m.HEARTBEAT, m.SYNC, m.DROPPED, m.RECORDING, m.CHECKPOINT, m.PROCESS})
"""What a program sends before it does anything the UI shows (its compiles, kernels, exit)."""


def shown_in_replay(item: m.Item) -> bool:
    """Whether the UI shows something of ``item``: a replay waits real time only from the first
    such message on, so the seconds a program took to import and reach its first compile pass
    at once."""
    return isinstance(item, list) or str(item.get("type")) not in _LEAD_IN
