"""The agent's single registry: what the target produced, what is still open, and who is listening.

It is the agent's one piece of process-wide state: the IR of recent compiles, the pass notes of
running compiles and the running agent hang off it, and a child made by ``fork`` starts it from
nothing (:meth:`Registry.forget`).

Observers on compiler threads call :meth:`Registry.emit`. It never waits on a client: each
message goes into a bounded backlog (for clients that attach later) and into every client's
bounded queue, or is dropped and counted for that client when its queue is full. The
registry also keeps every compile, pass context, codegen and pass that is still open, so a
client that attaches late always sees the passes running right now, even when the backlog
no longer holds their start.

Pass events, nearly every event of a compile, are emitted as pass rows (the protocol's
positional form, :data:`~iket_tui.protocol.messages.PASS_ROW_FIELDS`, as tuples:
:data:`~iket_tui.protocol.messages.PassTuple`) and stay rows all the way to the socket; every
other event is a message map. A running compile may hold its passes back as notes
(:mod:`~iket_tui.agent.pass_notes`) until it emits something else, or until a client's thread
collects them (:attr:`Registry.held_notes`).

Accounting is exact: for every client, the events produced while it was attached equal the
events delivered to its socket, plus those dropped, plus those still queued.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Final

from iket_tui.agent.compile_origin import InputModules
from iket_tui.agent.compiler_processes import CompilerProcesses
from iket_tui.agent.ir_store import IRStore
from iket_tui.agent.pass_notes import HeldNotes
from iket_tui.agent.running import RunningCompiles
from iket_tui.protocol import messages as m
from iket_tui.protocol.messages import Message, Outgoing, PassTuple

if TYPE_CHECKING:
    from iket_tui.agent.lifecycle import Agent

DEFAULT_BACKLOG: Final = 10_000
DEFAULT_QUEUE: Final = 10_000
DEFAULT_BULK_BYTES: Final = 256 * 1024 * 1024
"""Kernel record bytes one client's queue may hold before further batches are dropped."""

_OpenKey = tuple[str, int, int]
_PASS_START: Final = m.PASS_START


@dataclass(frozen=True)
class ClientStats:
    """One client's share of the stream: ``produced == delivered + dropped + queued``."""

    produced: int
    delivered: int
    dropped: int
    queued: int


@dataclass(frozen=True)
class CatchUp:
    """What a client receives on attach, before the live stream.

    ``messages`` holds the open compiles, contexts and passes older than the backlog, then the
    backlog in order. ``backlog_lost`` events were produced before the backlog's oldest one.
    """

    messages: list[Outgoing]
    backlog: int
    backlog_lost: int

    @property
    def produced_before(self) -> int:
        """Events the target produced before this client attached."""
        return self.backlog + self.backlog_lost


