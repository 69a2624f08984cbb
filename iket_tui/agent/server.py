"""The agent's Unix socket: one file per process in the per-user runtime directory, several clients.

A daemon thread accepts connections and gives each its own :class:`ClientSession`. On
close (the target exiting, or :func:`iket_tui.agent.stop`) the socket file goes first, so
no new client can arrive; then every client gets what its queue holds and a ``bye``,
within a bounded wait, and a client that does not read by then is simply hung up on.

The socket file can disappear under a running agent (a tmp cleaner, a logout removing the
runtime directory) or be replaced: the accept thread looks every :data:`WATCH_S` and binds
again at the same path, so new clients find the agent where they look; clients already
connected are not affected.

A client that breaks the protocol or a client's limits, or that runs as another user, is
refused: hung up on, counted, and named in one line on the ``iket_tui.agent`` logger (silent
unless the program configures logging) and in :attr:`AgentServer.refusals`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import socket
import stat
import sys
import threading
import time
from collections import deque
from pathlib import Path

import iket_tui
from iket_tui import endpoints
from iket_tui.agent.client_session import CAP_RESUME, ClientSession, SessionSettings
from iket_tui.agent.registry import DEFAULT_QUEUE, Registry
from iket_tui.protocol import messages as m

DEFAULT_HEARTBEAT_S = 1.0
DEFAULT_EXIT_FLUSH_S = 0.5
DEFAULT_HANDSHAKE_TIMEOUT_S = 5.0
MAX_CLIENTS = 64
"""Clients served at once, handshakes included; one more is refused."""
REFUSALS_KEPT = 16
WATCH_S = 1.0
"""How often the accept thread checks that the socket file is still this agent's."""

log = logging.getLogger("iket_tui.agent")
RANK_VARIABLES = ("RANK", "LOCAL_RANK")
"""Where a distributed launcher (``torchrun``, ``mpirun`` through torch's launcher) puts a
process's rank, the global one first."""


def rank_of_this_process() -> int | None:
    """This process's rank among those a distributed launcher started (``RANK``, else
    ``LOCAL_RANK``), so that a client watching them all can label each; ``None`` when unset or
    not a whole number."""
    for name in RANK_VARIABLES:
        raw = os.environ.get(name, "")
        if raw.isdigit():
            return int(raw)
    return None


