"""One stream from the agents of several processes: ``iket-tui attach PID PID ...``, ``attach
--all``, and ``run`` following the processes its program starts.

Each process's agent is read by its own :class:`~iket_tui.sources.socket.SocketSource` on its
own thread; their batches are handed out one by one, each behind a ``process`` message naming
whose messages follow (:func:`iket_tui.protocol.messages.process`), so that the session tells
them apart. When one process's stream ends, a ``process`` message with its ``state`` says so,
and the others go on; the merged stream ends once every process's has (and, while following,
once the processes to follow are done). A process's stream that fails is a note naming its pid,
unless it was the only one (``run`` follows even one process through here) or every one failed:
then the merged stream fails with that error, as a lone :class:`SocketSource` would. New agents are looked for every
:data:`FIND_EVERY_S` through ``find`` (the agents below the program, or every agent of this
user).

A recording of the merged stream holds every process's frames as they arrived, each run of
one process's frames after a ``process`` frame naming it: replaying it tells them apart the
same way. Requests name the process they are for; each answer comes back under the id the
merged stream gave the request. A request its source answers itself (the native stacks, see
:data:`~iket_tui.sources.base.NATIVE_STACKS`) goes to that process's source the same way, which
reads only its own process.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from iket_tui.protocol import messages as m
from iket_tui.sources.base import Answer, HostState, SourceBatch, SourceError, SourceState
from iket_tui.sources.recorder import RecordingStopped, RecordingWriter
from iket_tui.sources.socket import DEFAULT_REQUEST_TIMEOUT_S, SocketSource

FIND_EVERY_S = 0.1
"""How often new agents are looked for while following."""

MERGE_EVERY_S = 0.1
"""How long the batches of several processes are gathered into one (each process's own come
about every 30 ms): with 64 ranks' heartbeats, the UI applies and draws 10 batches a second, not 64."""

FramesTo = Callable[[bytes, list[m.Item]], None]
ReaderOf = Callable[[Path, FramesTo | None], SocketSource]
"""Makes the source of one process from its path and where its received frames go."""


def process_message(
    *, pid: int, start_time: int, host: str | None, state: str | None = None, reason: str | None = None
) -> m.Message:
    """A ``process`` message (:func:`iket_tui.protocol.messages.process`) naming also the machine
    the process runs on, where that is another one: pids of different machines may be the same,
    so a process is told apart by both (docs/protocol.md, "One ssh connection per host")."""
    msg = m.process(pid=pid, start_time=start_time, state=state, reason=reason)
    if host is not None:
        msg["host"] = host
    return msg


def _joined(batches: Sequence[SourceBatch]) -> SourceBatch:
    """Several merged batches as one, in order (none of them changes the stream's state)."""
    if len(batches) == 1:
        return batches[0]
    return SourceBatch(
        messages=tuple(msg for batch in batches for msg in batch.messages),
        notes=tuple(note for batch in batches for note in batch.notes),
        answers=tuple(answer for batch in batches for answer in batch.answers),
        recording_stopped=next((b.recording_stopped for b in batches if b.recording_stopped is not None), None),
        hosts=next((b.hosts for b in reversed(batches) if b.hosts is not None), None),
    )


class SharedRecording:
    """One recording written by the readers of several processes. Called from the readers'
    threads.

    Until a second process writes, the file is exactly the recording of the first one; from
    then on each run of one process's frames follows a ``process`` frame naming it (frames
    before any ``process`` frame are the first process's).
    """

    def __init__(self, writer: RecordingWriter) -> None:
        self.writer = writer
        self._lock = threading.Lock()
        self._first: tuple[str | None, int] | None = None  # (host, pid)
        self._several = False
        self._current: tuple[str | None, int] | None = None

    def frames_of(
        self, hello_of: Callable[[], m.Message | None], host: str | None = None
    ) -> Callable[[bytes, list[m.Item]], None]:
        """Where a reader writes the frames it received (raises ``RecordingStopped``);
        ``hello_of`` gives its agent's hello, which names the process, on ``host`` when it runs
        on another machine (then every run of its frames follows a ``process`` frame naming
        both, since pids of different machines may be the same)."""

        def write(data: bytes, msgs: list[m.Item]) -> None:
            hello = hello_of()
            key = (host, hello["pid"] if hello is not None else 0)
            with self._lock:
                if self._first is None:
                    self._first = self._current = key
                    self._several = host is not None
                elif key != self._first:
                    self._several = True
                if self._several and self._current != key:
                    start = hello["start_time"] if hello is not None else 0
                    self.writer.write(process_message(pid=key[1], start_time=start, host=host))
                    self._current = key
                self.writer.write_frames(data, msgs)
                self.writer.flush()

        return write

    def note(self, msg: m.Message) -> None:
        """Write a message of the merged stream's own (a process's stream ended), once the
        recording holds several processes."""
        with self._lock, contextlib.suppress(RecordingStopped):
            if self._several:
                self.writer.write(msg)
                self.writer.flush()
                self._current = None

    def close(self, reason: str) -> None:
        with self._lock:
            self.writer.close(reason)


