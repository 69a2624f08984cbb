"""Live events from an agent's Unix socket, batched for the UI and optionally recorded.

The source connects, refuses a peer of another user, exchanges hellos (a foreign socket or
another major protocol version is a one-line error), refuses an agent that is not the process
the socket is named after, then reads frames strictly and hands them out about every 30 ms.
Whatever arrived before an error or a hang-up is delivered before the state that ends the
stream. Pass events batched as pass rows are handed out as rows, as a replay does (see
:mod:`iket_tui.protocol.messages`). Requests go out on the same socket; each is settled by one
:class:`~iket_tui.sources.base.Answer` in a batch: the agent's response, or why none came
(overdue, or the stream ended first).

An agent that goes away while its process runs on (stopped and started again in the same
process, or hanging up without a bye) is reconnected to at the same socket for a while: the
new connection takes the stream up where the old one left it (see docs/protocol.md
"Reconnecting" for the few events that may come twice), and the gap is
shown in the batches' notes and counted (:attr:`SocketSource.reconnections`; the events of
the gap that the agent no longer held, as its ``sync``'s ``backlog_lost``).

One request the source answers itself: :data:`~iket_tui.sources.base.NATIVE_STACKS`, py-spy's
dump of the process the source is connected to, read on a thread of its own (never the app's,
and never holding up the stream) and only where the kernel says that process serves the socket
on this machine; the answer joins the stream's batches as the agent's answers do.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import selectors
import socket
import sys
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from pathlib import Path
from typing import Any, cast

from iket_tui import __version__
from iket_tui.durations import duration
from iket_tui.endpoints import (
    EndpointError,
    ForeignPeerError,
    check_peer,
    endpoint_of,
    in_runtime_dir,
    must_run_as,
    owner_out_of_reach,
    peer_pid,
    process_alive,
    process_start_time,
    too_long_to_connect,
)
from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import MessageDecoder, ProtocolError, check_hello, decode_body, encode_message
from iket_tui.protocol.frames import FrameError
from iket_tui.sources.base import NATIVE_STACKS, Answer, SourceBatch, SourceError, SourceState
from iket_tui.sources.py_spy import NativeStacks, native_stacks
from iket_tui.sources.recorder import RecordingStopped, RecordingWriter

_RECV_SIZE = 256 * 1024
_MAX_BATCH = 20_000
DEFAULT_REQUEST_TIMEOUT_S = 10.0
DEFAULT_RECONNECT_S = 30.0
CAP_RESUME = "resume"  # an agent's capability: it takes up a client's stream where it left it
_DYING_S = 0.3  # a killed process closes its sockets a moment before it is seen to have died
_RETRY_S = 0.1
_NOT_EVENTS = frozenset({m.HELLO, m.HEARTBEAT, m.SYNC, m.DROPPED, m.BYE, m.RESPONSE})


class SocketSource:
    """An :class:`~iket_tui.sources.base.EventSource` over one agent socket.

    :meth:`connect` may be called first to report a bad target before any UI starts;
    :meth:`batches` connects itself otherwise. With ``record_to`` every frame received,
    the agent's hello included, is written to that recording as it arrives; a recording that
    cannot go on (the disk is full) stops there, the stream goes on, and the next batch says
    so in ``recording_stopped``. With ``frames_to`` instead, the frames go to that function (a
    recording of several processes' streams, see :mod:`iket_tui.sources.merged`). After the stream
    ends, :attr:`error` holds the one-line failure (``None`` when it ended normally) and
    :attr:`end_reason` says why it ended.
    """

    native_margin_s = 5.0
    """How long past its own timeout the source waits for py-spy's answer before calling it overdue."""
    host: str | None = None
    """The machine the agent runs on, where it is another one (through ssh)."""

    def __init__(
        self,
        path: Path,
        *,
        record_to: Path | None = None,
        hello_timeout_s: float = 10.0,
        connect_retry_s: float = 0.0,
        batch_interval_s: float = 0.03,
        reconnect_s: float = DEFAULT_RECONNECT_S,
        filters: Mapping[str, Any] | None = None,
        frames_to: Callable[[bytes, list[m.Item]], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self.description = f"socket {self.path}"
        self.record_to = record_to
        self.agent_hello: m.Message | None = None
        self.recorder: RecordingWriter | None = None
        self.error: str | None = None
        self.end_reason: str | None = None
        self.received = 0
        self.unknown = 0
        self.reconnections = 0
        """Times the stream was taken up again after its agent went away and came back."""
        self.filters: dict[str, Any] = dict(filters or {})
        """The passes asked of the agent (``passes`` globs, ``depth``): sent in every hello; empty for all."""
        self._hello_timeout_s = hello_timeout_s
        self._reconnect_s = reconnect_s
        self._resumable = False  # a local agent that takes a stream up again: worth reconnecting to
        self._served_here = False  # the kernel says the process of the hello serves the connection
        self._produced_seen: int | None = None  # the agent's events this client has or knows lost
        self._filtered_seen: int | None = None  # the agent's last count of events this client's filter left out
        self._unknown_before = 0  # unknown messages of earlier connections
        self._gap_started: float | None = None  # when the agent went away, until its sync is back
        self._gap_notes: list[str] = []
        self._connect_retry_s = connect_retry_s
        self._batch_interval_s = batch_interval_s
        self._decoder = MessageDecoder(rows=True)
        self._unrecorded = bytearray()  # received bytes not yet written to the recording
        self._frames_to = frames_to  # where received frames go when a merged recording holds them
        self._recording_stopped: str | None = None  # why recording stopped, for the next batch
        self._recorded = 0  # stream bytes accounted for: recorded, or skipped when not recording
        self._sock: socket.socket | None = None
        self._pending: list[m.Item] = []
        self._bye: m.Message | None = None
        self._lock = threading.RLock()
        self._closed = False
        self._close_reason: str | None = None
        self._busy = 0  # calls of connect() and batches() in progress
        self._finished = False
        self._done = threading.Event()
        self._next_request = 1
        self._send_lock = threading.Lock()
        self._asked: dict[int, tuple[float, float]] = {}  # request id -> (deadline, timeout), under _send_lock
        self._answers: list[Answer] = []  # settled requests not yet handed out; the reader's thread only
        self._answered_aside: list[Answer] = []  # answers of the source's own, under _send_lock, to settle
        self._reading_native = False  # py-spy runs for a request now (one at a time), under _send_lock
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)

    @property
    def who(self) -> str:
        """The peer in the user's words: its pid once known, else the socket path."""
        if self.agent_hello is not None:
            return f"pid {self.agent_hello['pid']}"
        return str(self.path)

    def connect(self) -> m.Message:
        """Connect and exchange hellos; returns the agent's hello. Raises :class:`SourceError`."""
        with self._lock:
            if self.agent_hello is not None:
                return self.agent_hello
            if self._closed:
                raise SourceError(f"{self.path}: closed before connecting")
            self._busy += 1
        try:
            return self._connect()
        finally:
            with self._lock:
                self._busy -= 1
                idle = self._busy == 0
            if idle and self._closed:
                self._shutdown()

    def _connect(self) -> m.Message:
        sock = self._open_socket()
        hello = self._greet(sock)
        self._resumable = CAP_RESUME in (hello.get("caps") or ()) and self._served_here
        self.agent_hello = hello
        self.description = self._describe(hello)
        if self.record_to is not None:
            self.recorder = RecordingWriter(self.record_to, source=self.description)
        self._pending.append(hello)
        self._record(self._decoder.frames.consumed, [hello])
        return hello

    def request(self, what: str, *, timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S, **fields: object) -> int:
        """Ask the agent for ``what`` (``messages.WHAT_*``, with its fields); the
        :class:`~iket_tui.sources.base.Answer` comes in a batch of :meth:`batches` within
        ``timeout_s``. Raises :class:`SourceError` when not connected or the write fails.

        :data:`~iket_tui.sources.base.NATIVE_STACKS` is not sent: the source answers it itself."""
        if what == NATIVE_STACKS:
            return self._read_native(timeout_s)
        with self._send_lock:
            sock = self._asking_socket()
            request_id = self._new_request(timeout_s, timeout_s)
            try:
                sock.sendall(encode_message(m.request(id=request_id, what=what, **fields)))
            except OSError as exc:
                del self._asked[request_id]
                raise SourceError(f"cannot ask {self.who}: {_why(exc)}") from None
        with contextlib.suppress(OSError):
            self._wake_w.send(b"r")  # the reader's wait now has a deadline to keep
        return request_id

    def _asking_socket(self) -> socket.socket:
        """The connection a request may go out on (under ``_send_lock``); :class:`SourceError` when none."""
        sock = self._sock
        if sock is None or self.agent_hello is None:
            raise SourceError(f"not connected to {self.who}")
        if self._closed or self._finished or self._bye is not None or sock.fileno() < 0:
            raise SourceError(f"{self.who} is no longer connected (the target exited, or the stream ended)")
        return sock

    def _new_request(self, wait_s: float, timeout_s: float) -> int:
        """A new request's id, overdue after ``wait_s`` (said as ``timeout_s``); under ``_send_lock``."""
        request_id = self._next_request
        self._next_request += 1
        self._asked[request_id] = (time.monotonic() + wait_s, timeout_s)
        return request_id

    def _read_native(self, timeout_s: float) -> int:
        """Start reading the native stacks of the connected process off the reader's thread;
        returns the request id whose answer joins a later batch."""
        with self._send_lock:
            self._asking_socket()
            hello = self.agent_hello
            assert hello is not None
            request_id = self._new_request(timeout_s + self.native_margin_s, timeout_s)
            busy = self._reading_native
            self._reading_native = True
        if busy:  # py-spy pauses the target while it reads it: one at a time
            self._answer_aside(Answer(request_id, error="native stacks are being read already: wait for them"))
            return request_id
        threading.Thread(
            target=self._answer_native,
            args=(request_id, hello, timeout_s),
            name=f"iket-tui native stacks of {self.who}",
            daemon=True,
        ).start()
        return request_id

    def _answer_native(self, request_id: int, hello: m.Message, timeout_s: float) -> None:
        try:
            found = self._native_stacks(hello, timeout_s)
        except Exception as exc:  # whatever went wrong is this request's one-line answer, not a traceback
            found = NativeStacks(None, f"native stacks failed: {type(exc).__name__}: {exc}".splitlines()[0])
        if found.text is None:
            answer = Answer(request_id, error=found.why or "no native stacks")
        else:
            response = {
                "type": m.RESPONSE,
                "id": request_id,
                "ok": True,
                "what": NATIVE_STACKS,
                "pid": hello["pid"],
                "target": self.who,
                "text": found.text,
            }
            answer = Answer(request_id, response=response)
        with self._send_lock:
            self._reading_native = False
        self._answer_aside(answer)

    def _answer_aside(self, answer: Answer) -> None:
        """Hand ``answer`` out in the reader's next batch, woken for it."""
        with self._send_lock:
            self._answered_aside.append(answer)
        with contextlib.suppress(OSError):
            self._wake_w.send(b"r")

    def _native_stacks(self, hello: m.Message, timeout_s: float) -> NativeStacks:
        """py-spy's dump of the process whose hello this is, when it serves the connection on
        this machine and still runs (not another process that took its pid meanwhile)."""
        pid, start = hello["pid"], hello["start_time"]
        if not self._served_here:
            return NativeStacks(
                None,
                f"native stacks are read on the target's machine, and pid {pid} does not serve {self.path}"
                " here (a forwarded socket?)",
            )
        if not process_alive(pid, start):
            return NativeStacks(None, f"pid {pid} has exited")
        found = native_stacks(pid, timeout_s)
        if found.text is not None and not process_alive(pid, start):
            return NativeStacks(None, f"pid {pid} exited while py-spy read it")
        return found

    def batches(self) -> Iterator[SourceBatch]:
        with self._lock:
            if self._closed or self._finished:
                return
            self._busy += 1
        try:
            try:
                self.connect()
            except SourceError as exc:
                self.error = str(exc)
                yield SourceBatch(state=SourceState.FAILED, error=self.error)
                return
            for batch in self._stream():
                yield self._with_recording_news(batch)
        finally:
            self._shutdown()

    def close(self, reason: str = "closed") -> None:
        """End the stream soon; safe from any thread and from a signal handler."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._close_reason = reason
            if self._busy:
                with contextlib.suppress(OSError):
                    self._wake_w.send(b"x")
                return
        self._shutdown()

    def close_and_wait(self, reason: str = "closed", *, timeout_s: float = 5.0) -> None:
        """Close, and wait until the socket and the recording are closed (the ``end`` frame
        written) by the thread reading :meth:`batches`; after ``timeout_s`` close them here."""
        self.close(reason)
        if not self._done.wait(timeout_s):
            self._shutdown()

    # -- connecting ---------------------------------------------------------------------

    def _open_socket(self) -> socket.socket:
        too_long = too_long_to_connect(self.path)
        if too_long is not None:
            raise SourceError(too_long)
        deadline = time.monotonic() + self._connect_retry_s
        while True:
            try:
                return self._connect_once()
            except _NotListening as exc:
                if time.monotonic() >= deadline or self._closed:
                    raise SourceError(_connect_error(self.path, exc.cause)) from None
                time.sleep(0.05)

    def _connect_once(self) -> socket.socket:
        """A connection to a peer of this user; :class:`_NotListening` when nothing listens at
        the path (yet), :class:`SourceError` when it cannot be connected to at all."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(self.path))
            check_peer(sock)
            return sock
        except ForeignPeerError as exc:
            sock.close()
            raise SourceError(
                f"{self.path}: peer runs as uid {exc.uid}, so the agent belongs to uid {exc.uid}; {must_run_as()}"
            ) from None
        except EndpointError as exc:
            sock.close()
            raise SourceError(f"{self.path}: {exc}") from None
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            sock.close()
            raise _NotListening(exc) from None
        except OSError as exc:
            sock.close()
            raise SourceError(_connect_error(self.path, exc)) from None

    def _greet(self, sock: socket.socket, resume: int | None = None) -> m.Message:
        """Exchange hellos on a new connection (``resume``: the events this client has of an
        earlier one) and check who answers; returns the agent's hello."""
        with self._send_lock:
            self._sock = sock
        try:
            sock.sendall(encode_message(_client_hello(resume, self.filters)))
        except OSError as exc:
            raise _GoneWhileGreeting(f"{self.path}: connection lost while greeting the agent ({_why(exc)})") from None
        hello = self._check_hello(self._read_hello(sock))
        self._check_identity(sock, hello)
        self._served_here = self._served_by_agent(sock, hello)
        return hello

    def _read_hello(self, sock: socket.socket) -> bytes:
        deadline = time.monotonic() + self._hello_timeout_s
        with selectors.DefaultSelector() as sel:
            sel.register(sock, selectors.EVENT_READ)
            sel.register(self._wake_r, selectors.EVENT_READ)
            while True:
                try:
                    body = next(self._decoder.frames)
                except StopIteration:
                    pass
                except FrameError as exc:
                    raise SourceError(f"{self.path}: not an iket-tui agent ({exc})") from None
                else:
                    return body
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SourceError(
                        f"{self.path}: no hello within {self._hello_timeout_s:g} s (not an iket-tui agent?)"
                    )
                events = sel.select(left)
                if self._closed:
                    raise SourceError(f"{self.path}: closed before the agent said hello")
                if not events:
                    continue
                data = _recv(sock)
                if not data:
                    raise _GoneWhileGreeting(
                        f"{self.path}: the peer hung up before saying hello (not an iket-tui agent?)"
                    )
                self._feed(data)

    def _check_hello(self, body: bytes) -> m.Message:
        try:
            hello = decode_body(body)
        except ProtocolError as exc:
            raise SourceError(f"{self.path}: not an iket-tui agent ({exc})") from None
        try:
            check_hello(hello, expect_role="agent")
        except ProtocolError as exc:
            raise SourceError(f"{self.path}: {exc}") from None
        self.received += 1
        return hello

    def _check_identity(self, sock: socket.socket, hello: m.Message) -> None:
        """Refuse an agent that is not the process the socket is named after (``<pid>-<start
        time>.sock``, as a pid given resolves to): its hello must name that pid and start time,
        and in the runtime directory, where only local agents listen, the kernel must say that
        process serves the socket. A socket of another name is whoever answers (a forwarded
        one, say), shown by the pid its hello names."""
        why = "refusing it (another program listens at that socket)"
        first = self.agent_hello
        if first is not None and (hello["pid"], hello["start_time"]) != (first["pid"], first["start_time"]):
            raise SourceError(
                f"{self.path}: pid {hello['pid']} answers there now, not pid {first['pid']} that did; {why}"
            )
        named = endpoint_of(self.path)
        if named is None:
            return
        if hello["pid"] != named.pid:
            raise SourceError(f"{self.path}: the agent there says it is pid {hello['pid']}, not pid {named.pid}; {why}")
        if hello["start_time"] != named.start_time:
            raise SourceError(
                f"{self.path}: the agent there says pid {named.pid} started at {hello['start_time']},"
                f" not at {named.start_time} (clock ticks since boot); {why}"
            )
        if in_runtime_dir(self.path):
            served_by = peer_pid(sock)
            if served_by not in (0, named.pid):
                raise SourceError(
                    f"{self.path}: the agent there is served by pid {served_by}, not by pid {named.pid}; {why}"
                )

    def _describe(self, hello: m.Message) -> str:
        """The agent's process as the UI's header and a recording name it: its pid and command."""
        argv = hello.get("argv")
        command = " ".join(str(a) for a in argv) if isinstance(argv, list) else ""
        return f"pid {hello['pid']}: {command}" if command else f"pid {hello['pid']}"

    def _served_by_agent(self, sock: socket.socket, hello: m.Message) -> bool:
        """Whether the process whose hello this is serves the connection (the kernel says so)."""
        return bool(peer_pid(sock) == hello["pid"])

    def _still_runs(self, pid: int, start_time: int) -> bool:
        """Whether the agent's process still runs (so that its agent may come back)."""
        return process_alive(pid, start_time)

    # -- streaming ----------------------------------------------------------------------

    def _stream(self) -> Iterator[SourceBatch]:
        """Every connection's stream, one after another while the agent comes back (see :meth:`_reconnect`)."""
        while True:
            gap = yield from self._follow()
            if gap is None:
                return
            if not (yield from self._reconnect(gap)):
                return

    def _follow(self) -> Generator[SourceBatch, None, str | None]:
        """The stream of the current connection, to its end. Returns why its agent went away
        while its process runs on (its last messages yielded, the stream to be taken up again),
        or ``None`` once the batch that ends the stream is yielded."""
        sock = self._sock
        assert sock is not None
        failure = self._drain()
        yield SourceBatch(
            messages=self._take(), state=SourceState.LIVE, notes=self._take_gap_notes(), answers=self._take_answers()
        )
        if failure is not None:
            yield from self._fail(failure)
            return None
        if self._bye is not None:
            return (yield from self._said_bye())
        flush_at = 0.0
        with selectors.DefaultSelector() as sel:
            sel.register(sock, selectors.EVENT_READ)
            sel.register(self._wake_r, selectors.EVENT_READ)
            while True:
                wait = self._next_deadline()
                if self._pending:
                    wait = flush_at if wait is None else min(wait, flush_at)
                events = sel.select(None if wait is None else max(0.0, wait - time.monotonic()))
                if self._closed:
                    return None
                if any(key.fileobj is self._wake_r for key, _ in events):
                    with contextlib.suppress(OSError):
                        self._wake_r.recv(4096)
                if any(key.fileobj is sock for key, _ in events):
                    had_pending = bool(self._pending)
                    try:
                        data = _recv(sock)
                    except OSError as exc:
                        yield from self._fail(f"lost the connection to {self.who}: {_why(exc)}")
                        return None
                    if not data:
                        if self._may_come_back():
                            return "hung up"
                        yield from self._hang_up()
                        return None
                    self._feed(data)
                    failure = self._drain()
                    if failure is not None:
                        yield from self._fail(failure)
                        return None
                    if self._bye is not None:
                        return (yield from self._said_bye())
                    if self._pending and not had_pending:
                        flush_at = time.monotonic() + self._batch_interval_s
                self._settle_overdue()
                due = self._pending and (time.monotonic() >= flush_at or len(self._pending) >= _MAX_BATCH)
                if due or self._answers or self._gap_notes:
                    notes = self._take_gap_notes()
                    yield SourceBatch(messages=self._take(), notes=notes, answers=self._take_answers())

    def _said_bye(self) -> Generator[SourceBatch, None, str | None]:
        """After a ``bye``: the end of the stream, or ``"stopped"`` when the agent was stopped
        while its process runs on (it may be started again)."""
        assert self._bye is not None
        if self._bye.get("reason") == "stopped" and self._may_come_back():
            return "stopped"
        yield from self._end("the target said bye")
        return None

    def _may_come_back(self) -> bool:
        """Whether the agent, gone from this connection, may be reconnected to: it takes up a
        stream, it is local, and its process still runs a moment later."""
        hello = self.agent_hello
        if not self._resumable or self._closed or hello is None:
            return False
        deadline = time.monotonic() + _DYING_S
        while self._still_runs(hello["pid"], hello["start_time"]):
            if time.monotonic() >= deadline:
                return True
            time.sleep(0.02)
        return False

    def _reconnect(self, gap: str) -> Generator[SourceBatch, None, bool]:
        """Wait for the agent of the same process to listen at the socket again (for at most
        ``reconnect_s``) and connect, naming the events this client has: ``True`` once it
        answered, with its stream to follow; else the batch that ends the stream is yielded."""
        hello = self.agent_hello
        assert hello is not None
        pid, start = hello["pid"], hello["start_time"]
        lost = "its agent stopped" if gap == "stopped" else "it hung up without a bye"
        note = self._away_note(gap, pid)
        self._settle_all(f"no answer: the connection to pid {pid} was lost ({lost})")
        yield SourceBatch(
            messages=self._take(),
            state=SourceState.CONNECTING,
            notes=(note,) if note else (),
            answers=self._take_answers(),
        )
        with self._send_lock:
            if self._sock is not None:
                self._sock.close()
        started = time.monotonic()
        while not self._closed:
            if not self._still_runs(pid, start):
                yield from self._end("the target exited while its agent was away")
                return False
            if time.monotonic() - started >= self._reconnect_s:
                self.end_reason = f"the agent of pid {pid} did not come back within {self._reconnect_s:g} s"
                yield SourceBatch(state=SourceState.ENDED, notes=(self.end_reason,))
                return False
            try:
                sock = self._connect_once()
            except _NotListening:
                self._wait(_RETRY_S)
                continue
            except SourceError as exc:
                yield from self._fail(str(exc))
                return False
            self._new_connection()
            try:
                again = self._greet(sock, resume=self._produced_seen)
            except _GoneWhileGreeting:  # an agent still starting, or stopping again
                sock.close()
                self._wait(_RETRY_S)
                continue
            except SourceError as exc:
                yield from self._fail(str(exc))
                return False
            self._bye = None
            self._gap_started = started
            self.reconnections += 1
            self._pending.append(again)
            self._record(self._decoder.frames.consumed, [again])
            return True
        return False

    def _away_note(self, gap: str, pid: int) -> str:
        """What the stream says as its agent goes away while its process runs on (``gap``:
        ``"stopped"`` or ``"hung up"``); empty where that is said elsewhere."""
        if gap == "stopped":
            return f"the agent of pid {pid} stopped; waiting up to {self._reconnect_s:g} s for it to start again"
        return f"pid {pid} hung up without a bye but still runs; reconnecting for up to {self._reconnect_s:g} s"

    def _new_connection(self) -> None:
        """Start decoding (and recording) a new connection's stream from its first byte."""
        self._unknown_before += self._decoder.unknown
        self._decoder = MessageDecoder(rows=True)
        self._unrecorded = bytearray()  # what the old connection left of a frame is lost with it
        self._recorded = 0

    def _wait(self, seconds: float) -> None:
        """Sleep, but wake at once when the source is closed."""
        with selectors.DefaultSelector() as sel:
            sel.register(self._wake_r, selectors.EVENT_READ)
            if sel.select(seconds):
                with contextlib.suppress(OSError):
                    self._wake_r.recv(4096)

    def _count(self, msgs: list[m.Item], unknown: int) -> None:
        """Keep count of the agent's events this client has, received or reported lost (a
        ``sync`` says how many came before it, a ``bye`` how many in all), to take its stream up
        again after a gap; a resumed stream's ``sync`` ends the gap's note."""
        seen = self._produced_seen
        for msg in msgs:
            if type(msg) is not dict:
                if seen is not None:
                    seen += 1
                continue
            kind = msg["type"]
            if kind == m.SYNC:
                seen = _produced_before(msg)
                filtered = msg.get("filtered")
                self._filtered_seen = filtered if type(filtered) is int else None
                self._gap_over(msg)
            elif seen is None:
                continue
            elif kind not in _NOT_EVENTS:
                seen += 1
            elif kind == m.DROPPED and type(msg.get("count")) is int:
                seen += msg["count"]
            elif kind == m.BYE and type(msg.get("produced")) is int:
                seen = msg["produced"]
            elif kind == m.HEARTBEAT and self._filtered_seen is not None:
                filtered = msg.get("filtered")
                if type(filtered) is int and filtered > self._filtered_seen:
                    seen += filtered - self._filtered_seen  # left out by this client's filter since
                    self._filtered_seen = filtered
        self._produced_seen = None if seen is None else seen + unknown

    def _gap_over(self, sync: m.Message) -> None:
        started, self._gap_started = self._gap_started, None
        if started is None or self.agent_hello is None:
            return
        lost = sync.get("backlog_lost")
        gone = (
            "nothing of the gap was lost"
            if lost == 0
            else f"{lost} events of the gap were lost (its agent no longer held them)"
        )
        self._gap_notes.append(self._back_note(duration(int((time.monotonic() - started) * 1e9)), gone))

    def _back_note(self, after: str, gone: str) -> str:
        """What the stream says once its agent is back after a gap of ``after``: ``gone`` says
        what of the gap was lost."""
        assert self.agent_hello is not None
        return f"reconnected to pid {self.agent_hello['pid']} after {after} without its agent; {gone}"

    def _take_gap_notes(self) -> tuple[str, ...]:
        taken = tuple(self._gap_notes)
        self._gap_notes.clear()
        return taken

    def _feed(self, data: bytes) -> None:
        self._decoder.feed(data)
        self._unrecorded += data

    def _drain(self) -> str | None:
        """Decode every complete frame received so far and record it; a one-line failure or ``None``.

        Messages decoded before a protocol error are kept, and so are their frames in the recording.
        """
        fresh: list[m.Item] = []
        good = self._decoder.frames.consumed
        failure = None
        try:
            for msg in self._decoder:
                good = self._decoder.frames.consumed
                fresh.append(msg)
                if isinstance(msg, dict):
                    kind = msg["type"]
                    if kind == m.RESPONSE and type(msg.get("id")) is int:
                        self._settle(msg["id"], response=msg)
                    elif kind == m.BYE:
                        self._bye = msg
                        break
            else:
                good = self._decoder.frames.consumed
        except ProtocolError as exc:
            failure = f"protocol error from {self.who}: {exc}"
        self.received += len(fresh)
        unknown = self._unknown_before + self._decoder.unknown
        self._count(fresh, unknown - self.unknown)
        self.unknown = unknown
        self._pending.extend(fresh)
        try:
            self._record(good, fresh)
        except SourceError as exc:
            failure = failure or str(exc)
        return failure

    def _record(self, upto: int, msgs: list[m.Item]) -> None:
        """Write the received frames up to stream offset ``upto`` (holding ``msgs``) to the recording."""
        size = upto - self._recorded
        if size <= 0:
            return
        try:
            if self.recorder is not None:
                self.recorder.write_frames(bytes(self._unrecorded[:size]), msgs)
                self.recorder.flush()
            elif self._frames_to is not None:
                self._frames_to(bytes(self._unrecorded[:size]), msgs)
        except RecordingStopped as exc:  # the file stops here; the stream goes on without it
            self._recording_stopped = str(exc)
        del self._unrecorded[:size]
        self._recorded = upto

    def _with_recording_news(self, batch: SourceBatch) -> SourceBatch:
        """``batch``, telling that recording stopped if it did since the last batch."""
        stopped, self._recording_stopped = self._recording_stopped, None
        return batch if stopped is None else dataclasses.replace(batch, recording_stopped=stopped)

    def _hang_up(self) -> Iterator[SourceBatch]:
        if self._decoder.frames.pending:
            yield from self._fail(
                f"{self.who} disappeared in the middle of a message ({self.received} complete messages received)"
            )
        else:
            yield from self._end("the target closed the connection without a bye")

    def _end(self, reason: str) -> Iterator[SourceBatch]:
        self.end_reason = reason
        notes = self._notes()
        if self._bye is None:
            notes = (*notes, f"{self.who} closed the connection without saying bye (killed?)")
        elif isinstance(self._bye.get("reason"), str):
            self.end_reason = f"{reason} ({self._bye['reason']})"
        self._settle_all(f"{self.who} is no longer connected ({self.end_reason})")
        yield SourceBatch(messages=self._take(), state=SourceState.ENDED, notes=notes, answers=self._take_answers())

    def _fail(self, error: str) -> Iterator[SourceBatch]:
        self.error = error
        self.end_reason = f"error: {error}"
        if self._pending:
            yield SourceBatch(messages=self._take())
        self._settle_all(f"no answer: {error}")
        yield SourceBatch(state=SourceState.FAILED, error=error, notes=self._notes(), answers=self._take_answers())

    def _notes(self) -> tuple[str, ...]:
        notes = self._take_gap_notes()
        if self.unknown:
            notes = (*notes, f"skipped {self.unknown} messages of types this iket-tui does not know (a newer agent?)")
        return notes

    # -- requests -----------------------------------------------------------------------

    def _settle(self, request_id: int, *, response: m.Message | None = None, error: str | None = None) -> None:
        """Settle a request of this client once; a response to no request of ours is only a message."""
        with self._send_lock:
            if self._asked.pop(request_id, None) is None:
                return
        self._answers.append(Answer(request_id, response=response, error=error))

    def _next_deadline(self) -> float | None:
        with self._send_lock:
            return min((deadline for deadline, _ in self._asked.values()), default=None)

    def _settle_aside(self) -> None:
        """Settle the requests the source answered itself since the last look."""
        with self._send_lock:
            answered, self._answered_aside = self._answered_aside, []
        for answer in answered:
            self._settle(answer.request_id, response=answer.response, error=answer.error)

    def _settle_overdue(self) -> None:
        self._settle_aside()
        now = time.monotonic()
        with self._send_lock:
            overdue = [(rid, timeout) for rid, (deadline, timeout) in self._asked.items() if deadline <= now]
        for request_id, timeout in overdue:
            self._settle(request_id, error=f"no answer within {timeout:g} s (is the target still running the agent?)")

    def _settle_all(self, error: str) -> None:
        self._settle_aside()
        with self._send_lock:
            asked = list(self._asked)
        for request_id in asked:
            self._settle(request_id, error=error)

    def _take_answers(self) -> tuple[Answer, ...]:
        taken = tuple(self._answers)
        self._answers.clear()
        return taken

    def _take(self) -> tuple[m.Message, ...]:
        """What is pending, for a :class:`SourceBatch`, whose messages may be pass rows as well as maps."""
        taken = tuple(self._pending)
        self._pending.clear()
        return cast("tuple[m.Message, ...]", taken)

    def _shutdown(self) -> None:
        with self._lock:
            if self._finished:
                return
            self._finished = True
            reason = self.end_reason or self._close_reason or "closed"
            try:
                if self._sock is not None:
                    self._sock.close()
                self._wake_r.close()
                self._wake_w.close()
                if self.recorder is not None:
                    self.recorder.close(reason)
            except SourceError as exc:
                self.error = self.error or str(exc)
            finally:
                self._done.set()


class _NotListening(Exception):
    """Nothing listens at the socket (yet): its file is missing, or stale."""

    def __init__(self, cause: OSError) -> None:
        super().__init__(str(cause))
        self.cause = cause


class _GoneWhileGreeting(SourceError):
    """The peer hung up before its hello (an agent stopping, or not an agent at all)."""


def _client_hello(resume: int | None = None, filters: Mapping[str, Any] | None = None) -> m.Message:
    """This client's hello; ``resume``: the events it already has of the agent it greets;
    ``filters``: the passes it wants (see "Filters" in docs/protocol.md), all when empty."""
    pid = os.getpid()
    hello = m.hello(
        role="client",
        pid=pid,
        start_time=process_start_time(pid) or 0,
        software_version=__version__,
        capabilities=[],
        argv=list(sys.argv),
        t_ns=time.monotonic_ns(),
    )
    if filters:
        hello["filter"] = dict(filters)
    return hello if resume is None else {**hello, "resume": resume}


def _produced_before(sync: m.Message) -> int | None:
    """The agent's events before a ``sync`` (its ``produced``; an older agent's backlog and loss)."""
    produced = sync.get("produced")
    if type(produced) is int:
        return produced
    backlog, lost = sync.get("backlog"), sync.get("backlog_lost")
    return backlog + lost if type(backlog) is int and type(lost) is int else None


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(_RECV_SIZE)
    except (ConnectionResetError, ConnectionAbortedError):
        return b""


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _connect_error(path: Path, exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return f"{path}: no such socket (the agent is gone?)"
    if isinstance(exc, ConnectionRefusedError):
        return f"{path}: connection refused (a stale socket: its agent is gone)"
    if isinstance(exc, PermissionError):
        owner = owner_out_of_reach(path)
        if owner is not None and owner != os.getuid():
            return f"{path}: permission denied: the agent belongs to uid {owner}; {must_run_as()}"
        return f"{path}: permission denied (another user's socket?)"
    return f"{path}: cannot connect ({_why(exc)})"
