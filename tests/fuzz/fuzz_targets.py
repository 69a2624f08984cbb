"""The fuzz targets: each takes a recording file's bytes and checks the contract, not only that
nothing raised.

On any input each target gets a result or a documented error (one line), loses nothing it was
given (every byte is a frame, skipped or the cut tail; every message is counted once), and stays
within bounds: at most :data:`SECONDS_PER_MB` per MB read (plus :data:`SECONDS_FLOOR` whatever the
size) for each pass it makes over its input, and a peak of its own (see :mod:`peak_memory`) at
most :data:`MEMORY_FLOOR` plus :data:`MEMORY_PER_BYTE` per input byte above the memory in use
when it began.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from peak_memory import TRACED_SLOWDOWN, PeakMemory
from perfetto_reader import Trace, decode

from iket_tui.export import (
    BINARY_FORMATS,
    FORMATS,
    READ_CHUNK,
    ExportError,
    export,
    perfetto_trace,
    recording_session,
    session_notes,
    stream_of,
)
from iket_tui.model.session import Session
from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import MessageDecoder, ProtocolError, encode_message
from iket_tui.protocol.frames import HEADER_SIZE, FrameDecoder, FrameError, encode_frame
from iket_tui.protocol.recording import MAGIC, RecordingDecoder
from iket_tui.sources.base import SourceError
from iket_tui.sources.lines import KernelEvents, TextLines, json_line
from iket_tui.sources.reading import RecordingReader, recording_notes

SECONDS_PER_MB = 1.0
SECONDS_FLOOR = 1.0
MEMORY_FLOOR = 256 * 1024 * 1024
MEMORY_PER_BYTE = 64

Target = Callable[[bytes], None]

_TMP_DIR = tempfile.TemporaryDirectory(prefix="iket-fuzz-")  # removed when the process ends
_TMP = Path(_TMP_DIR.name)


@contextmanager
def within_bounds(size: int, passes: int = 1) -> Iterator[None]:
    """Fail when what runs inside takes more than its time or memory for ``size`` input bytes,
    read ``passes`` times over (every export format is a pass of its own, each read back). The
    memory is this stretch's own peak, however high an earlier input took the process's."""
    peak = PeakMemory()
    peak.start()
    start = time.process_time()  # the work done, whatever else the machine runs meanwhile
    yield
    elapsed = time.process_time() - start
    grew = peak.grew()
    allowed = passes * (SECONDS_FLOOR + SECONDS_PER_MB * size / 1e6) * TRACED_SLOWDOWN
    assert elapsed <= allowed, f"took {elapsed:.2f} s of CPU for {size:,} bytes (at most {allowed:.2f} s)"
    bound = MEMORY_FLOOR + MEMORY_PER_BYTE * size
    assert grew <= bound, f"peak memory grew {grew:,} bytes for {size:,} bytes (at most {bound:,}, by {peak.way})"


def _one_line(error: Exception) -> str:
    text = str(error)
    assert text and "\n" not in text, f"{type(error).__name__} is not one line: {text!r}"
    return text


def _stream(data: bytes) -> bytes:
    return data[len(MAGIC) :] if data.startswith(MAGIC) else data


def _equal(a: Any, b: Any) -> bool:
    """``a == b`` for decoded messages, however deep they nest (a reader accepts 1,023 levels,
    deeper than Python's own comparison goes)."""
    pending = [(a, b)]
    while pending:
        x, y = pending.pop()
        if type(x) is not type(y):
            return False
        if isinstance(x, dict):
            if x.keys() != y.keys():
                return False
            pending.extend((x[key], y[key]) for key in x)
        elif isinstance(x, list):
            if len(x) != len(y):
                return False
            pending.extend(zip(x, y, strict=True))
        elif x != y and not (x != x and y != y):  # NaN is NaN here
            return False
    return True


def _chunked(data: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


# -- frames ------------------------------------------------------------------------------------


def frames_strict(data: bytes) -> None:
    """A live socket's decoder: the frames up to the first bad one, then a one-line error, alike
    however the bytes arrive."""
    stream = _stream(data)
    outcomes = []
    with within_bounds(len(data)):
        for size in (max(1, len(stream)), 4096, 509):
            decoder = FrameDecoder()
            bodies: list[bytes] = []
            error = None
            fed = 0
            try:
                for chunk in _chunked(stream, size):
                    decoder.feed(chunk)
                    fed += len(chunk)
                    if size == 4096:
                        bodies += decoder.drain()
                    else:
                        bodies.extend(decoder)  # keeps what came before an error
                bodies += decoder.drain()  # a drain returns the frames before damage, the next one raises
            except FrameError as exc:
                error = _one_line(exc)
            else:
                assert decoder.consumed + decoder.pending == fed
            good = b"".join(encode_frame(body) for body in bodies)
            assert stream.startswith(good)
            assert error is not None or decoder.consumed == len(good)
            outcomes.append((bodies, error))
    assert all(outcome == outcomes[0] for outcome in outcomes)


def frames_resync(data: bytes) -> None:
    """A recording's decoder: every byte is in a frame, skipped, or the cut tail, and the frames
    found are the same however the bytes arrive."""
    stream = _stream(data)
    outcomes = []
    with within_bounds(len(data)):
        for size in (max(1, len(stream)), 4096, 65536):
            decoder = FrameDecoder(resync=True)
            bodies: list[bytes] = []
            for chunk in _chunked(stream, size):
                decoder.feed(chunk)
                bodies += decoder.drain() if size == 4096 else list(decoder)
            bodies += list(decoder.finish())
            assert decoder.skipped_bytes + sum(HEADER_SIZE + len(body) for body in bodies) == decoder.consumed
            assert decoder.consumed + decoder.pending == len(stream)
            assert decoder.frames == len(bodies)
            outcomes.append((bodies, decoder.skipped_bytes, decoder.pending))
    assert all(outcome == outcomes[0] for outcome in outcomes)


# -- recordings --------------------------------------------------------------------------------


def _file(data: bytes, name: str = "input.msgpack") -> Path:
    path = _TMP / name
    path.write_bytes(data)
    return path


def _read(data: bytes, *, rows: bool = False) -> tuple[list[Any], RecordingReader[Any]] | None:
    """Every message of the recording, or None when it is not one (a one-line error)."""
    return _read_file(_file(data), rows=rows)


def _read_file(path: Path, *, rows: bool = False) -> tuple[list[Any], RecordingReader[Any]] | None:
    reader: RecordingReader[Any] = RecordingReader(path, rows=rows, chunk_size=4096)
    try:
        return list(reader), reader
    except SourceError as exc:
        assert _one_line(exc).startswith(f"{path}: ")
        return None


def recording(data: bytes) -> None:
    """The reader: the messages and what it found, or a one-line error; rows and maps agree, and
    so do a file read in chunks and the bytes decoded at once. Damage to any one frame of it
    loses that frame's messages and no other (:func:`_one_frame_damaged`)."""
    with within_bounds(len(data)):
        _read_alike(data)
    with within_bounds(len(data)):
        _one_frame_damaged(data)


def _read_alike(data: bytes) -> None:
    read = _read(data)
    rows = _read(data, rows=True)
    assert (read is None) == (rows is None)
    decoder: RecordingDecoder[m.Message] = RecordingDecoder()
    try:
        decoder.feed(data)
        whole: list[m.Message] | None = [*decoder, *decoder.finish()]
    except ProtocolError as exc:
        _one_line(exc)
        whole = None
    if read is None or rows is None:
        return
    messages, reader = read
    assert whole is not None and _equal(whole, messages)
    assert _equal([m.as_message(item) for item in rows[0]], messages)
    info = reader.info
    assert info.messages == len(messages) and info.size == len(data)
    assert (info.skipped_bytes, info.header_skipped) == (decoder.skipped_bytes, decoder.header_skipped)
    for note in recording_notes(info):
        assert "\n" not in note


def _decoded(data: bytes) -> tuple[list[m.Message], RecordingDecoder[m.Message]]:
    decoder: RecordingDecoder[m.Message] = RecordingDecoder()
    decoder.feed(data)
    return [*decoder.drain(), *decoder.finish()], decoder


def _one_frame_damaged(data: bytes) -> None:
    """Damage confined to one frame loses that frame's messages and no other: the input's intact
    frames are written again back to back, one bit of one of them (the header frame included)
    is flipped, and the rest reads as it did, the frame's bytes skipped or left as the cut tail.

    Resync looks for a frame only where a body can be a message (a map with string keys), so
    intact frames of no message right after the damaged one may be skipped with it."""
    found = FrameDecoder(resync=True)
    found.feed(_stream(data))
    bodies = [*found, *found.finish()]
    if not bodies:
        return
    digest = hashlib.sha256(data).digest()
    k = int.from_bytes(digest[:4], "big") % len(bodies)
    frames = [encode_frame(body) for body in bodies]
    alone = MessageDecoder(resync=True)
    by_frame = []
    for frame in frames:
        alone.feed(frame)
        by_frame.append(alone.drain())
    try:
        clean, _ = _decoded(MAGIC + b"".join(frames))
    except ProtocolError:
        return  # not a recording (its first frame is intact and not a header): nothing to lose
    assert _equal(clean, [msg for msgs in by_frame for msg in msgs])
    damaged = bytearray(MAGIC + b"".join(frames))
    at = int.from_bytes(digest[4:8], "big") % len(frames[k])
    damaged[len(MAGIC) + sum(map(len, frames[:k])) + at] ^= 1 << digest[8] % 8
    read, hurt = _decoded(bytes(damaged))  # never refused: the header was read before the damage, or was in it
    kept = [msg for index, msgs in enumerate(by_frame) if index != k for msg in msgs]
    assert _equal(read, kept), f"damage to frame {k} of {len(frames)} lost other frames"
    gone = hurt.skipped_bytes + hurt.pending
    if k + 1 == len(frames) or by_frame[k + 1]:
        assert gone == len(frames[k]), f"{gone} bytes skipped or cut for a frame of {len(frames[k])}"
    else:
        assert gone >= len(frames[k]), f"{gone} bytes skipped or cut for a frame of {len(frames[k])}"


# -- what reads the messages -------------------------------------------------------------------


def _counts(model: Session) -> tuple[int, ...]:
    counters = model.counters
    return (counters.events, counters.heartbeats, model.session_messages, counters.malformed, counters.unknown)


def _visible(model: Session) -> tuple[Any, ...]:
    """What the views show of a session, in short: a malformed message must change none of it."""
    counters, process, kernels = model.counters, model.process, model.kernels
    return (
        _counts(model)[:3],
        counters.unknown,
        counters.dropped,
        counters.produced,
        counters.backlog,
        counters.backlog_lost,
        (process.pid, process.argv, process.version, process.start_time, process.exit_reason),
        model.last_t_ns,
        len(model.tree.compiles),
        (kernels.batches, kernels.chunks, kernels.events_received, len(kernels.modules), kernels.tracing),
    )


def session(data: bytes) -> None:
    """The model, as replay feeds it (pass rows kept, a chunk at a time): nothing raises, every
    message is counted exactly once, a malformed one changes nothing, and what the views derive
    from it can be derived. Applied one message at a time it ends the same."""
    with within_bounds(len(data)):
        read = _read(data, rows=True)
        if read is None:
            return
        messages, _ = read
        model = Session()
        for start in range(0, len(messages), 64):
            model.apply(messages[start : start + 64])
        one_by_one = Session()
        for msg in messages:
            before, seen = _counts(one_by_one), _visible(one_by_one)
            one_by_one.apply([msg])
            moved = [after - was for after, was in zip(_counts(one_by_one), before, strict=True)]
            assert sorted(moved) == [0, 0, 0, 0, 1], f"one message moved the counts by {moved}"
            if moved[3]:
                assert _visible(one_by_one) == seen, "a malformed message changed the session"
        assert _counts(one_by_one) == _counts(model)
        model.end_stream("fuzz")
        kernels = model.kernels
        kernels.headline()
        kernels.title(following=True)
        for launch in kernels.newest_first():
            model.compile_label(launch.compile)
            launch.spans()


def dump(data: bytes) -> None:
    """``iket-tui dump`` and ``dump --records``, as text and as JSON lines: one line per message
    and per kernel event, each JSON line an object."""
    read = _read(data)
    if read is None:
        return
    messages, _ = read
    for line_of in (TextLines().line, json_line):
        expander = KernelEvents()
        lines: list[str] = []
        with within_bounds(len(data)):
            for msg in messages:
                lines.append(line_of(msg))
                lines.extend(line_of(event) for event in expander.events(msg))
        assert all(isinstance(line, str) and "\n" not in line for line in lines)
        if line_of is json_line:
            assert all(isinstance(json.loads(line), dict) for line in lines)
        assert all("\n" not in note for note in expander.notes())


def exports(data: bytes) -> None:
    """``iket-tui export`` in every format, of the recording and of the same frames told as a
    recording of several processes (:func:`_several`), each written as the command writes it:
    the stream of its format fed the reader's chunks of :data:`READ_CHUNK` bytes. Each gives a
    one-line :class:`ExportError` (with nothing written, as the whole-session exporter refuses
    it) or a file that reads back: a Chrome trace with as many timed events as it counted and
    the whole session's events, a speedscope file that is the whole session's document byte for
    byte, and a Perfetto trace that reads back against Perfetto's protos with every track's
    slices balanced, nested and in time order, as many slices and instants as it counted, the
    whole session's tracks and events (its bytes when it holds one process whose compiles came
    in the same order). Of several processes, every compile is in the Chrome trace under a
    named process and in the Perfetto trace under a process track.

    The streamed file is compared with the whole session's only where both sessions closed every
    compile at the same time (:func:`_closed`) and nothing came late (:func:`_late`), two cases
    still open (docs/reliability.md). The model takes a batch's time from its last message
    (messages come in time order), so a recording whose times run backwards, whose chunk ends in
    a malformed message, or where a process's stream ends amid a chunk (its open compiles close
    at the time the chunk before ended: 0 when the recording is applied whole) closes them at a
    time that depends on where the chunks end. A pass or codegen step that came after its
    compile was written (its process's stream ended, or its compile ended, and its messages
    went on) is left out by the stream and shown by the whole session.

    Each of the two is a pass over its input within its own bounds: reading it, the whole
    session, and for each format the whole-session export, the stream (reading and applying the
    recording again) and the file read back, a pass each."""
    passes = 2 + 3 * len(STREAMED)
    with within_bounds(len(data), passes):
        if not _exports(_file(data)):
            return
    several = _several(data)
    with within_bounds(len(several), passes):
        _exports(_file(several, "several.msgpack"))


STREAMED: tuple[str, ...] = FORMATS + BINARY_FORMATS
"""Every format ``iket-tui export`` writes."""


def _several(data: bytes) -> bytes:
    """The recording's frames as ``attach PID PID`` records several processes: its first frame
    (the recording's header), then runs of 1 to 13 of its other frames, each behind a ``process``
    message naming one of three pids, drawn from the input's bytes; some of those lie (a pid as
    text, a process whose stream ended whose messages go on), and the last names a process with
    no message after it (a recording that reads holds a frame)."""
    found = FrameDecoder(resync=True)
    found.feed(_stream(data))
    bodies = [*found, *found.finish()]
    digest = hashlib.sha256(data).digest()
    out = [MAGIC, encode_frame(bodies[0])]
    at = 1
    for index in itertools.count():
        if at >= len(bodies):
            break
        byte = digest[index % len(digest)] ^ (index // len(digest))
        pid = 5001 + byte % 3
        if byte % 8 == 0:
            out.append(encode_message({"type": m.PROCESS, "pid": str(pid), "start_time": 1}))
        elif byte % 8 == 1:
            out.append(encode_message(m.process(pid=pid, start_time=1, state=m.PROCESS_ENDED, reason="gone")))
        else:
            out.append(encode_message(m.process(pid=pid, start_time=1)))
        size = 1 + byte % 13
        out += (encode_frame(body) for body in bodies[at : at + size])
        at += size
    out.append(encode_message(m.process(pid=5004, start_time=1)))
    return b"".join(out)


def _streamed(fmt: str, path: Path) -> tuple[bytes, int, Session] | str:
    """What ``iket-tui export --format fmt`` writes for the recording at ``path``, the number of
    events it says it wrote and the session it applied the recording to, or its one-line
    refusal (having written nothing)."""
    written: list[bytes] = []
    reader: RecordingReader[Any] = RecordingReader(path, rows=True, chunk_size=READ_CHUNK)
    stream = stream_of(fmt, written.append, name=path.name)
    try:
        for chunk in reader.chunks():
            stream.feed(chunk)
        count = stream.finish()
    except ExportError as exc:
        assert not written, f"a refused {fmt} export wrote something"
        return _one_line(exc)
    for note in recording_notes(reader.info, verb="read") + session_notes(stream.session):
        _one_line(ValueError(note))
    return b"".join(written), count, stream.session


def _whole(fmt: str, model: Session, name: str) -> bytes | str:
    """The whole-session exporter's file of format ``fmt``, or its one-line refusal."""
    try:
        if fmt in FORMATS:
            document = export(model, fmt, name=name)
            return json.dumps(document, separators=(",", ":"), allow_nan=False).encode("utf-8")
        out = bytearray()
        perfetto_trace(model, out.extend, name=name)
        return bytes(out)
    except ExportError as exc:
        return _one_line(exc)


def _exports(path: Path) -> bool:
    """Every format of the recording at ``path`` checked; False when it is not a recording (a
    one-line error)."""
    read = _read_file(path)
    if read is None:
        return False
    model = recording_session(read[0])
    for fmt in STREAMED:
        whole = _whole(fmt, model, path.name)
        streamed = _streamed(fmt, path)
        if isinstance(streamed, str) or isinstance(whole, str):
            assert streamed == whole, f"{fmt}: the stream gave {streamed!r:.200}, the whole session {whole!r:.200}"
            continue
        written, count, applied = streamed
        alike = _closed(applied) == _closed(model) and not _late(applied)
        if fmt == "chrome":
            _chrome(
                json.loads(written)["traceEvents"], count, json.loads(whole)["traceEvents"] if alike else None, model
            )
        elif fmt == "speedscope":
            assert written == whole or not alike, "the speedscope file written while read is not the whole session's"
        else:
            _perfetto(written, count, whole if alike else None, model)
    return True


def _closed(session: Session) -> tuple[Any, ...]:
    """When the session saw its last message, and when and how it closed each compile."""
    return session.last_t_ns, [(comp.begin_ns, comp.end_ns, comp.status) for comp in session.tree.compiles]


def _late(applied: Session) -> int:
    """Pass and codegen events that came after their compile was written: the model counts them
    (they are left out of the file, and the export says how many)."""
    late = applied.tree.late_events
    said = [note for note in session_notes(applied) if note.startswith("left out ")]
    assert said == (
        [f"left out {late} pass and codegen events that came after their compile had ended and was written"]
        if late
        else []
    )
    return late


def _chrome(events: list[Any], count: int, whole: list[Any] | None, model: Session) -> None:
    """The Chrome trace written while read: as many timed events as counted, and the whole
    session's events: for one process every event (the stream writes a compile when it ends, the
    whole session in the order they began), of several the same timed events and what a viewer
    shows as each process's and thread's name and place (a process named before a second one
    appeared is named again); of several, each inside a named process."""
    timed = [event for event in events if event["ph"] != "M"]
    assert count == len(timed), f"counted {count} timed events, wrote {len(timed)}"
    if whole is not None and not model.tree.several:
        assert sorted(map(_key, events)) == sorted(map(_key, whole)), "not the whole session's Chrome trace"
    elif whole is not None:
        assert sorted(map(_key, timed)) == sorted(map(_key, (event for event in whole if event["ph"] != "M")))
        for kind in ("process_name", "process_sort_index", "thread_name", "thread_sort_index"):
            assert _shown(events, kind) == _shown(whole, kind), f"{kind} differs from the whole session's"
    if not model.tree.several:
        return
    named = {event["pid"] for event in events if event["ph"] == "M" and event["name"] == "process_name"}
    assert {event["pid"] for event in events} <= named, "an event outside every named process"
    compiles = sum(1 for event in events if event.get("cat") == "compile")
    assert compiles == len(model.tree.compiles), f"{len(model.tree.compiles)} compiles, {compiles} written"


def _shape(trace: Trace) -> list[Any]:
    """Every track of ``trace`` by its path of names from its process, with its events (a track's
    number may differ)."""
    out = []
    for track in trace.tracks.values():
        path, at = [], track
        while at is not None:
            path.append(at.name)
            at = trace.tracks[at.parent] if at.parent is not None else None
        out.append((tuple(reversed(path)), track.events))
    return sorted(out)


def _key(event: dict[str, Any]) -> str:
    return json.dumps(event, sort_keys=True)


def _shown(events: list[Any], kind: str) -> dict[tuple[Any, Any], Any]:
    """What a viewer shows for each metadata event of ``kind``: the last one written for its
    process (and thread)."""
    return {
        (event["pid"], event.get("tid")): _key(event["args"])
        for event in events
        if event["ph"] == "M" and event["name"] == kind
    }


def _perfetto(written: bytes, count: int, whole: bytes | None, model: Session) -> None:
    """The Perfetto trace written while read: it reads back against Perfetto's protos (every
    track's slices balanced, nested and in time order) with as many slices and instants as
    counted, and the whole session's tracks (by their names from their process) with the same
    events; the whole session's bytes when it holds one process whose tracks came in the same
    order (the stream writes a compile when it ends, the whole session in the order they began,
    so compiles of threads that overlap may come in another order); of several, every compile
    under a process track."""
    trace = decode(written)
    found = sum(len(trace.slices(track)) + len(trace.instants(track)) for track in trace.tracks.values())
    assert found == count, f"the exporter counted {count} slices and instants, the trace holds {found}"
    if whole is not None and written != whole:
        again = decode(whole)
        assert _shape(trace) == _shape(again), "the Perfetto trace written while read is not the whole session's"
        order = [track.name for track in trace.tracks.values()]
        assert model.tree.several or order != [track.name for track in again.tracks.values()], (
            "the Perfetto trace written while read is not the whole session's bytes, its tracks in the same order"
        )
    if not model.tree.several:
        return
    tracks = [track for track in trace.tracks.values() if track.name.startswith("compile ")]
    assert all(trace.process_of(track) is not None for track in tracks), "a compile outside every process"


TARGETS: dict[str, Target] = {
    "frames-strict": frames_strict,
    "frames-resync": frames_resync,
    "recording": recording,
    "session": session,
    "dump": dump,
    "export": exports,
}
"""Every fuzz target by name."""
