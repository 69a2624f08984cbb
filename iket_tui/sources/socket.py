"""Live events from an agent's Unix socket, batched for the UI and optionally recorded.

The source connects, refuses a peer of another user, exchanges hellos (a foreign socket or
another major protocol version is a one-line error), refuses an agent that is not the process
the socket is named after, then reads frames strictly and hands them out about every 30 ms.
Whatever arrived before an error or a hang-up is delivered before the state that ends the
stream. Pass events batched as pass rows are handed out as
rows, as a replay does (see :mod:`iket_tui.protocol.messages`). Requests go out on the same
socket; each is settled by one :class:`~iket_tui.sources.base.Answer` in a batch: the agent's
response, or why none came (overdue, or the stream ended first).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

from iket_tui import __version__
from iket_tui.endpoints import (
    EndpointError,
    ForeignPeerError,
    check_peer,
    endpoint_of,
    in_runtime_dir,
    must_run_as,
    owner_out_of_reach,
    peer_pid,
    process_start_time,
    too_long_to_connect,
)
from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import MessageDecoder, ProtocolError, check_hello, decode_body, encode_message
from iket_tui.protocol.frames import FrameError
from iket_tui.sources.base import Answer, SourceBatch, SourceError, SourceState
from iket_tui.sources.recorder import RecordingWriter

_RECV_SIZE = 256 * 1024
_MAX_BATCH = 20_000
DEFAULT_REQUEST_TIMEOUT_S = 10.0


class SocketSource:
    """An :class:`~iket_tui.sources.base.EventSource` over one agent socket.

    :meth:`connect` may be called first to report a bad target before any UI starts;
    :meth:`batches` connects itself otherwise. With ``record_to`` every frame received,
    the agent's hello included, is written to that recording as it arrives. After the stream
    ends, :attr:`error` holds the one-line failure (``None`` when it ended normally) and
    :attr:`end_reason` says why it ended.
    """

    def __init__(
        self,
        path: Path,
        *,
        record_to: Path | None = None,
        hello_timeout_s: float = 10.0,
        connect_retry_s: float = 0.0,
        batch_interval_s: float = 0.03,
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
        self._hello_timeout_s = hello_timeout_s
        self._connect_retry_s = connect_retry_s
        self._batch_interval_s = batch_interval_s
        self._decoder = MessageDecoder(rows=True)
        self._unrecorded = bytearray()  # received bytes not yet written to the recording
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
        self._sock = sock
        try:
            sock.sendall(encode_message(_client_hello()))
        except OSError as exc:
            raise SourceError(f"{self.path}: connection lost while greeting the agent ({_why(exc)})") from None
        hello = self._check_hello(self._read_hello(sock))
        self._check_identity(sock, hello)
        self.agent_hello = hello
        argv = hello.get("argv")
        command = " ".join(str(a) for a in argv) if isinstance(argv, list) else ""
        self.description = f"pid {hello['pid']}: {command}" if command else f"pid {hello['pid']}"
        if self.record_to is not None:
            self.recorder = RecordingWriter(self.record_to, source=self.description)
        self._pending.append(hello)
        self._record(self._decoder.frames.consumed, [hello])
        return hello

    def request(self, what: str, *, timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S, **fields: object) -> int:
        """Ask the agent for ``what`` (``messages.WHAT_*``, with its fields); the
        :class:`~iket_tui.sources.base.Answer` comes in a batch of :meth:`batches` within
        ``timeout_s``. Raises :class:`SourceError` when not connected or the write fails."""
        with self._send_lock:
            sock = self._sock
            if sock is None or self.agent_hello is None:
                raise SourceError(f"not connected to {self.who}")
            if self._closed or self._finished or self._bye is not None or sock.fileno() < 0:
                raise SourceError(f"{self.who} is no longer connected (the target exited, or the stream ended)")
            request_id = self._next_request
            self._next_request += 1
            self._asked[request_id] = (time.monotonic() + timeout_s, timeout_s)
            try:
                sock.sendall(encode_message(m.request(id=request_id, what=what, **fields)))
            except OSError as exc:
                del self._asked[request_id]
                raise SourceError(f"cannot ask {self.who}: {_why(exc)}") from None
        with contextlib.suppress(OSError):
            self._wake_w.send(b"r")  # the reader's wait now has a deadline to keep
        return request_id

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
            yield from self._stream()
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
                if time.monotonic() >= deadline or self._closed:
                    raise SourceError(_connect_error(self.path, exc)) from None
                time.sleep(0.05)
            except OSError as exc:
                sock.close()
                raise SourceError(_connect_error(self.path, exc)) from None

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
                    raise SourceError(f"{self.path}: the peer hung up before saying hello (not an iket-tui agent?)")
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
        named = endpoint_of(self.path)
        if named is None:
            return
        why = "refusing it (another program listens at that socket)"
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

    # -- streaming ----------------------------------------------------------------------

    def _stream(self) -> Iterator[SourceBatch]:
        sock = self._sock
        assert sock is not None
        failure = self._drain()
        yield SourceBatch(messages=self._take(), state=SourceState.LIVE, answers=self._take_answers())
        if failure is not None:
            yield from self._fail(failure)
            return
        if self._bye is not None:
            yield from self._end("the target said bye")
            return
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
                    return
                if any(key.fileobj is self._wake_r for key, _ in events):
                    with contextlib.suppress(OSError):
                        self._wake_r.recv(4096)
                if any(key.fileobj is sock for key, _ in events):
                    had_pending = bool(self._pending)
                    try:
                        data = _recv(sock)
                    except OSError as exc:
                        yield from self._fail(f"lost the connection to {self.who}: {_why(exc)}")
                        return
                    if not data:
                        yield from self._hang_up()
                        return
                    self._feed(data)
                    failure = self._drain()
                    if failure is not None:
                        yield from self._fail(failure)
                        return
                    if self._bye is not None:
                        yield from self._end("the target said bye")
                        return
                    if self._pending and not had_pending:
                        flush_at = time.monotonic() + self._batch_interval_s
                self._settle_overdue()
                due = self._pending and (time.monotonic() >= flush_at or len(self._pending) >= _MAX_BATCH)
                if due or self._answers:
                    yield SourceBatch(messages=self._take(), answers=self._take_answers())

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
        self.unknown = self._decoder.unknown
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
        if self.recorder is not None:
            self.recorder.write_frames(bytes(self._unrecorded[:size]), msgs)
            self.recorder.flush()
        del self._unrecorded[:size]
        self._recorded = upto

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
        if self.unknown:
            return (f"skipped {self.unknown} messages of types this iket-tui does not know (a newer agent?)",)
        return ()

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

    def _settle_overdue(self) -> None:
        now = time.monotonic()
        with self._send_lock:
            overdue = [(rid, timeout) for rid, (deadline, timeout) in self._asked.items() if deadline <= now]
        for request_id, timeout in overdue:
            self._settle(request_id, error=f"no answer within {timeout:g} s (is the target still running the agent?)")

    def _settle_all(self, error: str) -> None:
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


def _client_hello() -> m.Message:
    pid = os.getpid()
    return m.hello(
        role="client",
        pid=pid,
        start_time=process_start_time(pid) or 0,
        software_version=__version__,
        capabilities=[],
        argv=list(sys.argv),
        t_ns=time.monotonic_ns(),
    )


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
