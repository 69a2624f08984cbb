"""Starting and stopping the agent of this process: its socket server and its TileLang watcher.

A process forked from one that runs the agent starts its own at once, with the same settings
(a multiprocessing worker made by ``fork`` or by the ``forkserver``): it serves its own socket,
its hello names its parent, and it holds nothing of the parent's (see
:meth:`~iket_tui.agent.registry.Registry.forget`). It does not trace kernels: a forked child
cannot use its parent's GPU context. Processes that start a new interpreter (``spawn``,
``subprocess`` running Python) start theirs from the ``IKET_TUI=1`` they inherit.
"""

from __future__ import annotations

import atexit
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from iket_tui.agent.kernel_options import KernelOptions
from iket_tui.agent.registry import DEFAULT_BACKLOG, DEFAULT_QUEUE, ClientStats, Registry, registry
from iket_tui.agent.server import DEFAULT_EXIT_FLUSH_S, DEFAULT_HEARTBEAT_S, AgentServer
from iket_tui.agent.term_signal import TERM_FLUSH_S, TermFlush
from iket_tui.agent.tilelang_hook import TileLangHook

if TYPE_CHECKING:
    from iket_tui.agent.kernels import KernelTracer


CHILD_WAIT = "IKET_TUI_CHILD_WAIT"
"""Seconds the agent of every child process waits for a first client before the child goes
on (set by ``iket-tui run`` while it follows children, so that it misses nothing of one); kept
in the environment, so that every generation waits."""


@dataclass(frozen=True)
class AgentSettings:
    """How an agent was started: a forked child starts its own agent with the same."""

    backlog: int
    queue: int
    heartbeat_s: float
    exit_flush_s: float
    send_buffer: int | None


class Agent:
    """The agent running in this process."""

    def __init__(self, registry: Registry, server: AgentServer, hook: TileLangHook, settings: AgentSettings) -> None:
        self.registry = registry
        self._server = server
        self._hook = hook
        self.settings = settings
        self._exit_flush_s = settings.exit_flush_s
        self.pid = server.pid
        self.kernels: KernelTracer | None = None
        """Kernel tracing, when it is on."""
        self.term: TermFlush | None = None
        """This process's SIGTERM handler while the agent runs (see :mod:`~iket_tui.agent.term_signal`)."""

    @property
    def socket_path(self) -> Path:
        """The Unix socket clients connect to."""
        return self._server.path

    @property
    def produced(self) -> int:
        """Events produced in this process so far."""
        return self.registry.produced

    @property
    def clients(self) -> int:
        """Clients connected now."""
        return self._server.clients

    @property
    def refused_clients(self) -> int:
        """Clients hung up on so far for breaking the protocol or a client's limits, or for
        running as another user."""
        return self._server.refused

    @property
    def refusals(self) -> tuple[str, ...]:
        """Why the latest clients were refused, one line each, oldest first (also logged on the
        ``iket_tui.agent`` logger)."""
        return tuple(self._server.refusals)

    @property
    def watching_tilelang(self) -> bool:
        """Whether TileLang has been imported and its compiles are watched."""
        return self._hook.registered

    def trace_kernels(self, options: KernelOptions | None = None) -> KernelTracer:
        """Turn kernel tracing on (see :mod:`iket_tui.agent.kernels`); it starts when TileLang
        is imported, or now if it already is. Kernels compiled before are not traced."""
        from iket_tui.agent.kernels import KernelTracer  # numpy and the ring: only when tracing

        with self.registry.agent_lock:
            if self.kernels is None:
                self.kernels = KernelTracer(self.registry, options or KernelOptions())
                self._hook.also(self.kernels.attach_tilelang)
            return self.kernels

    def wait_for_client(self, timeout: float | None) -> bool:
        """Block until a client has received its catch-up (so it misses nothing); ``False`` on timeout."""
        return self._server.wait_for_client(timeout)

    def client_stats(self) -> list[ClientStats]:
        """Exact counters of every connected client, in the order they attached."""
        return self.registry.client_stats()

    def stop(self, *, reason: str = "stopped") -> None:
        """Stop watching compiles, flush and say goodbye to every client, remove the socket."""
        with self.registry.agent_lock:
            if self.registry.agent is self:
                self.registry.agent = None
        atexit.unregister(self._at_exit)
        if self.term is not None:
            self.term.uninstall()
        if self.kernels is not None:
            self.kernels.stop()
        self._hook.remove()
        self.close_at_exit(reason, self._exit_flush_s)

    def abandon(self) -> None:
        """Let go of this agent in a child made by ``fork``, where it is the parent's: close the
        child's copies of its socket and its clients' connections, so that a client sees the
        stream end when the parent ends, and send nothing on them, since the parent still serves
        them. Its threads did not survive the fork; at the child's exit nothing is flushed."""
        atexit.unregister(self._at_exit)
        if self.term is not None:
            self.term.abandon()
        self._server.abandon()

    def deliver_queued(self, timeout_s: float) -> None:
        """Have every client sent what it is owed now (the passes running compiles noted
        included), waiting at most ``timeout_s`` seconds; the clients stay connected."""
        self.registry.held_notes.collect()
        self._server.deliver_queued(timeout_s)

    def close_at_exit(self, reason: str, flush_s: float) -> None:
        """Send every client what it is owed (the passes running compiles noted included) and a
        ``bye`` with ``reason``, within ``flush_s`` seconds, and hang up."""
        self.registry.held_notes.collect()
        self._server.close(reason=reason, flush_s=flush_s)

    def _at_exit(self) -> None:
        if self.kernels is not None:
            self.kernels.stop()  # a last drain: what the kernels wrote goes out before the bye
        self.close_at_exit("exit", self._exit_flush_s)


