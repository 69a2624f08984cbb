"""One connected client, on its own thread: handshake, catch-up, live stream, heartbeats, goodbye.

Everything that can wait on the client happens here: encoding, writing to the socket, a
client that reads slowly or not at all. The compiler only ever touches this client's bounded
queue (:class:`iket_tui.agent.registry.ClientQueue`). A peer that is not an iket-tui client
of this user, or that disappears, is closed and forgotten; the target never notices.

A client that lost its connection (its agent was stopped and started again in the same
process) names in its hello the events it already has (``resume``): its catch-up then holds
only what came after them, and its ``sync`` says how many of those the backlog no longer held.

A client may name in its hello the passes it wants (``filter``, see
:mod:`~iket_tui.agent.pass_filter`): its sender leaves the others out of each batch it writes,
catch-up included, and says how many in its ``sync``, heartbeats and ``bye``. The compiler's
thread never sees a filter: it queues every event for every client alike.

A client only ever sends a hello and small requests, so what it sends is read with a client's
tight limits (:data:`MAX_CLIENT_FRAME`): a larger frame is refused at its header, before any of
it is buffered or decoded, and a frame within the limit decodes to a bounded number of objects
in well under a millisecond. A client that breaks the limits or the protocol is hung up on,
and the agent counts it and says why in one line (:class:`Refusal`).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

from iket_tui.agent.pass_filter import FILTER_FIELD, FilterError, PassChoice, PassFilter
from iket_tui.agent.registry import CatchUp, ClientQueue, Registry
from iket_tui.agent.requests import answer
from iket_tui.endpoints import EndpointError, check_peer, peer_pid
from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import ProtocolError, check_hello, decode_body, encode_batch, encode_message
from iket_tui.protocol.frames import FrameDecoder, FrameError
from iket_tui.protocol.messages import PASS_ROWS_SINCE, Message, Outgoing, as_message

BATCH: Final = 512
COALESCE_S: Final = 0.5
QUIET_NS: Final = 250_000_000
"""A compile inside one pass for this long has what it noted collected
(:meth:`~iket_tui.agent.pass_notes.HeldNotes.collect`)."""
DELIVERED_POLL_S: Final = 0.005
"""How often :meth:`ClientSession.wait_delivered` looks at the queue."""
MAX_HELLO_BYTES: Final = 64 * 1024
MAX_CLIENT_FRAME: Final = 64 * 1024
"""The largest frame body a client may send: a hello or a request is a few hundred bytes."""
MAX_PENDING_REPLIES: Final = 8
"""Answers a client may have waiting to be sent; until they are, its further requests are not read."""
CAP_RESUME: Final = "resume"
"""The capability of an agent that takes up a client's stream where it left it (``resume`` in
the client's hello)."""


class Refusal(Exception):
    """Why a client was hung up on, in one line: it broke the protocol or a client's limits, or
    it is not this user."""


class ClientFrames:
    """The messages a client sends, read with a client's limits; sans-I/O like the protocol's decoders.

    A frame longer than :data:`MAX_CLIENT_FRAME` is refused from its 8-byte header, so that
    neither its bytes nor their decoding ever cost the target more than that much.
    """

    def __init__(self) -> None:
        self._frames = FrameDecoder(max_body=MAX_CLIENT_FRAME)

    def feed(self, data: bytes) -> None:
        self._frames.feed(data)

    def __iter__(self) -> Iterator[Message]:
        """Every complete message received; raises :class:`Refusal` on a frame beyond the limits
        or a body that is not a message."""
        try:
            for body in self._frames:
                yield decode_body(body)
        except FrameError as exc:
            raise Refusal(f"sent a frame beyond a client's limits ({exc})") from None
        except ProtocolError as exc:
            raise Refusal(f"sent {exc}") from None


@dataclass(frozen=True)
class SessionSettings:
    """How every client of one agent is served."""

    hello: Message
    queue: int
    heartbeat_s: float
    handshake_timeout_s: float
    send_buffer: int | None


