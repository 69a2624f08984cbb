"""Where things happen in a recording: its start and end, and the times of its compiles,
failures, stuck passes, quiet warps and process events, found as the recording is written (its
index) or by one read of the file.

Either way the stream goes through the model as a replay from the start does, so that a stuck
pass or a quiet warp is marked where the UI would call it so: at the first heartbeat or
checkpoint (about one a second) at which the model says it is. A replay jumps to these times
(:meth:`~iket_tui.sources.replay.RecordingSource.seek`); the timeline bar draws them.

The index: after each checkpoint, and before the end frame, the recorder writes an ``index``
frame with the marks found since the previous one, the checkpoint's time and byte offset, and
the byte offset of the previous ``index`` frame. A reader reads the file's last frames, follows
that chain back to the first, and checks every step; anything it cannot trust (no end frame, a
damaged or lying frame, other thresholds) sends it to the scan.
"""

from __future__ import annotations

import bisect
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, BinaryIO

from iket_tui.model.nodes import PassNode
from iket_tui.model.session import Session
from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import ProtocolError, decode_body, encode_message
from iket_tui.protocol.frames import HEADER, HEADER_SIZE, MAX_FRAME_BODY, FrameDecoder
from iket_tui.protocol.recording import MAGIC
from iket_tui.sources.reading import RecordingReader


class MarkKind(StrEnum):
    """What a mark on the timeline is, in the user's words."""

    COMPILE = "compile"
    FAILURE = "failure"
    STUCK = "stuck pass"
    QUIET = "quiet warp"
    PROCESS = "process event"


@dataclass(frozen=True, order=True)
class Mark:
    """One moment worth jumping to: ``t_ns`` on the recording's clock, and what happened."""

    t_ns: int
    kind: MarkKind = field(compare=False)
    what: str = field(compare=False)


@dataclass(frozen=True)
class RecordingTimeline:
    """A recording's span on its own clock and its marks, in time order; from its index, also
    ``places``: ``(t_ns, offset)`` of its checkpoints in time order, where reading may begin."""

    start_ns: int
    end_ns: int
    marks: tuple[Mark, ...] = ()
    places: tuple[tuple[int, int], ...] = ()

    def place_before(self, t_ns: int) -> tuple[int, int] | None:
        """The last checkpoint at or before ``t_ns``: its time and the byte offset of its frame
        (None without an index, or before the first)."""
        at = bisect.bisect_right(self.places, (t_ns, 1 << 62))
        return self.places[at - 1] if at else None

    @property
    def length_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)

    def seconds(self, t_ns: int) -> float:
        """``t_ns`` as seconds from the recording's start, as dump's time column reads."""
        return (t_ns - self.start_ns) / 1e9

    def next_mark(self, kinds: Iterable[MarkKind], after_ns: int) -> Mark | None:
        """The first mark of one of ``kinds`` later than ``after_ns``."""
        wanted = frozenset(kinds)
        times = [mark.t_ns for mark in self.marks]
        for mark in self.marks[bisect.bisect_right(times, after_ns) :]:
            if mark.kind in wanted:
                return mark
        return None

    def previous_mark(self, kinds: Iterable[MarkKind], before_ns: int) -> Mark | None:
        """The last mark of one of ``kinds`` earlier than ``before_ns``."""
        wanted = frozenset(kinds)
        times = [mark.t_ns for mark in self.marks]
        for mark in reversed(self.marks[: bisect.bisect_left(times, before_ns)]):
            if mark.kind in wanted:
                return mark
        return None


PASSES_KEPT = 100_000
"""Passes the reading's own model keeps (the oldest finished compiles summarised past it): it is
asked only what runs at each beat, and should not hold a second copy of a long recording's tree
beside the replay's."""
KERNEL_EVENTS_KEPT = 100_000
"""Kernel events the reading's own model keeps: a launch's quiet warps are known from its
progress, which it keeps when its events are let go, so a recorder writing the index holds no
second copy of a long session's kernel events."""
_PASSES = m.PASS_EVENTS
_SAMPLED = frozenset({m.HEARTBEAT, m.CHECKPOINT, m.END, m.BYE})
"""Messages at which the model is asked what is stuck or quiet: the recording's steady beats."""