@dataclass(eq=False)
class _Reader:
    """One process's source, and what the merged stream knows of it."""

    source: SocketSource
    pid: int = 0
    start_time: int = 0
    ended: bool = False
    failed: str | None = None  # why its stream failed, if it did

    @property
    def host(self) -> str | None:
        """The machine the process runs on, when it is another one."""
        host: str | None = getattr(self.source, "host", None)  # a source that reads elsewhere names none
        return host

    @property
    def label(self) -> str:
        """The process in the user's words: ``pid 123``, or ``node3/pid 123`` on another machine."""
        return f"pid {self.pid}" if self.host is None else f"{self.host}/pid {self.pid}"


class ProcessStreams:
    """An :class:`~iket_tui.sources.base.EventSource` over the agents of several processes.

    ``paths`` are connected by :meth:`connect` (a bad one is a one-line :class:`SourceError`
    naming it). ``find`` returns the sockets of agents to follow as they appear; ``following``
    says whether more may still appear (``run`` stops looking once its program exited).
    ``reader_options`` are passed to every :class:`SocketSource`; ``reader_of`` makes each
    process's source instead (given its path and where its frames go), for agents that are not
    local sockets (``HOST:PID`` through ssh). ``hosts`` gives the state of each machine of a
    watch across machines: a batch says it whenever it changed. ``on_close`` runs once the
    merged stream is closed (the hosts' connections end then). ``first_notes`` come with the
    first batch (a host that could not be reached as the watch began).
    """

    def __init__(
        self,
        paths: Sequence[Path],
        *,
        record_to: Path | None = None,
        find: Callable[[], Iterable[Path]] | None = None,
        following: Callable[[], bool] | None = None,
        description: str | None = None,
        reader_options: Mapping[str, Any] | None = None,
        reader_of: ReaderOf | None = None,
        hosts: Callable[[], tuple[HostState, ...]] | None = None,
        on_close: Callable[[], None] | None = None,
        first_notes: Sequence[str] = (),
    ) -> None:
        self.paths = [Path(path) for path in paths]
        self.description = description or "processes " + ", ".join(str(path) for path in self.paths)
        self.record_to = record_to
        self.recorder: RecordingWriter | None = None
        self.error: str | None = None
        self.end_reason: str | None = None
        self.by_rank = False
        """The processes are ranks of a job (across machines), named and ordered by rank."""
        self._find = find
        self._following = following
        self._options = dict(reader_options or {})
        self._reader_of = reader_of
        self._hosts = hosts
        self._hosts_said: tuple[HostState, ...] | None = None
        self._on_close = on_close
        self._first_notes = tuple(first_notes)
        self._readers: list[_Reader] = []
        self._known: set[Path] = set()
        self._shared: SharedRecording | None = None
        self._arrived: queue.Queue[tuple[_Reader, SourceBatch | None]] = queue.Queue()
        self._lock = threading.Lock()
        self._closed = False
        self._close_reason: str | None = None
        self._connected = False
        self._ids = itertools.count(1)
        self._asking = threading.Lock()  # held from sending a request until its id is mapped
        self._asked: dict[tuple[int, int], int] = {}  # (id() of the reader, its request id) -> our id
        self._unsaid: list[str] = []  # failures of a process not yet said (it was the only one then)
        self._next_find = 0.0  # when to look for new agents next (monotonic seconds)

    @property
    def who(self) -> str:
        return self.description

    @property
    def pids(self) -> list[int]:
        """The processes followed so far, in the order they were found."""
        return [reader.pid for reader in self._readers]

    # -- connecting ---------------------------------------------------------------------

    def connect(self) -> list[m.Message]:
        """Connect to every agent named; returns their hellos. Raises :class:`SourceError`."""
        with self._lock:
            if self._connected:
                return [reader.source.agent_hello or {} for reader in self._readers]
            self._connected = True
        if self.record_to is not None:
            self.recorder = RecordingWriter(self.record_to, source=self.description)
            self._shared = SharedRecording(self.recorder)
        hellos = []
        try:
            for path in self.paths:
                reader = self._reader(path)
                hellos.append(reader.source.connect())
                self._note_hello(reader)
        except SourceError:
            self._close_readers("error")
            self._drop_recording()
            raise
        return hellos

    def _drop_recording(self) -> None:
        """Remove the recording begun for a stream that never started (an agent named could not
        be connected to): it would hold no more than the agents that did answer."""
        path = self.record_to
        if path is not None and path.is_file():
            with contextlib.suppress(OSError):
                path.unlink()

    def _reader(self, path: Path) -> _Reader:
        made: list[SocketSource] = []
        frames_to = self._frames_to(made) if self._shared is not None else None
        if self._reader_of is not None:
            source = self._reader_of(path, frames_to)
        else:
            source = SocketSource(path, frames_to=frames_to, **self._options)
        made.append(source)
        reader = _Reader(source)
        with self._lock:
            self._readers.append(reader)
            self._known.add(path)
        return reader

    def _frames_to(self, made: list[SocketSource]) -> FramesTo:
        """Where the source that ``made`` will hold writes its frames in the shared recording."""
        shared = self._shared
        assert shared is not None
        write: list[FramesTo] = []

        def frames_to(data: bytes, msgs: list[m.Item]) -> None:
            if not write:  # the source exists by its first frame, and knows its host
                write.append(shared.frames_of(lambda: made[0].agent_hello, getattr(made[0], "host", None)))
            write[0](data, msgs)

        return frames_to

    def _note_hello(self, reader: _Reader) -> None:
        hello = reader.source.agent_hello
        if hello is not None:
            reader.pid, reader.start_time = hello["pid"], hello["start_time"]

    # -- the merged stream --------------------------------------------------------------

    def batches(self) -> Iterator[SourceBatch]:
        try:
            self.connect()
        except SourceError as exc:
            self.error = str(exc)
            yield SourceBatch(state=SourceState.FAILED, error=self.error)
            return
        for reader in list(self._readers):
            self._start(reader)
        yield SourceBatch(state=SourceState.LIVE, notes=self._first_notes)
        try:
            yield from self._merge()
        finally:
            self._close_readers(self.end_reason or self._close_reason or "closed")

    def _start(self, reader: _Reader) -> None:
        threading.Thread(
            target=self._read, args=(reader,), name=f"iket-tui read {reader.source.path}", daemon=True
        ).start()

    def _read(self, reader: _Reader) -> None:
        if reader.source.agent_hello is None:  # found while following: connected here
            try:
                reader.source.connect()
            except SourceError:  # a socket nothing listens on (yet): not an agent to follow
                with self._lock:
                    self._readers.remove(reader)
                return
            self._note_hello(reader)
        try:
            for batch in reader.source.batches():
                self._note_hello(reader)
                self._arrived.put((reader, batch))
        except Exception as exc:  # one process's reader failing ends only its stream
            self._arrived.put((reader, SourceBatch(state=SourceState.FAILED, error=str(exc))))
        self._arrived.put((reader, None))

    def _merge(self) -> Iterator[SourceBatch]:
        held: list[SourceBatch] = []  # the processes' batches gathered into the next one out
        flush_at = 0.0
        while not self._closed:
            self._look_for_new()
            hosts = self._hosts_changed()
            if hosts is not None:  # said at once
                held.append(SourceBatch(hosts=hosts))
                flush_at = time.monotonic()
            wait = max(0.0, flush_at - time.monotonic()) if held else FIND_EVERY_S
            try:
                reader, batch = self._arrived.get(timeout=wait)
            except queue.Empty:
                if held:
                    yield _joined(held)
                    held = []
                elif self._all_done():
                    break
                continue
            if batch is None:
                reader.ended = True
                failed = self._every_one_failed()
                if failed is not None:
                    if held:
                        yield _joined(held)
                    self.error = self.end_reason = failed
                    yield SourceBatch(state=SourceState.FAILED, error=failed)
                    return
                if self._all_done():
                    break
                continue
            if not held:
                flush_at = time.monotonic() + MERGE_EVERY_S
            held.append(self._merged(reader, batch))
        if held and not self._closed:
            yield _joined(held)
        if not self._closed:
            self.end_reason = "every process's stream ended"
            notes, self._unsaid = tuple(self._unsaid), []
            yield SourceBatch(state=SourceState.ENDED, notes=notes)

    def _hosts_changed(self) -> tuple[HostState, ...] | None:
        """The state of every machine watched, when it changed since it was last said."""
        if self._hosts is None:
            return None
        hosts = self._hosts()
        if hosts == self._hosts_said:
            return None
        self._hosts_said = hosts
        return hosts

    def _every_one_failed(self) -> str | None:
        """Why the merged stream failed, when every process's stream ended by failing (one
        process alone, whose failure is then the stream's, as a lone source's would be); ``None``
        while any stream runs or one ended well. Each is failed at once, even while following:
        nothing is left to watch."""
        with self._lock:
            readers = list(self._readers)
        if not readers or not self._arrived.empty():
            return None
        if not all(reader.ended and reader.failed is not None for reader in readers):
            return None
        if len(readers) == 1:
            return readers[0].failed
        return "every process's stream failed: " + "; ".join(f"{r.label}: {r.failed}" for r in readers)

    def _all_done(self) -> bool:
        with self._lock:
            readers = list(self._readers)
        if not all(reader.ended for reader in readers) or not self._arrived.empty():
            return False
        return self._following is None or not self._following()

    def _look_for_new(self) -> None:
        """New agents to follow, looked for at most every :data:`FIND_EVERY_S` however fast
        batches come."""
        if self._find is None or (self._following is not None and not self._following()):
            return
        now = time.monotonic()
        if now < self._next_find:
            return
        self._next_find = now + FIND_EVERY_S
        try:
            found = list(self._find())
        except OSError:
            return
        for path in found:
            if path not in self._known and not self._closed:
                self._start(self._reader(path))

    def _merged(self, reader: _Reader, batch: SourceBatch) -> SourceBatch:
        """``batch`` of one process's stream as a batch of the merged one."""
        marker = process_message(pid=reader.pid, start_time=reader.start_time, host=reader.host)
        notes = batch.notes
        messages: tuple[m.Message, ...] = (marker, *batch.messages) if batch.messages else ()
        if batch.state in (SourceState.ENDED, SourceState.FAILED):
            failed = batch.state is SourceState.FAILED
            why = batch.error or reader.source.end_reason or "its stream ended"
            ended = process_message(
                pid=reader.pid,
                start_time=reader.start_time,
                host=reader.host,
                state=m.PROCESS_FAILED if failed else m.PROCESS_ENDED,
                reason=why,
            )
            messages = (*messages, ended)
            if self._shared is not None:
                self._shared.note(ended)
            if failed:
                reader.failed = why
                with self._lock:
                    alone = len(self._readers) == 1
                if alone:  # said as the stream's own error, unless another process turns up
                    self._unsaid.append(f"{reader.label}: {why}")
                else:
                    notes = (*notes, f"{reader.label}: {why}")
        if self._unsaid and len(self._readers) > 1:  # a failure held back is one process's of several now
            notes, self._unsaid = (*self._unsaid, *notes), []
        answers = tuple(self._ours(reader, answer) for answer in batch.answers)
        return SourceBatch(messages=messages, notes=notes, answers=answers, recording_stopped=batch.recording_stopped)

    # -- requests -----------------------------------------------------------------------

    def request(self, what: str, *, timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S, **fields: object) -> int:
        """Ask the agent of the process ``process`` names in ``fields`` (by default the first
        one; on the machine ``host`` names, when it runs on another one) for ``what``; the answer
        comes under the id returned. Raises :class:`SourceError` for a process not watched."""
        process = fields.pop("process", None)
        host = fields.pop("host", None)
        with self._lock:
            readers = list(self._readers)
        reader = next((r for r in readers if process is None or (r.pid == process and r.host == host)), None)
        if reader is None:
            who = f"pid {process}" if host is None else f"{host}/pid {process}"
            raise SourceError(f"{who} is not one of the processes watched")
        with self._asking:  # an answer merged before the mapping is stored waits for it
            theirs = reader.source.request(what, timeout_s=timeout_s, **fields)
            ours = next(self._ids)
            self._asked[(id(reader), theirs)] = ours
        return ours

    def _ours(self, reader: _Reader, answer: Answer) -> Answer:
        with self._asking:
            ours = self._asked.pop((id(reader), answer.request_id), answer.request_id)
        response = answer.response
        if response is not None:
            response = {**response, "id": ours}
        return replace(answer, request_id=ours, response=response)

    # -- closing ------------------------------------------------------------------------

    def close(self, reason: str = "closed") -> None:
        """End the merged stream soon; safe from any thread."""
        self._closed = True
        self._close_reason = self._close_reason or reason
        for reader in list(self._readers):
            reader.source.close(reason)
        self._closing()

    def _closing(self) -> None:
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()

    def close_and_wait(self, reason: str = "closed", *, timeout_s: float = 5.0) -> None:
        self.close(reason)
        for reader in list(self._readers):
            reader.source.close_and_wait(reason, timeout_s=timeout_s)
        self._close_recording(reason)

    def _close_readers(self, reason: str) -> None:
        for reader in list(self._readers):
            reader.source.close(reason)
        self._closing()
        self._close_recording(reason)

    def _close_recording(self, reason: str) -> None:
        if self._shared is not None:
            with contextlib.suppress(SourceError):
                self._shared.close(reason)