class AgentServer:
    """Serves this process's events to every client that connects to its socket."""

    def __init__(
        self,
        registry: Registry,
        *,
        queue: int = DEFAULT_QUEUE,
        heartbeat_s: float = DEFAULT_HEARTBEAT_S,
        handshake_timeout_s: float = DEFAULT_HANDSHAKE_TIMEOUT_S,
        send_buffer: int | None = None,
    ) -> None:
        self._registry = registry
        self.pid = os.getpid()
        start_time = endpoints.process_start_time(self.pid)
        if start_time is None:
            raise endpoints.EndpointError(f"cannot read the start time of process {self.pid}")
        self.start_time = start_time
        self.path: Path = endpoints.socket_path_for(self.pid, start_time)
        self._settings = SessionSettings(
            hello=m.hello(
                role="agent",
                pid=self.pid,
                start_time=start_time,
                software_version=iket_tui.__version__,
                capabilities=[m.CAP_PASSES, CAP_RESUME],
                argv=endpoints.process_argv(self.pid) or list(sys.argv),
                t_ns=time.monotonic_ns(),
                ppid=os.getppid(),
                rank=rank_of_this_process(),
            ),
            queue=queue,
            heartbeat_s=heartbeat_s,
            handshake_timeout_s=handshake_timeout_s,
            send_buffer=send_buffer,
        )
        self._listener: socket.socket | None = None
        self._inode: tuple[int, int] | None = None  # the socket file's device and inode
        self._cannot_rebind: str | None = None  # why binding again failed last, said once
        self._sessions: list[ClientSession] = []
        self._lock = threading.Lock()
        self._closed = False
        self._synced = threading.Event()
        self.refused = 0
        """Clients refused so far."""
        self.refusals: deque[str] = deque(maxlen=REFUSALS_KEPT)
        """Why the latest clients were refused, one line each, oldest first."""

    def start(self) -> None:
        """Create the socket file (mode 0600) and start accepting clients."""
        endpoints.ensure_runtime_dir()
        endpoints.check_socket_path(self.path)
        endpoints.list_endpoints(clean_stale=True)
        self._listener, self._inode = self._bind()
        threading.Thread(target=self._accept_loop, name="iket-tui accept", daemon=True).start()

    def _bind(self) -> tuple[socket.socket, tuple[int, int]]:
        """A socket listening at :attr:`path`, and the file's identity.

        It is bound and listening under a hidden name first, then renamed over whatever is at
        the path: a client that sees the file can always connect.
        """
        binding = endpoints.binding_path_for(self.path)
        # Same pid and start time: any file under these names is a leftover of this very process.
        binding.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(binding))
            os.chmod(binding, 0o600)
            listener.listen(16)
            os.replace(binding, self.path)
            st = os.stat(self.path)
        except BaseException:
            listener.close()
            binding.unlink(missing_ok=True)
            raise
        return listener, (st.st_dev, st.st_ino)

    def wait_for_client(self, timeout: float | None) -> bool:
        """Block until some client has received its catch-up and ``sync``; ``False`` on timeout."""
        return self._synced.wait(timeout)

    @property
    def clients(self) -> int:
        """Clients connected now (handshakes in progress included)."""
        with self._lock:
            return sum(1 for session in self._sessions if session.thread.is_alive())

    def close(self, *, reason: str = "exit", flush_s: float = DEFAULT_EXIT_FLUSH_S) -> None:
        """Remove the socket file, flush every client within ``flush_s`` seconds, send ``bye``, hang up."""
        with self._lock:
            self._closed = True
            sessions = list(self._sessions)
        if os.getpid() != self.pid:
            return
        # A second close does it all again: the first may be suspended under a signal handler
        # (a SIGTERM while the exit flushes), and the sessions it has not told yet must be told.
        listener = self._listener
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        self._unlink()
        for session in sessions:
            session.close(reason)
        deadline = time.monotonic() + flush_s
        for session in sessions:
            session.thread.join(max(0.0, deadline - time.monotonic()))
        for session in sessions:
            if session.thread.is_alive():
                session.abort()
        for session in sessions:
            session.thread.join(0.5)

    def deliver_queued(self, timeout_s: float) -> None:
        """Have every client sent what its queue holds now, without waiting for a burst to
        gather, and wait for that at most ``timeout_s`` seconds; the clients stay connected."""
        with self._lock:
            sessions = [session for session in self._sessions if session.thread.is_alive()]
        for session in sessions:
            session.hurry()
        deadline = time.monotonic() + timeout_s
        for session in sessions:
            session.wait_delivered(deadline)

    def abandon(self) -> None:
        """Close this process's copies of the socket and of every client connection, in a child
        made by ``fork``: no shutdown, no ``bye`` and no unlink, which would end the parent's
        service. Takes no lock: a thread of the parent may have held one at the fork."""
        self._closed = True
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.close()
        for session in self._sessions:
            session.abandon()

    def _accept_loop(self) -> None:
        while True:
            listener = self._listener
            if self._closed or listener is None:
                return
            try:
                ready, _, _ = select.select([listener], [], [], WATCH_S)
            except (OSError, ValueError):  # closed meanwhile
                ready = [listener]
            if not ready:
                self._keep_socket_file()
                continue
            try:
                conn, _addr = listener.accept()
            except OSError:
                if self._closed:
                    return
                time.sleep(0.05)
                continue
            self._serve(conn)

    def _serve(self, conn: socket.socket) -> None:
        session = ClientSession(conn, self._registry, self._settings, self._synced.set, self._refused)
        with self._lock:
            if self._closed:
                conn.close()
                return
            self._sessions = [s for s in self._sessions if s.thread.is_alive()]
            crowded = len(self._sessions) >= MAX_CLIENTS
            if not crowded:
                self._sessions.append(session)
                session.start()
        if crowded:
            self._refuse_crowd(conn)

    def _keep_socket_file(self) -> None:
        """Bind again at :attr:`path` when the file there is no longer this agent's socket."""
        try:
            st = os.stat(self.path)
            if (st.st_dev, st.st_ino) == self._inode and stat.S_ISSOCK(st.st_mode):
                return
        except OSError:
            pass
        try:
            endpoints.ensure_runtime_dir(self.path.parent)
            listener, inode = self._bind()
        except (OSError, endpoints.EndpointError) as exc:
            why = str(exc)
            if why != self._cannot_rebind:
                self._cannot_rebind = why
                log.info("cannot bind %s again: %s", self.path, why)
            return
        self._cannot_rebind = None
        with self._lock:
            closed = self._closed
            if not closed:
                old, self._listener, self._inode = self._listener, listener, inode
        if closed:
            listener.close()
            self._unlink(inode)
            return
        log.info("bound %s again: it was removed or replaced", self.path)
        if old is not None:
            self._take_waiting(old)
            old.close()

    def _take_waiting(self, listener: socket.socket) -> None:
        """Serve the clients that connected to a listener about to be closed before it went."""
        listener.setblocking(False)
        while True:
            try:
                conn, _addr = listener.accept()
            except OSError:
                return
            conn.setblocking(True)
            self._serve(conn)

    def _refuse_crowd(self, conn: socket.socket) -> None:
        try:
            who = f"client pid {endpoints.peer_pid(conn)}"
        except OSError:
            who = "a client"
        self._refused(f"{who}: {MAX_CLIENTS} clients are served already")
        conn.close()

    def _refused(self, reason: str) -> None:
        """Count a client hung up on, and say why (on a client's thread, never the compiler's)."""
        with self._lock:
            self.refused += 1
            self.refusals.append(reason)
        log.info("refused %s", reason)

    def _unlink(self, inode: tuple[int, int] | None = None) -> None:
        """Remove the socket file if it is still the one this server created (or ``inode``)."""
        try:
            st = os.stat(self.path)
            if (st.st_dev, st.st_ino) == (inode or self._inode):
                self.path.unlink()
        except OSError:
            pass