class TimelineBuilder:
    """Marks where things happen in a stream fed to it in order, as a replay's model would see
    them: what :func:`scan_timeline` finds by reading a recording, and what a recorder finds as it
    writes one (into the recording's index)."""

    def __init__(self, *, stuck_after_ns: int | None = None, kernel_stuck_after_ns: int | None = None) -> None:
        """``stuck_after_ns`` and ``kernel_stuck_after_ns``: the UI's thresholds for a stuck pass
        and a quiet warp (the model's defaults when None)."""
        if stuck_after_ns is None:
            session = Session(max_passes=PASSES_KEPT, max_kernel_events=KERNEL_EVENTS_KEPT)
        else:
            session = Session(
                stuck_after_ns=stuck_after_ns, max_passes=PASSES_KEPT, max_kernel_events=KERNEL_EVENTS_KEPT
            )
        if kernel_stuck_after_ns is not None:
            session.kernels.stuck_after_ns = kernel_stuck_after_ns
        self._session = session
        self.marks: list[Mark] = []
        """Every mark so far, in the order found (not yet in time order)."""
        self.start_ns: int | None = None
        self.end_ns = 0
        self._stuck: set[PassNode] = set()
        self._quiet: set[Any] = set()
        self._names: dict[tuple[Any, Any], str] = {}  # (process, compile): what its compile_begin named it
        self._process: Any = None

    @property
    def stuck_after_ns(self) -> int:
        return self._session.tree.stuck_after_ns

    @property
    def kernel_stuck_after_ns(self) -> int:
        return self._session.kernels.stuck_after_ns

    def feed(self, chunk: Sequence[m.Item]) -> None:
        """Take the next messages and pass rows of the stream, in order."""
        session = self._session
        marks = self.marks
        names = self._names
        start = self.start_ns
        end = self.end_ns
        applied = 0
        for index, item in enumerate(chunk):
            if isinstance(item, list):  # a pass row: marked, if stuck, at the next beat
                t = item[8]
                if type(t) is int and t > end:
                    end = t
                    if start is None and t > 0:
                        start = t
                continue
            if type(item) is not dict:
                continue
            t = item.get("t_ns")
            if type(t) is not int or t <= 0:
                continue
            if start is None:
                start = t
            end = max(end, t)
            kind = item.get("type")
            if kind in _PASSES:  # a pass event as a map: as a row, marked at the next beat
                continue
            if kind == m.PROCESS or (kind == m.HELLO and self._process is None):
                self._process = item.get("pid")
            elif kind == m.COMPILE_BEGIN:
                names[(self._process, item.get("compile"))] = _name(item)
            mark = _mark_of(item, kind, t, names.get((self._process, item.get("compile"))))
            if mark is not None:
                marks.append(mark)
            if kind in _SAMPLED:
                session.apply(chunk[applied : index + 1])
                applied = index + 1
                _sample(session, t, marks, self._stuck, self._quiet)
        session.apply(chunk[applied:] if applied else chunk)
        self.start_ns = start
        self.end_ns = end

    def finish(self) -> RecordingTimeline:
        """The timeline of the stream fed so far, as at its end (a last look at what is stuck or
        quiet by its latest time)."""
        if self.start_ns is None:
            return RecordingTimeline(0, 0, ())
        _sample(self._session, self.end_ns, self.marks, self._stuck, self._quiet)
        return RecordingTimeline(self.start_ns, self.end_ns, tuple(sorted(self.marks)))


def scan_timeline(
    path: Path, *, stuck_after_ns: int | None = None, kernel_stuck_after_ns: int | None = None
) -> RecordingTimeline:
    """The timeline of the recording at ``path``, with the UI's thresholds for a stuck pass and a
    quiet warp (the model's defaults when None): from the index its recorder wrote into it where
    that index is whole, intact and made with the same thresholds, else by reading the whole
    file once. Raises :class:`~iket_tui.sources.base.SourceError` for a file that is not a
    readable recording."""
    builder = TimelineBuilder(stuck_after_ns=stuck_after_ns, kernel_stuck_after_ns=kernel_stuck_after_ns)
    indexed = read_index(
        path, stuck_after_ns=builder.stuck_after_ns, kernel_stuck_after_ns=builder.kernel_stuck_after_ns
    )
    if indexed is not None:
        return indexed
    for chunk in RecordingReader(path, rows=True).chunks():
        builder.feed(chunk)
    return builder.finish()