def start(
    *,
    backlog: int = DEFAULT_BACKLOG,
    queue: int = DEFAULT_QUEUE,
    heartbeat_s: float = DEFAULT_HEARTBEAT_S,
    wait_for_client_s: float | None = None,
    exit_flush_s: float = DEFAULT_EXIT_FLUSH_S,
    send_buffer: int | None = None,
    kernels: bool | KernelOptions = False,
) -> Agent:
    """Start the agent of this process, or return the one already running.

    ``backlog`` events are kept for clients that attach later; each client's queue holds up to
    ``queue`` events before further ones are dropped and counted. With ``wait_for_client_s``
    this blocks until a first client has received its catch-up, for at most that many
    seconds, so that it misses nothing of what follows. ``exit_flush_s`` bounds the wait for
    clients to receive what they are owed when the process exits (for an exit by SIGTERM, at
    most :data:`~iket_tui.agent.term_signal.TERM_FLUSH_S`; see :mod:`~iket_tui.agent.term_signal`).
    ``send_buffer`` sets the kernel send buffer of each client socket in bytes (the system default when ``None``).
    ``kernels`` turns kernel tracing on (``True`` for the defaults, or :class:`KernelOptions`):
    IKET events of kernels compiled from then on stream to clients while they run.
    """
    if backlog < 0:
        raise ValueError(f"backlog must be at least 0, got {backlog}")
    if queue < 1:
        raise ValueError(f"queue must be at least 1, got {queue}")
    if heartbeat_s <= 0:
        raise ValueError(f"heartbeat_s must be positive, got {heartbeat_s}")
    with registry.agent_lock:
        agent = registry.agent
        if agent is None or agent.pid != os.getpid():
            registry.configure(backlog=backlog)
            server = AgentServer(registry, queue=queue, heartbeat_s=heartbeat_s, send_buffer=send_buffer)
            server.start()
            hook = TileLangHook(registry)
            try:
                hook.install()
            except BaseException:
                server.close(reason="error", flush_s=0.0)
                raise
            agent = Agent(registry, server, hook, AgentSettings(backlog, queue, heartbeat_s, exit_flush_s, send_buffer))
            atexit.register(agent._at_exit)
            agent.term = TermFlush.install(agent, min(exit_flush_s, TERM_FLUSH_S))
            registry.agent = agent
    if kernels:
        agent.trace_kernels(kernels if isinstance(kernels, KernelOptions) else None)
    if wait_for_client_s is not None:
        agent.wait_for_client(wait_for_client_s)
    return agent


def stop() -> None:
    """Stop the agent of this process, if one runs."""
    agent = current()
    if agent is not None:
        agent.stop()


def current() -> Agent | None:
    """The agent running in this process, if any."""
    agent = registry.agent
    return agent if agent is not None and agent.pid == os.getpid() else None


def child_wait_s() -> float | None:
    """:data:`CHILD_WAIT` as seconds, left in the environment for every generation; see :func:`env_seconds`."""
    return env_seconds(CHILD_WAIT, keep=True)


def env_seconds(name: str, *, keep: bool) -> float | None:
    """The environment variable ``name`` as seconds to wait for a first client; ``None`` when
    unset, or not a number of seconds (said in one line on stderr: the program runs on without
    waiting). Unless ``keep``, it is removed, so that the processes this one starts do not wait."""
    raw = os.environ.get(name, "") if keep else os.environ.pop(name, "")
    if raw == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:
        print(
            f"iket-tui agent: {name} must be a number of seconds, got {raw!r}; not waiting for a client",
            file=sys.stderr,
        )
        return None
    return value


def _start_in_forked_child() -> None:
    """In a child made by ``fork`` from a process that ran the agent: start this child's own.
    Any problem is one line on stderr, and the child runs on without an agent."""
    parent = registry.parent_agent
    registry.parent_agent = None
    if parent is None:
        return
    settings = parent.settings
    try:
        agent = start(
            backlog=settings.backlog,
            queue=settings.queue,
            heartbeat_s=settings.heartbeat_s,
            exit_flush_s=settings.exit_flush_s,
            send_buffer=settings.send_buffer,
        )
        _flush_before_worker_exit(agent)
        wait = child_wait_s()
        if wait is not None and not agent.wait_for_client(wait):
            print(
                f"iket-tui agent: no client attached to pid {agent.pid} within {wait:g} s; running on", file=sys.stderr
            )
    except Exception as exc:
        print(f"iket-tui agent: not started in forked pid {os.getpid()}: {exc}", file=sys.stderr)


def _flush_before_worker_exit(agent: Agent) -> None:
    """A multiprocessing worker made by ``fork`` or the fork server ends with ``os._exit``, past
    ``atexit``: have multiprocessing's own exit handling flush the agent's clients and say bye.
    It clears its finalizers right after the fork, so the finalizer is set up after that."""
    util = sys.modules.get("multiprocessing.util")
    if util is not None:
        util.register_after_fork(agent, _finalize_at_worker_exit)


def _finalize_at_worker_exit(agent: Agent) -> None:
    import multiprocessing.util

    multiprocessing.util.Finalize(agent, agent._at_exit, exitpriority=-100)


os.register_at_fork(after_in_child=_start_in_forked_child)
