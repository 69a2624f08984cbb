"""A recording as Perfetto's native trace: a protobuf ``Trace`` of ``TracePacket``s, each a
``TrackDescriptor`` or a ``TrackEvent``, encoded here by hand (varints and length-delimited
fields; no protobuf library).

Tracks: the watched process, a track per compile under it holding the compile and its passes
as nested slices (``TYPE_SLICE_BEGIN``/``TYPE_SLICE_END``) with a child track for its codegen
steps (nvcc runs inside a pass, so they get their own lane), and a track per kernel launch with
a track per block under it and a track per warp under that, holding the warp's ranges as
slices and its marks as instants (``TYPE_INSTANT``). Ranges are those the model pairs
(:meth:`~iket_tui.model.launches.Launch.spans`), drawn as the Chrome export draws them.

A recording of several processes has a process track for each process with a compile or a
launch (its ``ProcessDescriptor`` names its pid, command line and a name with its rank),
ordered by rank, each holding its own compiles' tracks and its own launches' tracks.

Times are nanoseconds. Compiles keep the host's monotonic clock exactly as recorded; kernel
launches are timed by the GPU clock, which nothing ties to the host's, so each launch is
placed at its offset from the first launch counted from the first compile (as the Chrome
export starts both clocks at zero).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Final

import numpy as np

from iket_tui.export.chrome import NOTHING, ORPHAN_END_NAME
from iket_tui.export.common import (
    ExportError,
    compile_finish,
    compile_process,
    launch_process,
    launches_of,
    process_sort,
    process_title,
)
from iket_tui.export.stream import CompileStream, forget, grid_of
from iket_tui.model.launches import SPAN_NO_END, SPAN_NO_START, Launch, Spans, pair_ranges
from iket_tui.model.nodes import CompileNode, PassNode, ProcessNode
from iket_tui.model.session import Session

# Field numbers and types as Perfetto's own protos declare them, checked against google/perfetto
# at ec5d16b14b74 (2026-08-22): protos/perfetto/trace/trace.proto, trace_packet.proto,
# track_event/track_event.proto, track_event/track_descriptor.proto and
# track_event/process_descriptor.proto (the paths below are under protos/perfetto/trace/).
# tests/export/test_export_perfetto.py decodes the output against its own copy of these numbers.
TRACE_PACKET: Final = 1
"""trace.proto: ``repeated TracePacket packet = 1`` of ``Trace``."""
PACKET_TIMESTAMP: Final = 8
"""trace_packet.proto: ``optional uint64 timestamp = 8`` (ns, on the default clock, BOOTTIME)."""
PACKET_TRUSTED_PACKET_SEQUENCE_ID: Final = 10
"""trace_packet.proto: ``uint32 trusted_packet_sequence_id = 10`` (in the oneof
``optional_trusted_packet_sequence_id``; a file written without the tracing service sets it,
as Perfetto's docs/reference/synthetic-track-event.md does)."""
PACKET_TRACK_EVENT: Final = 11
"""trace_packet.proto: ``TrackEvent track_event = 11`` (in the oneof ``data``)."""
PACKET_SEQUENCE_FLAGS: Final = 13
"""trace_packet.proto: ``optional uint32 sequence_flags = 13``."""
PACKET_TRACK_DESCRIPTOR: Final = 60
"""trace_packet.proto: ``TrackDescriptor track_descriptor = 60`` (in the oneof ``data``)."""
SEQ_INCREMENTAL_STATE_CLEARED: Final = 1
"""trace_packet.proto: ``TracePacket.SequenceFlags.SEQ_INCREMENTAL_STATE_CLEARED = 1``."""

TRACK_UUID: Final = 1
"""track_event/track_descriptor.proto: ``optional uint64 uuid = 1``."""
TRACK_NAME: Final = 2
"""track_event/track_descriptor.proto: ``string name = 2`` (in the oneof ``static_or_dynamic_name``)."""
TRACK_PROCESS: Final = 3
"""track_event/track_descriptor.proto: ``optional ProcessDescriptor process = 3``."""
TRACK_PARENT_UUID: Final = 5
"""track_event/track_descriptor.proto: ``optional uint64 parent_uuid = 5``."""

PROCESS_PID: Final = 1
"""track_event/process_descriptor.proto: ``optional int32 pid = 1``."""
PROCESS_CMDLINE: Final = 2
"""track_event/process_descriptor.proto: ``repeated string cmdline = 2``."""
PROCESS_PROCESS_NAME: Final = 6
"""track_event/process_descriptor.proto: ``optional string process_name = 6``."""

EVENT_TYPE: Final = 9
"""track_event/track_event.proto: ``optional Type type = 9`` (an enum, written as a varint)."""
EVENT_TRACK_UUID: Final = 11
"""track_event/track_event.proto: ``optional uint64 track_uuid = 11``."""
EVENT_CATEGORIES: Final = 22
"""track_event/track_event.proto: ``repeated string categories = 22``."""
EVENT_NAME: Final = 23
"""track_event/track_event.proto: ``string name = 23`` (in the oneof ``name_field``)."""
TYPE_SLICE_BEGIN: Final = 1
"""track_event/track_event.proto: ``TrackEvent.Type.TYPE_SLICE_BEGIN = 1``."""
TYPE_SLICE_END: Final = 2
"""track_event/track_event.proto: ``TrackEvent.Type.TYPE_SLICE_END = 2``."""
TYPE_INSTANT: Final = 3
"""track_event/track_event.proto: ``TrackEvent.Type.TYPE_INSTANT = 3``."""

_UINT64: Final = (1 << 64) - 1
WIRE_VARINT: Final = 0
WIRE_LEN: Final = 2

SEQUENCE_ID: Final = 1
"""The one packet sequence the whole trace is written on."""
CHUNK: Final = 1 << 16
"""About how many bytes are gathered before each write."""
PROCESS_UUID: Final = 1
MARK_CATEGORY: Final = "mark"
NAMES_MAX: Final = 100_000
"""How many (category, name) pairs a trace keeps encoded (a few hundred make a real one)."""

Event = tuple[int, int, str | None]
"""A track's event: its time (ns), its type, and a slice's or instant's name (None for an end)."""


def varint(value: int) -> bytes:
    """``value`` as a protobuf base-128 varint (a negative one as its 64-bit two's complement,
    as protobuf writes a negative int32 or int64)."""
    value &= _UINT64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _tag(field: int, wire: int) -> bytes:
    return varint(field << 3 | wire)


def _int(field: int, value: int) -> bytes:
    return _tag(field, WIRE_VARINT) + varint(value)


def _bytes(field: int, value: bytes) -> bytes:
    return _tag(field, WIRE_LEN) + varint(len(value)) + value


def _text(field: int, value: str) -> bytes:
    return _bytes(field, value.encode("utf-8", "replace"))


_PACKET: Final = _tag(TRACE_PACKET, WIRE_LEN)
_SEQUENCE: Final = _int(PACKET_TRUSTED_PACKET_SEQUENCE_ID, SEQUENCE_ID)
_TIMESTAMP: Final = _tag(PACKET_TIMESTAMP, WIRE_VARINT)
_TRACK_EVENT: Final = _tag(PACKET_TRACK_EVENT, WIRE_LEN)
_TYPES: Final = {kind: _int(EVENT_TYPE, kind) for kind in (TYPE_SLICE_BEGIN, TYPE_SLICE_END, TYPE_INSTANT)}


class _Writer:
    """Packets gathered into chunks and handed to ``write``."""

    def __init__(self, write: Callable[[bytes], object]) -> None:
        self._write = write
        self._parts: list[bytes] = []
        self._size = 0
        self._next_uuid = PROCESS_UUID
        self._names: dict[tuple[str, str], bytes] = {}
        self.events = 0

    def redirect(self, write: Callable[[bytes], object]) -> None:
        """Hand what is gathered to the current ``write``, and what follows to ``write``."""
        self.flush()
        self._write = write

    def uuid(self) -> int:
        self._next_uuid += 1
        return self._next_uuid

    def packet(self, body: bytes) -> None:
        data = _PACKET + varint(len(body)) + body
        self._parts.append(data)
        self._size += len(data)
        if self._size >= CHUNK:
            self.flush()

    def flush(self) -> None:
        if self._parts:
            self._write(b"".join(self._parts))
            self._parts.clear()
            self._size = 0

    def track(self, uuid: int, name: str, parent: int | None = None, process: bytes = b"") -> None:
        body = _int(TRACK_UUID, uuid) + _text(TRACK_NAME, name)
        if parent is not None:
            body += _int(TRACK_PARENT_UUID, parent)
        if process:
            body += _bytes(TRACK_PROCESS, process)
        self.packet(_SEQUENCE + _bytes(PACKET_TRACK_DESCRIPTOR, body))

    def events_on(self, track: int, category: str, events: Iterable[Event]) -> None:
        """A track's events, in the order given (their times never go back)."""
        where = _int(EVENT_TRACK_UUID, track)
        end = _TYPES[TYPE_SLICE_END] + where
        names = self._names
        for ts, kind, name in events:
            if name is None:
                event = end
            else:
                cat = MARK_CATEGORY if kind == TYPE_INSTANT else category
                label = names.get((cat, name))
                if label is None:
                    label = _text(EVENT_CATEGORIES, cat) + _text(EVENT_NAME, name)
                    if len(names) < NAMES_MAX:
                        names[(cat, name)] = label
                event = _TYPES[kind] + where + label
                self.events += 1
            self.packet(_TIMESTAMP + varint(ts) + _SEQUENCE + _TRACK_EVENT + varint(len(event)) + event)


def perfetto_trace(session: Session, write: Callable[[bytes], object], *, name: str = "") -> int:
    """Write the Perfetto trace of a whole session through ``write``; the number of slices and
    instants written. A session with no compile and no kernel launch is refused
    (:class:`ExportError`) with nothing written."""
    tree = session.tree
    launches = launches_of(session)
    if not tree.compiles and not launches:
        raise ExportError(NOTHING)
    out = _Writer(write)
    out.packet(_SEQUENCE + _int(PACKET_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED))
    origin = min((comp.begin_ns for comp in tree.compiles), default=0)
    kernel_origin = min((launch.first_ns for launch in launches), default=0)
    last = session.last_t_ns
    if tree.several:
        _processes(out, session, launches, origin - kernel_origin)
        out.flush()
        return out.events
    process = tree.process
    if tree.compiles or process.pid is not None:
        _process(out, process, PROCESS_UUID, process.command or name or "process", with_pid=True)
    for comp in tree.compiles:
        _compile(out, comp, last, PROCESS_UUID)
    for launch in launches:
        _launch(out, launch, launch.spans(), launch.grid(), origin + launch.first_ns - kernel_origin)
    out.flush()
    return out.events


class PerfettoStream(CompileStream):
    """Perfetto's trace written while a recording is read: :meth:`feed` each chunk of messages,
    then :meth:`finish`. A compile's packets are encoded when it ends, into a temporary file of
    runs kept per process (a process's track goes before its compiles' tracks, and processes
    are ordered by rank, which only the whole recording settles); :meth:`finish` writes the
    trace's head, each process's track and runs, and the kernel launches, one at a time.
    Nothing is written before :meth:`finish`, which refuses a recording with nothing to show
    (:class:`ExportError`) with nothing written."""

    def __init__(self, write: Callable[[bytes], object], *, name: str = "") -> None:
        super().__init__()
        self._write = write
        self._name = name
        self._spool = self.spool()
        self._target: ProcessNode | None = None  # whose runs the writer fills now
        self._out = _Writer(self._to_spool)
        self._tracks: dict[ProcessNode, int] = {}  # each process's track, once a compile of it was written

    @property
    def events(self) -> int:
        """Slices and instants written so far."""
        return self._out.events

    def _to_spool(self, data: bytes) -> None:
        self._spool.add(self._target, data)

    def _track_of(self, process: ProcessNode) -> int:
        track = self._tracks.get(process)
        if track is None:
            track = self._tracks[process] = PROCESS_UUID if process is self.session.tree.process else self._out.uuid()
        return track

    def _ended(self, comp: CompileNode) -> None:
        """Encode a compile's packets into its process's runs, then let go of its passes and steps."""
        process = compile_process(self.session, comp)
        if process is not self._target:
            self._out.flush()
            self._target = process
        _compile(self._out, comp, self.session.last_t_ns, self._track_of(process))
        forget(comp)

    def _finish(self) -> int:
        """Write the trace: its head, each process's track with its compiles, and the kernel
        launches; the number of slices and instants written."""
        session = self.session
        launches = self._close()
        tree = session.tree
        if not tree.compiles and not launches:
            raise ExportError(NOTHING)
        out = self._out
        out.redirect(self._write)
        out.packet(_SEQUENCE + _int(PACKET_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED))
        origin = min((comp.begin_ns for comp in tree.compiles), default=0)
        kernel_origin = min((launch.first_ns for launch in launches), default=0)
        if not tree.several:
            process = tree.process
            if tree.compiles or process.pid is not None:
                title = process.command or self._name or "process"
                _process(out, process, self._track_of(process), title, with_pid=True)
            self._runs(process)
            for launch in launches:
                self._launch(launch, origin + launch.first_ns - kernel_origin)
            out.flush()
            return out.events
        own: dict[ProcessNode, list[Launch]] = {}
        for launch in launches:
            own.setdefault(launch_process(session, launch), []).append(launch)
        pids: set[int] = set()
        for _, process in process_sort(tree.processes):
            its = own.get(process, [])
            if not process.compiles and not its:
                continue
            track = self._track_of(process)
            _process(out, process, track, process_title(process), with_pid=process.pid not in pids)
            if process.pid is not None:
                pids.add(process.pid)
            self._runs(process)
            for launch in its:
                self._launch(launch, origin - kernel_origin + launch.first_ns, track)
        out.flush()
        return out.events

    def _runs(self, process: ProcessNode) -> None:
        """Write the compiles' packets of ``process`` kept in the spool."""
        self._out.flush()
        self._spool.copy(process, self._write)

    def _launch(self, launch: Launch, offset_ns: int, parent: int | None = None) -> None:
        events = self.kernel_events.events(launch)
        grid = grid_of(events)
        spans = pair_ranges(events, launch.first_ns)
        del events
        _launch(self._out, launch, spans, grid, offset_ns, parent)


def _processes(out: _Writer, session: Session, launches: list[Launch], kernel_offset: int) -> None:
    """The processes of a recording of several, ordered by rank: each one's track, then its
    compiles' and its launches' tracks under it. A pid given by two processes (a stream that
    lied) is named in the first one's descriptor only."""
    own: dict[ProcessNode, list[Launch]] = {}
    for launch in launches:
        own.setdefault(launch_process(session, launch), []).append(launch)
    pids: set[int] = set()
    last = session.last_t_ns
    for _, process in process_sort(session.tree.processes):
        its = own.get(process, [])
        if not process.compiles and not its:
            continue
        track = out.uuid()
        _process(out, process, track, process_title(process), with_pid=process.pid not in pids)
        if process.pid is not None:
            pids.add(process.pid)
        for comp in process.compiles:
            _compile(out, comp, last, track)
        for launch in its:
            _launch(out, launch, launch.spans(), launch.grid(), kernel_offset + launch.first_ns, track)


def _process(out: _Writer, process: ProcessNode, track: int, title: str, *, with_pid: bool) -> None:
    """The track of a watched process, which its compiles' tracks go under."""
    descriptor = b""
    if process.pid is not None and with_pid:
        descriptor += _int(PROCESS_PID, process.pid)
    descriptor += b"".join(_text(PROCESS_CMDLINE, arg) for arg in process.argv)
    descriptor += _text(PROCESS_PROCESS_NAME, title)
    out.track(track, title, process=descriptor)


def _compile(out: _Writer, comp: CompileNode, last: int, parent: int) -> None:
    """A compile's track under its process's: the compile as a slice holding its passes; its
    codegen steps on a track of their own under it."""
    finish = compile_finish(comp, last)
    track = out.uuid()
    out.track(track, f"compile {comp.id}: {comp.title}", parent)
    slices: list[tuple[int, int, str]] = [(comp.begin_ns, finish, comp.title)]
    for ctx in comp.context_order:
        slices += ((node.start_ns, _pass_end(node, finish), node.name) for node in _preorder(ctx.roots))
    out.events_on(track, "pass", nested(slices))
    if comp.codegen_steps:
        steps = out.uuid()
        out.track(steps, f"compile {comp.id}: codegen", track)
        out.events_on(
            steps,
            "codegen",
            nested(
                (step.begin_ns, step.end_ns if step.end_ns is not None else finish, step.title)
                for step in comp.codegen_steps
            ),
        )


def _pass_end(node: PassNode, finish: int) -> int:
    return node.end_ns if node.end_ns is not None else finish


def _preorder(roots: list[PassNode]) -> Iterator[PassNode]:
    stack = list(reversed(roots))
    while stack:
        node = stack.pop()
        yield node
        if node.children:
            stack.extend(reversed(node.children))


def nested(slices: Iterable[tuple[int, int, str]], instants: Iterable[tuple[int, str]] = ()) -> Iterator[Event]:
    """Begin and end events of slices ``(begin, end, name)``, in time order and balanced: a
    slice that begins inside another ends no later than it (an end past its parent's is drawn
    at the parent's). Slices that begin together are opened longest first; a tie keeps the
    given order (a parent before its children). Instants ``(t, name)`` go in at their time."""
    ordered = sorted(slices, key=lambda item: (item[0], -item[1]))
    marks = sorted(instants, key=lambda item: item[0])
    stack: list[int] = []
    at = 0
    for begin, end, name in ordered:
        while stack and stack[-1] <= begin:
            closing = stack.pop()
            while at < len(marks) and marks[at][0] < closing:
                yield (marks[at][0], TYPE_INSTANT, marks[at][1])
                at += 1
            yield (closing, TYPE_SLICE_END, None)
        while at < len(marks) and marks[at][0] < begin:
            yield (marks[at][0], TYPE_INSTANT, marks[at][1])
            at += 1
        end = max(begin, min(end, stack[-1]) if stack else end)
        yield (begin, TYPE_SLICE_BEGIN, name)
        stack.append(end)
    while stack:
        closing = stack.pop()
        while at < len(marks) and marks[at][0] < closing:
            yield (marks[at][0], TYPE_INSTANT, marks[at][1])
            at += 1
        yield (closing, TYPE_SLICE_END, None)
    for t, name in marks[at:]:
        yield (t, TYPE_INSTANT, name)


def _launch(
    out: _Writer, launch: Launch, spans: Spans, grid: tuple[int, int, int], offset_ns: int, parent: int | None = None
) -> None:
    """A launch's track (under its process's in a recording of several), a track per block under
    it and a track per warp under that one; ``spans`` are its ranges and marks paired, ``grid``
    its shape."""
    shape = "x".join(str(size) for size in grid)
    track = out.uuid()
    out.track(track, f"{launch.kernel} launch {launch.key[3]} ({shape})", parent)
    max_warps = spans.max_warps
    ranges, marks = spans.spans, spans.marks
    range_lanes = ranges["block"].astype(np.int64) * max_warps + ranges["warp"]
    mark_lanes = marks["block"].astype(np.int64) * max_warps + marks["warp"]
    flags = ranges["flags"]
    begin = (offset_ns + np.where(flags & SPAN_NO_START, 0, ranges["start_ns"].astype(np.int64))).tolist()
    end = (offset_ns + np.where(flags & SPAN_NO_END, launch.duration_ns, ranges["end_ns"].astype(np.int64))).tolist()
    mark_t = (offset_ns + marks["t_ns"].astype(np.int64)).tolist()
    known: dict[int, str] = {}

    def label(event: int) -> str:
        found = known.get(event)
        if found is None:
            found = known[event] = launch.event_name(event)
        return found

    lane_ranges: dict[int, list[tuple[int, int, str]]] = {}
    for lane, b, e, event, flag in zip(
        range_lanes.tolist(), begin, end, ranges["event"].tolist(), flags.tolist(), strict=True
    ):
        lane_ranges.setdefault(lane, []).append((b, e, ORPHAN_END_NAME if flag & SPAN_NO_START else label(event)))
    lane_marks: dict[int, list[tuple[int, str]]] = {}
    for lane, t, event in zip(mark_lanes.tolist(), mark_t, marks["event"].tolist(), strict=True):
        lane_marks.setdefault(lane, []).append((t, label(event)))
    blocks = spans.blocks.tolist()
    block_tracks: dict[int, int] = {}
    for lane in sorted(lane_ranges.keys() | lane_marks.keys()):
        block, warp = divmod(lane, max_warps)
        parent = block_tracks.get(block)
        if parent is None:
            x, y, z = blocks[block]
            parent = block_tracks[block] = out.uuid()
            out.track(parent, f"block ({x},{y},{z})", track)
        warp_track = out.uuid()
        out.track(warp_track, f"warp {warp}", parent)
        out.events_on(warp_track, "range", nested(lane_ranges.get(lane, ()), lane_marks.get(lane, ())))