def _mark_of(msg: m.Message, kind: object, t: int, name: str | None) -> Mark | None:
    """The mark a message makes by itself, if any; ``name``: its compile's, as it began."""
    if kind == m.COMPILE_BEGIN:
        return Mark(t, MarkKind.COMPILE, f"compile {_name(msg)} began")
    if kind == m.COMPILE_END and msg.get("ok") is False:
        return Mark(t, MarkKind.FAILURE, f"compile {name or _name(msg)} failed")
    if kind == m.HELLO and msg.get("role", "agent") == "agent":
        return Mark(t, MarkKind.PROCESS, f"process {msg.get('pid')} connected")
    if kind == m.BYE:
        return Mark(t, MarkKind.PROCESS, f"the process said bye ({msg.get('reason')})")
    if kind == m.PROCESS and msg.get("state") is not None:
        return Mark(t, MarkKind.PROCESS, f"process {msg.get('pid')}'s stream {msg.get('state')}")
    return None


def _name(msg: m.Message) -> str:
    kernel = msg.get("kernel")
    if isinstance(kernel, str) and kernel:
        return kernel
    label = msg.get("label")
    return label if isinstance(label, str) and label else str(msg.get("compile"))


def _sample(session: Session, t: int, marks: list[Mark], stuck: set[PassNode], quiet: set[Any]) -> None:
    """Mark the passes that became stuck and the launches that went quiet by agent time ``t``."""
    tree = session.tree
    for node in tree.running_passes():
        if node not in stuck and tree.is_stuck(node, t):
            stuck.add(node)
            marks.append(Mark(t, MarkKind.STUCK, f"{node.name} stuck in compile {node.compile.title}"))
    for timeline in session.kernel_processes.timelines.values():
        for launch in timeline.quiet(t):
            key = (launch.process, launch.key)
            if key not in quiet:
                quiet.add(key)
                marks.append(Mark(t, MarkKind.QUIET, f"a warp of {launch.kernel} went quiet"))


# The index a recorder writes

MARKS_PER_FRAME = 100_000
"""Marks one ``index`` frame holds at most (well within a frame's limits): a stream that makes
more between two checkpoints gets no index, and its timeline is read from the file."""


class TimelineIndexer:
    """What a recorder keeps to write its recording's index: the timeline found so far (the
    model's default thresholds), and where its last ``index`` frame went. Past
    :data:`MARKS_PER_FRAME` marks between two checkpoints it gives up: it writes no more ``index``
    frames, and without the last one no reader trusts those before it."""

    def __init__(self) -> None:
        self._builder = TimelineBuilder()
        self._written = 0  # marks already in an index frame
        self._previous: int | None = None  # offset of the last index frame
        self.gave_up = False

    def feed(self, items: Sequence[m.Item]) -> None:
        """Take the stream's next messages and pass rows, as they are written."""
        if not self.gave_up:
            self._builder.feed(items)

    def after_checkpoint(self, checkpoint: m.Message, at: int, offset: int) -> bytes:
        """The ``index`` frame to write at byte ``offset``, right after the ``checkpoint`` frame
        written at byte ``at`` (nothing once given up)."""
        if self.gave_up:
            return b""
        self._builder.feed([checkpoint])
        return self._frame(offset, place=(checkpoint["t_ns"], at))

    def before_end(self, end: m.Message, offset: int) -> bytes:
        """The last ``index`` frame, written at byte ``offset`` just before the ``end`` frame
        (nothing once given up)."""
        if self.gave_up:
            return b""
        self._builder.feed([end])
        self._builder.finish()
        return self._frame(offset, place=None)

    def _frame(self, offset: int, *, place: tuple[int, int] | None) -> bytes:
        builder = self._builder
        marks = builder.marks[self._written :]
        self._written = len(builder.marks)
        if len(marks) > MARKS_PER_FRAME:
            self.gave_up = True
            self._builder = TimelineBuilder()  # its model let go
            return b""
        msg: m.Message = {
            "type": m.INDEX,
            "at": offset,
            "prev": self._previous,
            "start_ns": builder.start_ns,
            "end_ns": builder.end_ns,
            "stuck_after_ns": builder.stuck_after_ns,
            "kernel_stuck_after_ns": builder.kernel_stuck_after_ns,
            "place": list(place) if place is not None else None,
            "marks": [[mark.t_ns, mark.kind.value, mark.what] for mark in marks],
        }
        self._previous = offset
        return encode_message(msg)