class ClientSession:
    """Serves one accepted connection until the client leaves or the agent closes."""

    def __init__(
        self,
        sock: socket.socket,
        registry: Registry,
        settings: SessionSettings,
        on_synced: Callable[[], None],
        on_refused: Callable[[str], None],
    ) -> None:
        self._sock = sock
        self._registry = registry
        self._settings = settings
        self._on_synced = on_synced
        self._on_refused = on_refused
        self._closing = threading.Event()
        self._bye_reason = "exit"
        self._queue: ClientQueue | None = None
        self._rows = False  # whether the client reads pass rows (it speaks protocol 1.1 or later)
        self._resume: int | None = None  # the events the client has already, from its hello
        self._filter: PassFilter | None = None  # the passes the client wants, from its hello
        self._replies: deque[Message] = deque()  # answers to requests, sent before the next batch
        self._reply_room = threading.Semaphore(MAX_PENDING_REPLIES)
        self._received = ClientFrames()
        self.thread = threading.Thread(target=self._run, name="iket-tui client", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def close(self, reason: str) -> None:
        """Flush what this client's queue holds, say goodbye, and hang up."""
        self._bye_reason = reason
        self._closing.set()
        queue = self._queue
        if queue is not None:
            queue.wake.set()
            queue.hurry.set()

    def hurry(self) -> None:
        """Write what the queue holds now rather than let a burst gather."""
        queue = self._queue
        if queue is not None:
            queue.wake.set()
            queue.hurry.set()

    def wait_delivered(self, deadline: float) -> None:
        """Wait until what this client's queue held is written to its socket (or the client is
        gone), at the latest until ``deadline`` (:func:`time.monotonic`)."""
        while self.thread.is_alive() and time.monotonic() < deadline:
            queue = self._queue
            if queue is not None and not queue.stats().queued:
                return
            time.sleep(DELIVERED_POLL_S)

    def abort(self) -> None:
        """Hang up at once, even in the middle of a write to a client that stopped reading."""
        self._closing.set()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)

    def abandon(self) -> None:
        """Close this process's copy of the connection without a word (see :meth:`AgentServer.abandon`)."""
        with contextlib.suppress(OSError):
            self._sock.close()

    def _run(self) -> None:
        try:
            self._handshake()
        except (Refusal, EndpointError, ProtocolError) as exc:
            self._refuse(str(exc))
            self._hang_up()
            return
        except TimeoutError:
            self._refuse(f"said no hello within {self._settings.handshake_timeout_s:g} s")
            self._hang_up()
            return
        except Exception:  # gone before its hello (a probe, such as `iket-tui ls`): nothing to serve
            self._hang_up()
            return
        queue, catch_up = self._registry.attach(self._settings.queue)
        self._queue = queue
        threading.Thread(target=self._serve_requests, args=(queue,), name="iket-tui requests", daemon=True).start()
        if self._closing.is_set():
            queue.wake.set()
            queue.hurry.set()
        try:
            self._stream(queue, catch_up)
        except OSError:
            pass
        except Exception:
            self._registry.observer_errors += 1
        finally:
            self._registry.detach(queue)
            self._hang_up()

    def _handshake(self) -> None:
        sock = self._sock
        sock.settimeout(self._settings.handshake_timeout_s)
        check_peer(sock)
        if self._settings.send_buffer is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._settings.send_buffer)
        self._send(encode_message({**self._settings.hello, "t_ns": time.monotonic_ns()}))
        frames = self._received
        received = 0
        while True:
            data = sock.recv(4096)
            if not data:
                raise ConnectionError("the peer left during the handshake")
            received += len(data)
            frames.feed(data)
            for msg in frames:
                check_hello(msg, expect_role="client")
                self._rows = tuple(msg["proto"]) >= PASS_ROWS_SINCE
                resume = msg.get("resume")
                self._resume = resume if type(resume) is int and resume >= 0 else None
                if FILTER_FIELD in msg:
                    try:
                        self._filter = PassFilter(PassChoice.of_hello(msg))
                    except FilterError as exc:
                        raise Refusal(f"sent {exc}") from None
                sock.settimeout(None)
                return  # what came after the hello stays in the decoder for _serve_requests
            if received > MAX_HELLO_BYTES:
                raise Refusal(f"sent no hello in the first {MAX_HELLO_BYTES} bytes")

    def _stream(self, queue: ClientQueue, catch_up: CatchUp) -> None:
        messages, sync = _catch_up_after(catch_up, self._resume)
        pass_filter = self._filter
        if pass_filter is not None:
            messages = pass_filter.apply(messages)
            sync = {**sync, **pass_filter.counts()}
        for start in range(0, len(messages), BATCH):
            self._send_messages(messages[start : start + BATCH])
        self._send_messages([{**sync, "t_ns": time.monotonic_ns()}])
        self._on_synced()
        heartbeat_ns = int(self._settings.heartbeat_s * 1e9)
        next_beat = time.monotonic_ns() + heartbeat_ns
        reported_drops = 0
        while True:
            queue.rearm()
            closing = self._closing.is_set()
            if closing:
                self._registry.detach(queue)
            self._send_replies()
            self._registry.held_notes.collect(QUIET_NS)
            batch = queue.take(BATCH)
            if batch:
                # What this client's filter leaves out counts as delivered to it, and in its filter's counts.
                sent = batch if pass_filter is None else pass_filter.apply(batch)
                queue.mark_delivered(lost=self._send_messages(sent) if sent else 0)
            reported_drops = self._report_drops(queue, reported_drops)
            if closing and not batch:
                self._say_bye(queue)
                return
            now = time.monotonic_ns()
            if now >= next_beat:
                self._beat(queue, now)
                next_beat = now + heartbeat_ns
            if closing or len(batch) == BATCH:
                continue
            # What arrived while this batch was written waits for the next one: one write per burst.
            # While a compile runs, the sender looks at least every COALESCE_S for one inside a long pass.
            wait_s = (next_beat - now) / 1e9
            if self._registry.held_notes.waiting:
                wait_s = min(wait_s, COALESCE_S)
            if queue.wake.wait(max(0.0, wait_s)):
                # Let a burst gather into one frame: every wakeup and write costs the compiler's process CPU.
                queue.hurry.wait(COALESCE_S)

    def _serve_requests(self, queue: ClientQueue) -> None:
        """Read what the client asks for and queue the answers for the sender; other messages
        are ignored, and a client that sends garbage or frames beyond a client's limits is hung
        up on. While :data:`MAX_PENDING_REPLIES` answers wait for the sender, nothing more is
        read: a client that asks faster than it reads waits, and the agent holds no more."""
        frames = self._received
        try:
            while not self._closing.is_set():
                for msg in frames:
                    if msg["type"] != m.REQUEST:
                        continue
                    while not self._reply_room.acquire(timeout=0.5):
                        if self._closing.is_set():
                            return
                    self._replies.append(answer(msg, self._registry.ir_store))
                    queue.wake.set()
                    queue.hurry.set()
                data = self._sock.recv(MAX_CLIENT_FRAME)
                if not data:
                    return
                frames.feed(data)
        except Refusal as exc:
            self._refuse(str(exc))
        except OSError:
            self.abort()
        except Exception:
            self._registry.observer_errors += 1
            self.abort()

    def _send_replies(self) -> None:
        replies = self._replies
        while replies:
            self._send_messages([replies.popleft()])
            self._reply_room.release()

    def _report_drops(self, queue: ClientQueue, reported: int) -> int:
        """Tell the client what it lost since the last report; returns the total now reported."""
        dropped = queue.dropped
        if dropped != reported:
            self._send_messages([m.dropped(t_ns=time.monotonic_ns(), count=dropped - reported, total=dropped)])
        return dropped

    def _beat(self, queue: ClientQueue, now: int) -> None:
        registry = self._registry
        beat = m.heartbeat(
            t_ns=now,
            produced=queue.produced,
            dropped=queue.dropped,
            open_passes=registry.open_passes,
            observer_errors=registry.observer_errors,
        )
        self._send_messages([beat if self._filter is None else {**beat, **self._filter.counts()}])

    def _say_bye(self, queue: ClientQueue) -> None:
        bye = m.bye(t_ns=time.monotonic_ns(), produced=queue.produced, dropped=queue.dropped, reason=self._bye_reason)
        self._send_messages([bye if self._filter is None else {**bye, **self._filter.counts()}])

    def _send_messages(self, batch: list[Outgoing]) -> int:
        """Write ``batch``; returns how many of its messages could not be encoded and were left out."""
        data, left_out = _encode(batch, self._registry, rows=self._rows)
        self._send(data)
        return left_out

    def _send(self, data: bytes) -> None:
        """Write everything, without SIGPIPE even where the program restored its default action."""
        view = memoryview(data)
        while view:
            sent = self._sock.send(view, socket.MSG_NOSIGNAL)
            view = view[sent:]

    def _refuse(self, why: str) -> None:
        """Hang up on this client and have the agent count it, with ``why`` in one line."""
        try:
            who = f"client pid {peer_pid(self._sock)}"
        except OSError:
            who = "a client"
        self._on_refused(f"{who}: {' '.join(why.split())}")
        self.abort()

    def _hang_up(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._sock.close()


def _catch_up_after(catch_up: CatchUp, resume: int | None) -> tuple[list[Outgoing], Message]:
    """The catch-up for a client that already has the first ``resume`` events of this process
    (all of it for a new client), and the ``sync`` that ends it (``t_ns`` to fill in).

    The ``sync`` names ``produced``, the events produced before the catch-up; for a client that
    resumes, ``backlog`` counts the events it is sent and ``backlog_lost`` those it did not have
    that the backlog no longer holds. A ``resume`` beyond what this process produced (another
    process's count) is ignored.
    """
    produced = catch_up.produced_before
    first = catch_up.backlog_lost  # the index of the oldest event the backlog holds
    fresh = {"produced": produced}
    if resume is None or resume > produced:
        sync = m.sync(t_ns=0, backlog=catch_up.backlog, backlog_lost=catch_up.backlog_lost)
        return catch_up.messages, {**sync, **fresh}
    if resume < first:
        # Events between what it had and the oldest held are lost; open items older than the
        # backlog come again, since which of them the client had cannot be told.
        sync = m.sync(t_ns=0, backlog=catch_up.backlog, backlog_lost=first - resume)
        return catch_up.messages, {**sync, **fresh, "resumed": resume}
    had = resume - first
    held = catch_up.messages[len(catch_up.messages) - catch_up.backlog + had :]
    sync = m.sync(t_ns=0, backlog=catch_up.backlog - had, backlog_lost=0)
    return held, {**sync, **fresh, "resumed": resume}


def _encode(batch: list[Outgoing], registry: Registry, *, rows: bool) -> tuple[bytes, int]:
    """Messages as ``batch`` frames (as many as a frame's limit needs, see :func:`encode_batch`).

    A message that cannot be encoded at all (too large for a frame, or holding something msgpack
    does not know) is left out, counted in the registry's ``observer_errors`` and in the count
    returned with the bytes, so that the client is told of it as a drop.
    """
    try:
        return encode_batch(batch, rows=rows), 0
    except Exception:
        pass
    frames = []
    for msg in batch:
        try:
            frames.append(encode_message(as_message(msg)))
        except Exception:
            registry.observer_errors += 1
    return b"".join(frames), len(batch) - len(frames)