class ClientQueue:
    """One client's bounded queue of messages waiting for its sender thread.

    :meth:`offer` runs on the emitting thread with the registry lock held; :meth:`rearm`,
    :meth:`take` and :meth:`mark_delivered` run on the client's sender thread. Neither side ever
    waits for the other: the deque's append and popleft are atomic, and the small lock here only
    keeps the sender's bookkeeping consistent for :meth:`Registry.client_stats`.
    """

    def __init__(self, limit: int, produced_before: int) -> None:
        self.limit = limit
        self.produced_before = produced_before
        self.wake = threading.Event()
        """Set when the queue gets a message: the sender has something to write."""
        self.hurry = threading.Event()
        """Set when the queue is half full: the sender must write now rather than let the burst gather."""
        self._hurry_at = max(1, limit // 2)
        self._signalled = False
        """:attr:`wake` was set since the sender last rearmed: the events after the first of a
        burst only test this flag, not the event."""
        self.offered = 0
        self.dropped = 0
        self.delivered = 0
        self._items: deque[Outgoing] = deque()
        self.bulk_limit = DEFAULT_BULK_BYTES
        """Bytes of bulk messages (kernel records) this queue holds at most."""
        self.bulk_queued = 0
        self._bulk_sizes: dict[int, int] = {}  # by id() of a queued bulk message
        self._in_flight = 0
        self._lock = threading.Lock()

    def offer(self, msg: Outgoing) -> None:
        self.offered += 1
        items = self._items
        if len(items) >= self.limit:
            self.dropped += 1
            return
        items.append(msg)
        if not self._signalled:
            self._signalled = True
            self.wake.set()
        if len(items) >= self._hurry_at and not self.hurry.is_set():
            self.hurry.set()

    def rearm(self) -> None:
        """Clear :attr:`wake` and :attr:`hurry` before a :meth:`take`: a message offered after
        this sets them again, and one offered before it is in that take."""
        self.wake.clear()
        self.hurry.clear()
        self._signalled = False

    def offer_bulk(self, msg: Message, size: int) -> None:
        """:meth:`offer` for a message of ``size`` bytes (kernel records): dropped and counted
        when the queue is full or the bulk bytes queued would exceed :attr:`bulk_limit`."""
        if len(self._items) >= self.limit or (self.bulk_queued and self.bulk_queued + size > self.bulk_limit):
            self.offered += 1
            self.dropped += 1
            return
        with self._lock:
            self.bulk_queued += size
            self._bulk_sizes[id(msg)] = size
        self.offer(msg)  # not dropped: only the emitting thread, holding the registry lock, appends
        self.hurry.set()  # bulk is written at once rather than gathered

    def take(self, limit: int) -> list[Outgoing]:
        """Up to ``limit`` queued messages, oldest first; they count as in flight until delivered."""
        with self._lock:
            items = self._items
            batch = [items.popleft() for _ in range(min(limit, len(items)))]
            self._in_flight = len(batch)
            if self._bulk_sizes:
                sizes = self._bulk_sizes
                self.bulk_queued -= sum(sizes.pop(id(msg), 0) for msg in batch)
        return batch

    def mark_delivered(self, *, lost: int = 0) -> None:
        """The batch last taken is now written to the socket, but for ``lost`` messages of it
        that could not be sent (they count as dropped)."""
        with self._lock:
            self.delivered += self._in_flight - lost
            self.dropped += lost
            self._in_flight = 0

    @property
    def produced(self) -> int:
        """Events the target produced up to now, as seen from this client."""
        return self.produced_before + self.offered

    def stats(self) -> ClientStats:
        with self._lock:
            return ClientStats(
                produced=self.offered,
                delivered=self.delivered,
                dropped=self.dropped,
                queued=len(self._items) + self._in_flight,
            )


class Registry:
    """Every event of this process, the open set, and the attached clients' queues."""

    def __init__(self, backlog: int = DEFAULT_BACKLOG, ir_store: IRStore | None = None) -> None:
        self._lock = threading.Lock()
        self._backlog: deque[Outgoing] = deque(maxlen=backlog)
        self._open: dict[_OpenKey, tuple[int, Outgoing]] = {}
        self._open_passes = 0
        self._kept: dict[tuple[object, ...], tuple[int, Message]] = {}
        self._clients: tuple[ClientQueue, ...] = ()
        self._compile_ids = itertools.count(1)
        self.held_notes = HeldNotes()
        """The running compiles that may hold passes back as notes."""
        self.ir_store = ir_store if ir_store is not None else IRStore()
        """The IR of this process's recent compiles, for ``ir`` requests and failure captures;
        kept only while a client is attached (unless ``IKET_TUI_IR=always``)."""
        self.ir_store.watch(False)
        self.inputs = InputModules()
        """The latest input module of each kernel, for the diff of its next compile's."""
        self.running = RunningCompiles()
        """The compiles running now and their threads, for capturing a stuck pass and aborting."""
        self.compiler_processes = CompilerProcesses(self.emit)
        """The processes the running codegen steps run (nvcc, ptxas, ...), watched while they run."""
        self.produced = 0
        self.observer_errors = 0
        self.agent: Agent | None = None
        """The agent running in this process, if any."""
        self.agent_lock = threading.Lock()
        """Held while the agent starts or stops."""
        self.parent_agent: Agent | None = None
        """In a child made by ``fork``, until the child's own agent starts: the agent of the
        parent, let go of by :meth:`forget`, whose settings the child's agent takes."""
        self.ending_on_main = 0
        """Compiles whose end is being written on the main thread now (see :meth:`ending`)."""
        self.after_ending: Callable[[], None] | None = None
        """What a signal handler left to do once the main thread has written a compile's end."""

    def emit(self, msg: Message) -> None:
        """Record one event and offer it to every client. Cheap, and never waits on a client.

        The message must not be changed afterwards: the backlog and the queues share it.
        """
        with self._lock:
            index = self.produced
            self.produced = index + 1
            self._backlog.append(msg)
            kind = msg["type"]
            if kind in _OPENS:
                self._open[_open_key(kind, msg)] = (index, msg)
                if kind == m.PASS_START:
                    self._open_passes += 1
            elif kind in _CLOSES:
                opener = _CLOSES[kind]
                if self._open.pop(_open_key(opener, msg), None) is not None and opener == m.PASS_START:
                    self._open_passes -= 1
            elif kind == m.COMPILE_END:
                self._close_compile(msg["compile"])
            for client in self._clients:
                client.offer(msg)

    def emit_pass_start(self, row: PassTuple, compile_id: int, seq: int) -> None:
        """:meth:`emit` for the ``pass_start`` row of the pass ``seq`` of ``compile_id``.

        Passes are nearly every event of a compile: the fewer steps here, the cheaper.
        """
        with self._lock:
            index = self.produced
            self.produced = index + 1
            self._backlog.append(row)
            self._open[(_PASS_START, compile_id, seq)] = (index, row)
            self._open_passes += 1
            for client in self._clients:
                client.offer(row)

    def emit_pass_end(self, row: PassTuple | Message, compile_id: int, seq: int) -> None:
        """:meth:`emit` for the ``pass_end`` row of the pass ``seq`` of ``compile_id`` (see :meth:`emit_pass_start`),
        or its map where it says more than a row can (whether the pass changed the module)."""
        with self._lock:
            self.produced += 1
            self._backlog.append(row)
            if self._open.pop((_PASS_START, compile_id, seq), None) is not None:
                self._open_passes -= 1
            for client in self._clients:
                client.offer(row)

    def emit_kept(self, msg: Message, key: tuple[object, ...]) -> None:
        """:meth:`emit` for state every client must have however late it attaches (a kernel
        module's event table, the tracing state): the newest message of each ``key`` is part
        of every catch-up, like the open passes."""
        with self._lock:
            index = self.produced
            self.produced = index + 1
            self._backlog.append(msg)
            self._kept[key] = (index, msg)
            for client in self._clients:
                client.offer(msg)

    def emit_bulk(self, msg: Message, size: int) -> None:
        """:meth:`emit` for a live-only message of ``size`` bytes (a batch of kernel records):
        it is not kept for clients that attach later, and each client's queue bounds the bytes
        of such messages it holds (:attr:`ClientQueue.bulk_limit`)."""
        with self._lock:
            self.produced += 1
            for client in self._clients:
                client.offer_bulk(msg, size)

    def _close_compile(self, compile_id: int) -> None:
        for key in [key for key in self._open if key[1] == compile_id]:
            del self._open[key]
            if key[0] == m.PASS_START:
                self._open_passes -= 1

    @contextmanager
    def ending(self) -> Iterator[None]:
        """Around the writing of a compile's end: a SIGTERM handled on the main thread meanwhile
        waits for it (:attr:`after_ending`), so that the failure capture and ``compile_end`` are
        queued before the agent's last flush."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        self.ending_on_main += 1
        try:
            yield
        finally:
            self.ending_on_main -= 1
            then = self.after_ending
            if then is not None and not self.ending_on_main:
                self.after_ending = None
                then()

    def next_compile_id(self) -> int:
        return next(self._compile_ids)

    @property
    def open_passes(self) -> int:
        return self._open_passes

    def open_in(self, compile_id: int) -> list[Outgoing]:
        """The start of every pass and codegen step of ``compile_id`` still running, oldest first
        (the caller collects held notes first, to see the passes noted but not yet told)."""
        with self._lock:
            found = [item for key, item in self._open.items() if key[1] == compile_id and key[0] in _RUNS]
        return [msg for _index, msg in sorted(found, key=itemgetter(0))]

    def compile_begin_of(self, compile_id: int) -> Message | None:
        """The ``compile_begin`` of ``compile_id`` while it runs."""
        with self._lock:
            found = self._open.get((m.COMPILE_BEGIN, compile_id, 0))
        return found[1] if found is not None and isinstance(found[1], dict) else None

    def open_messages(self) -> list[Outgoing]:
        """The start of every compile, context, codegen and pass still open, oldest first."""
        self.held_notes.collect()
        with self._lock:
            return [msg for _index, msg in self._open.values()]

    def attach(self, limit: int) -> tuple[ClientQueue, CatchUp]:
        """A new client: its queue, and the catch-up that precedes everything the queue gets."""
        self.held_notes.collect()
        with self._lock:
            backlog = list(self._backlog)
            first = self.produced - len(backlog)
            older = sorted(
                (item for item in (*self._open.values(), *self._kept.values()) if item[0] < first), key=itemgetter(0)
            )
            older_open = [msg for _index, msg in older]
            client = ClientQueue(limit, produced_before=self.produced)
            self._clients = (*self._clients, client)
            if len(self._clients) == 1:
                self.ir_store.watch(True)
        return client, CatchUp(older_open + backlog, backlog=len(backlog), backlog_lost=first)

    def detach(self, client: ClientQueue) -> None:
        """Stop offering events to ``client``; what it already holds stays for a final flush."""
        with self._lock:
            self._clients = tuple(c for c in self._clients if c is not client)
            if not self._clients:
                self.ir_store.watch(False)

    def client_stats(self) -> list[ClientStats]:
        """Exact counters of every attached client, in attach order."""
        with self._lock:
            return [client.stats() for client in self._clients]

    def configure(self, *, backlog: int) -> None:
        """Change the backlog bound, keeping its newest events."""
        with self._lock:
            if backlog != self._backlog.maxlen:
                self._backlog = deque(self._backlog, maxlen=backlog)

    def forget(self) -> None:
        """Start from nothing, in a child made by ``fork``: the parent's compiles, open passes,
        IR, queued events and clients are the parent's, and so is its agent, whose copies of
        sockets the child closes (:meth:`Agent.abandon`); it is kept as :attr:`parent_agent`
        for the child to start its own like it. Only the forking thread lives on in the child,
        so every lock is made anew: another thread may have held one at the fork. Compile ids
        go on counting, so that no id is given twice in the child."""
        agent = self.agent
        self._lock = threading.Lock()
        self._backlog = deque(maxlen=self._backlog.maxlen)
        self._open = {}
        self._open_passes = 0
        self._kept = {}
        self._clients = ()
        self.held_notes = HeldNotes()
        self.ir_store.forget()
        self.ir_store.watch(False)
        self.running.forget()
        self.compiler_processes.forget()
        self.produced = 0
        self.observer_errors = 0
        self.agent = None
        self.agent_lock = threading.Lock()
        self.ending_on_main = 0
        self.after_ending = None
        self.parent_agent = agent
        if agent is not None:
            agent.abandon()


_OPENS: Final[dict[str, str | None]] = {
    m.COMPILE_BEGIN: None,
    m.PASS_CONTEXT_ENTER: "context",
    m.CODEGEN_BEGIN: None,
    m.PASS_START: "seq",
    m.COMPILE_PROCESS: "pid",  # each process's latest state, until its compile ends
}
_RUNS: Final = frozenset({m.PASS_START, m.CODEGEN_BEGIN})
"""What a compile runs: passes, and codegen steps."""
_CLOSES: Final[dict[str, str]] = {
    m.PASS_CONTEXT_EXIT: m.PASS_CONTEXT_ENTER,
    m.CODEGEN_END: m.CODEGEN_BEGIN,
    m.PASS_END: m.PASS_START,
    m.PASS_INCOMPLETE: m.PASS_START,
}


def _open_key(opener: str, msg: Message) -> _OpenKey:
    """Where an open item lives: its opening type, its compile, and its id within the compile."""
    field = _OPENS[opener]
    return (opener, msg["compile"], msg[field] if field else 0)


registry: Final = Registry(ir_store=IRStore.from_environment())
"""The one registry of this process."""

os.register_at_fork(after_in_child=registry.forget)