# Reading the index back

_TAIL = 64 * 1024
"""Bytes read first from a recording's end to find its last frames (more while they do not fit)."""
_KINDS = {kind.value: kind for kind in MarkKind}


class _Untrusted(Exception):
    """The index cannot be used as it is: the reason, for tests and for nobody else."""


def read_index(path: Path, *, stuck_after_ns: int, kernel_stuck_after_ns: int) -> RecordingTimeline | None:
    """The timeline the index of the recording at ``path`` holds, or None where it has none
    that can be trusted: no end frame with an index before it, a damaged or inconsistent index
    frame anywhere along the chain, or thresholds other than the ones asked."""
    try:
        return _read_index(Path(path), stuck_after_ns, kernel_stuck_after_ns)
    except (_Untrusted, OSError):
        return None


def index_problem(path: Path, *, stuck_after_ns: int, kernel_stuck_after_ns: int) -> str | None:
    """Why :func:`read_index` gives None for ``path`` (None where it gives a timeline)."""
    try:
        _read_index(Path(path), stuck_after_ns, kernel_stuck_after_ns)
    except (_Untrusted, OSError) as exc:
        return str(exc) or type(exc).__name__
    return None


def _read_index(path: Path, stuck_after_ns: int, kernel_stuck_after_ns: int) -> RecordingTimeline:
    with open(path, "rb") as file:
        size = file.seek(0, 2)
        file.seek(0)
        if file.read(len(MAGIC)) != MAGIC:
            raise _Untrusted("not a recording")
        header = _frame_at(file, len(MAGIC), size)
        proto = header.get("proto")
        if header.get("type") != m.RECORDING or not isinstance(proto, list) or proto[:1] != [m.PROTOCOL_VERSION[0]]:
            raise _Untrusted("no readable header")
        last_offset, last, end = _last_index(file, size)
        if last.get("at") != last_offset:  # its recording does not begin the file (one appended to another)
            raise _Untrusted(f"an index written for byte {last.get('at')!r}, found at byte {last_offset}")
        if last.get("end_ns") != end.get("t_ns"):
            raise _Untrusted("an index that ends elsewhere than its recording")
        entries = [last]
        offsets = [last_offset]
        previous = last.get("prev")
        while previous is not None:
            if type(previous) is not int or not len(MAGIC) <= previous < offsets[-1]:
                raise _Untrusted(f"an index frame points at byte {previous!r}")
            entry = _frame_at(file, previous, offsets[-1])
            if entry.get("type") != m.INDEX or entry.get("at") != previous:
                raise _Untrusted(f"no index frame at byte {previous}")
            entries.append(entry)
            offsets.append(previous)
            previous = entry.get("prev")
        entries.reverse()
        offsets.reverse()
        places = [_place(entry, offset, file) for entry, offset in zip(entries[:-1], offsets[:-1], strict=True)]
    return _timeline(entries, places, stuck_after_ns, kernel_stuck_after_ns)


