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

from peak_memory import PeakMemory, Way, best_way
from perfetto_reader import decode

from iket_tui.export import FORMATS, ChromeStream, ExportError, export, perfetto_trace, recording_session
from iket_tui.model.session import Session
from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import MessageDecoder, ProtocolError
from iket_tui.protocol.frames import HEADER_SIZE, FrameDecoder, FrameError, encode_frame
from iket_tui.protocol.recording import MAGIC, RecordingDecoder
from iket_tui.sources.base import SourceError
from iket_tui.sources.lines import KernelEvents, TextLines, json_line
from iket_tui.sources.reading import RecordingReader, recording_notes

SECONDS_PER_MB = 1.0
SECONDS_FLOOR = 1.0
MEMORY_FLOOR = 256 * 1024 * 1024
MEMORY_PER_BYTE = 64
MEMORY_BY: Way = best_way()
"""How each stretch's peak is read: the resident set's high-water mark, else tracemalloc."""

Target = Callable[[bytes], None]

_TMP_DIR = tempfile.TemporaryDirectory(prefix="iket-fuzz-")  # removed when the process ends
_TMP = Path(_TMP_DIR.name)


@contextmanager
def within_bounds(size: int, passes: int = 1) -> Iterator[None]:
    """Fail when what runs inside takes more than its time or memory for ``size`` input bytes,
    read ``passes`` times over (every export format is a pass of its own, each read back). The
    memory is this stretch's own peak, however high an earlier input took the process's."""
    peak = PeakMemory(MEMORY_BY)
    peak.start()
    start = time.process_time()  # the work done, whatever else the machine runs meanwhile
    yield
    elapsed = time.process_time() - start
    grew = peak.grew()
    allowed = passes * (SECONDS_FLOOR + SECONDS_PER_MB * size / 1e6)
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


def _file(data: bytes) -> Path:
    path = _TMP / "input.msgpack"
    path.write_bytes(data)
    return path


def _read(data: bytes, *, rows: bool = False) -> tuple[list[Any], RecordingReader[Any]] | None:
    """Every message of the recording, or None when it is not one (a one-line error)."""
    path = _file(data)
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
    """Every export, of the recording and of its messages told as a stream of several processes
    (:func:`_several`): a document JSON can write (no NaN), a Chrome trace written while read
    that JSON reads with as many timed events as it counted, a Perfetto trace that reads back
    against Perfetto's protos with every track's slices balanced, nested and in time order and
    as many slices and instants as the exporter counted, or a one-line :class:`ExportError`. Of
    several processes, every compile is in the Chrome trace under a named process and in the
    Perfetto trace under a process track. Each of the two is a pass over the input within its
    own bounds: the model, then each format written and read back, a pass over the input each."""
    passes = 2 + len(FORMATS)
    with within_bounds(len(data), passes):
        read = _read(data)
        if read is None:
            return
        messages, _ = read
        _exports(messages)
    with within_bounds(len(data), passes):
        _exports(_several(messages, data))


def _several(messages: list[Any], data: bytes) -> list[Any]:
    """The messages as the stream of several processes that ``attach PID PID`` records: runs of 1
    to 13 messages, each behind a ``process`` message naming one of three pids, drawn from the
    input's bytes; some of those lie (a pid as text, a process whose stream ended whose messages
    go on), and the last names a process with no message after it."""
    digest = hashlib.sha256(data).digest()
    out: list[Any] = []
    at = 0
    for index in itertools.count():
        if at >= len(messages):
            break
        byte = digest[index % len(digest)] ^ (index // len(digest))
        pid = 5001 + byte % 3
        if byte % 8 == 0:
            out.append({"type": m.PROCESS, "pid": str(pid), "start_time": 1})
        elif byte % 8 == 1:
            out.append(m.process(pid=pid, start_time=1, state=m.PROCESS_ENDED, reason="gone"))
        else:
            out.append(m.process(pid=pid, start_time=1))
        size = 1 + byte % 13
        out += messages[at : at + size]
        at += size
    out.append(m.process(pid=5004, start_time=1))
    return out


def _exports(messages: list[Any]) -> None:
    model = recording_session(messages)
    several = model.tree.several
    for fmt in FORMATS:
        try:
            document = export(model, fmt, name="fuzz")
        except ExportError as exc:
            _one_line(exc)
            continue
        json.dumps(document, allow_nan=False)
        if fmt == "chrome" and several:
            events = document["traceEvents"]
            named = {event["pid"] for event in events if event["ph"] == "M" and event["name"] == "process_name"}
            assert {event["pid"] for event in events} <= named, "an event outside every named process"
            compiles = sum(1 for event in events if event.get("cat") == "compile")
            assert compiles == len(model.tree.compiles), f"{len(model.tree.compiles)} compiles, {compiles} written"
    written_text: list[bytes] = []
    stream = ChromeStream(written_text.append, name="fuzz")
    try:
        for start in range(0, len(messages), 64):
            stream.feed(messages[start : start + 64])
        count = stream.finish()
    except ExportError as exc:
        _one_line(exc)
        assert not written_text, "a refused export wrote something"
    else:
        streamed = json.loads(b"".join(written_text))["traceEvents"]
        assert count == sum(1 for event in streamed if event["ph"] != "M")
    out = bytearray()
    try:
        counted = perfetto_trace(model, out.extend, name="fuzz")
    except ExportError as exc:
        _one_line(exc)
        assert not out, "a refused export wrote something"
        return
    trace = decode(bytes(out))
    written = sum(len(trace.slices(track)) + len(trace.instants(track)) for track in trace.tracks.values())
    assert written == counted, f"the exporter counted {counted} slices and instants, the trace holds {written}"
    if several:
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