def _timeline(
    entries: list[m.Message], places: list[tuple[int, int]], stuck_after_ns: int, kernel_stuck_after_ns: int
) -> RecordingTimeline:
    """The timeline the chain of index frames says, each checked against the others."""
    last = entries[-1]
    start = last.get("start_ns")
    end = last.get("end_ns")
    if last.get("stuck_after_ns") != stuck_after_ns or last.get("kernel_stuck_after_ns") != kernel_stuck_after_ns:
        raise _Untrusted("made with other thresholds")
    if start is None:
        if any(entry.get("marks") for entry in entries) or places:
            raise _Untrusted("marks in a recording without a time")
        return RecordingTimeline(0, 0, ())
    if type(start) is not int or type(end) is not int or not 0 < start <= end:
        raise _Untrusted("no span")
    marks: list[Mark] = []
    reached = 0
    for entry in entries:  # (a mark may come before the first time: a stream's times may go back)
        upto = entry.get("end_ns")
        if (
            entry.get("stuck_after_ns") != stuck_after_ns
            or entry.get("kernel_stuck_after_ns") != kernel_stuck_after_ns
            or entry.get("start_ns") not in (None, start)
            or type(upto) is not int
            or upto < reached
        ):
            raise _Untrusted("index frames that disagree")
        reached = upto
        found = entry.get("marks")
        if type(found) is not list:
            raise _Untrusted("marks that are not a list")
        for item in found:
            if not (type(item) is list and len(item) == 3):
                raise _Untrusted("a mark that is not [t_ns, kind, what]")
            t, kind, what = item
            known = type(kind) is str and kind in _KINDS  # (a kind that is a list cannot be looked up)
            if type(t) is not int or not 0 < t <= upto or not known or type(what) is not str:
                raise _Untrusted(f"a mark out of place: {item!r:.80}")
            marks.append(Mark(t, _KINDS[kind], what))
    if reached != end:
        raise _Untrusted("index frames that disagree")
    times = [t for t, _ in places]
    if times != sorted(times) or any(not start <= t <= end for t in times):
        raise _Untrusted("checkpoints out of order")
    marks.sort()
    return RecordingTimeline(start, end, tuple(marks), tuple(places))


def _place(entry: m.Message, offset: int, file: BinaryIO) -> tuple[int, int]:
    """The checkpoint an index frame follows: its time and offset, checked to be one."""
    place = entry.get("place")
    if not (type(place) is list and len(place) == 2 and all(type(v) is int for v in place)):
        raise _Untrusted("an index frame without its checkpoint")
    t, at = place
    checkpoint = _frame_at(file, at, offset) if len(MAGIC) <= at < offset else None
    if checkpoint is None or checkpoint.get("type") != m.CHECKPOINT or checkpoint.get("t_ns") != t:
        raise _Untrusted(f"no checkpoint at byte {at}")
    return t, at


def _frame_at(file: BinaryIO, offset: int, before: int) -> m.Message:
    """The message of the intact frame at ``offset`` that ends by byte ``before``."""
    file.seek(offset)
    head = file.read(HEADER_SIZE)
    if len(head) < HEADER_SIZE:
        raise _Untrusted(f"no frame at byte {offset}")
    length, crc = HEADER.unpack(head)
    if not 0 < length <= MAX_FRAME_BODY or offset + HEADER_SIZE + length > before:
        raise _Untrusted(f"no frame at byte {offset}")
    body = file.read(length)
    if len(body) != length or zlib.crc32(body) != crc:
        raise _Untrusted(f"a damaged frame at byte {offset}")
    try:
        return decode_body(body)
    except ProtocolError as exc:
        raise _Untrusted(str(exc)) from None


def _last_index(file: BinaryIO, size: int) -> tuple[int, m.Message, m.Message]:
    """The offset of the ``index`` frame right before the ``end`` frame that ends the file, that
    frame and the end frame."""
    window = _TAIL
    while True:
        start = max(len(MAGIC), size - window)
        file.seek(start)
        frames = FrameDecoder(resync=True)
        frames.feed(file.read(size - start))
        bodies: list[tuple[int, bytes]] = []
        for found in (frames, frames.finish()):
            for body in found:  # frame by frame: where each one began is known as it comes
                bodies.append((frames.consumed - HEADER_SIZE - len(body), body))
        if frames.pending == 0 and len(bodies) >= 2:
            (at, index), (_, last) = bodies[-2:]
            try:
                end = decode_body(last)
                msg = decode_body(index)
            except ProtocolError as exc:
                raise _Untrusted(str(exc)) from None
            if end.get("type") != m.END:
                raise _Untrusted("no end frame")
            if msg.get("type") != m.INDEX:
                raise _Untrusted("no index before the end frame")
            return start + at, msg, end
        if start == len(MAGIC) or window > MAX_FRAME_BODY:
            raise _Untrusted("no end frame")
        window *= 4
