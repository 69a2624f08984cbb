"""Every agent on another machine through one ssh connection: ``attach node1: node2: ...``.

A :class:`HostLink` runs ``ssh HOST iket-tui bridge --all`` (see
:mod:`iket_tui.cli.host_bridge`), whose one stream carries the stream of every agent there,
each on a channel of its own (:mod:`iket_tui.protocol.mux`). Here each channel becomes one end
of a socket pair, which a :class:`HostAgentSource` reads exactly as
:class:`~iket_tui.sources.socket.SocketSource` reads a local agent's socket: hellos, requests,
recording, and taking the stream up again after a gap are the same. However many agents a
host runs, it costs one ssh login and one process there.

When the connection is lost (the host rebooted, the network dropped, sshd was restarted), every
agent's stream there pauses as an agent that hung up while its process runs on does, and the
link logs in again, waiting longer after each failure (:data:`BACKOFF_S`); once the bridge is
back, each agent's stream is taken up again from what this client has. The other hosts' links go
on meanwhile. :attr:`HostLink.lost_at_s` says since when it is lost. A host that cannot be
reached as the watch begins is lost from the start the same way (:meth:`HostLink.start_lost`),
and its agents join once it answers.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from iket_tui import __version__
from iket_tui.protocol import messages as m
from iket_tui.protocol import mux
from iket_tui.sources.base import HostState, SourceError
from iket_tui.sources.py_spy import NativeStacks
from iket_tui.sources.socket import SocketSource, _NotListening
from iket_tui.sources.ssh import (
    DEFAULT_HELLO_TIMEOUT_S,
    EXIT_AGENT_AWAY,
    EXIT_GONE,
    EXIT_NO_AGENT,
    RemoteTarget,
    _no_ssh,
    failure_line,
    native_stacks_there,
    ssh_command,
    ssh_exit,
    ssh_stderr_text,
)

BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0)
"""How long a lost link waits before each new login, the last one repeated."""
HOST_RECONNECT_S = 24 * 3600.0
"""How long an agent's stream waits for its host to come back before it ends."""
BRIDGE_HELLO = "bridge"
READY = "ready"
_CHUNK = 256 * 1024
_HELD_MAX = 1 << 20  # an agent says hello, then waits for its client's
_KEEPALIVE = ["-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]  # a silent network is lost in 15 s


@dataclass(eq=False)
class _Channel:
    """One agent's stream on the current connection."""

    number: int
    pid: int
    start_time: int
    end: socket.socket | None = None  # ours of the pair, once a source has taken the other
    held: bytearray = field(default_factory=bytearray)  # what came before that (the agent's hello)


class HostLink:
    """One ssh connection to ``host`` carrying every agent there (see the module's docstring).

    :meth:`start` logs in and waits for the bridge's first listing of the agents; the link then
    runs on a thread of its own until :meth:`close`. Called from the sources' threads:
    :meth:`claim`, :meth:`may_return`, :meth:`agents`.
    """

    def __init__(self, host: str, *, batch: bool = True) -> None:
        self.host = host
        self.lost_at_s: float | None = None
        """Since when (monotonic) the connection is lost and being made again; ``None`` while up."""
        self.why = ""
        """Why it was lost, in one line."""
        self.logins = 0
        """ssh connections made so far (the first, then one per reconnection)."""
        self._batch = batch
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._channels: dict[int, _Channel] = {}  # by channel number, on the current connection
        self._by_agent: dict[tuple[int, int], _Channel] = {}  # by (pid, start time)
        self._seen: dict[tuple[int, int], None] = {}  # every agent announced, in order
        self._ended: dict[tuple[int, int], int] = {}  # the bridge's code of each stream that ended
        self._ready = False  # the bridge has announced the agents it found first
        self._closed = False
        self._sock: socket.socket | None = None
        self._ssh: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._claimed: list[socket.socket] = []  # ends to watch, handed to the link's thread
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._thread: threading.Thread | None = None

    # -- starting and stopping ----------------------------------------------------------

    def start(self, timeout_s: float = DEFAULT_HELLO_TIMEOUT_S) -> None:
        """Log in and wait for the bridge's listing of the agents there; raises
        :class:`SourceError` with the one-line reason when it cannot be had."""
        sock = self._login(timeout_s)
        self._thread = threading.Thread(target=self._run, args=(sock,), name=f"iket-tui link {self.host}", daemon=True)
        self._thread.start()

    def start_lost(self, why: str) -> None:
        """Go on without the first login, which failed (``why``, one line): the host is lost
        from now, and logged in to again as one whose connection dropped is, until :meth:`close`."""
        with self._lock:
            self.lost_at_s = time.monotonic()
            self.why = why.removeprefix(f"{self.host}: ")
        self._thread = threading.Thread(target=self._run, args=(None,), name=f"iket-tui link {self.host}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """End the link soon: ssh's standard input closes, and the bridge there ends."""
        with self._lock:
            self._closed = True
            self._changed.notify_all()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        if self._thread is None:
            self._stop_ssh()

    @property
    def state(self) -> HostState:
        return HostState(self.host, self.lost_at_s, self.why)

    # -- what the sources ask -----------------------------------------------------------

    def agents(self) -> list[tuple[int, int]]:
        """Every agent the bridge announced so far, ``(pid, start time)``, in order."""
        with self._lock:
            return list(self._seen)

    def claim(self, pid: int, start_time: int) -> socket.socket:
        """The stream of that agent as a connected socket; :class:`_NotListening` while the
        bridge does not carry it (yet)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with self._lock:
            channel = self._by_agent.get((pid, start_time))
            if channel is None or channel.end is not None or self.lost_at_s is not None:
                ours.close()
                theirs.close()
                raise _NotListening(ConnectionRefusedError(f"{self.host}: pid {pid} is not carried now"))
            if channel.held:
                ours.sendall(channel.held)
                channel.held.clear()
            channel.end = ours
            self._claimed.append(ours)
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        return theirs

    def may_return(self, pid: int, start_time: int) -> bool:
        """Whether the stream of that agent may be had again: the link is lost (and being made
        again), or its process ran on when its stream ended, or the bridge carries it."""
        key = (pid, start_time)
        with self._lock:
            if self._closed:
                return False
            if self.lost_at_s is not None or key in self._by_agent:
                return True
            return self._ended.get(key, EXIT_GONE) in (EXIT_AGENT_AWAY, EXIT_NO_AGENT)

    # -- the connection -----------------------------------------------------------------

    def _login(self, timeout_s: float) -> socket.socket:
        """A new ssh running the bridge, once it has said hello and ``ready``."""
        self._stop_ssh()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (read and closed once ssh has ended)
        command = ssh_command(self.host, ["bridge", "--all"], batch=self._batch)
        try:
            self._ssh = subprocess.Popen(
                [*command[:-2], *_KEEPALIVE, *command[-2:]],
                stdin=theirs.fileno(),
                stdout=theirs.fileno(),
                stderr=self._stderr,
                start_new_session=True,
            )
        except OSError as exc:
            ours.close()
            raise SourceError(_no_ssh(exc)) from None
        finally:
            theirs.close()
        self.logins += 1
        decoder = mux.MuxDecoder()
        deadline = time.monotonic() + timeout_s
        said_hello = False
        ours.settimeout(0.2)
        try:
            while True:
                if self._closed:
                    raise SourceError(f"{self.host}: closed while logging in")
                if time.monotonic() >= deadline:
                    raise SourceError(
                        f"{self.host}: no answer through ssh within {timeout_s:g} s (is the host reachable?)"
                    )
                try:
                    data = ours.recv(_CHUNK)
                except TimeoutError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    stderr = self._stderr_text()
                    if "unrecognized arguments: --all" in stderr:  # an iket-tui there older than this one
                        raise SourceError(
                            f"{self.host}: its iket-tui has no bridge --all (older than this {__version__}):"
                            " upgrade it there, or attach one HOST:PID"
                        )
                    raise SourceError(failure_line(self.host, self._ssh_exit(5.0), stderr))
                decoder.feed(data)
                for number, body in decoder:
                    if number != mux.CONTROL:
                        raise mux.MuxError("an agent's bytes before its announcement")
                    msg = mux.decode_control(body)
                    if not said_hello:
                        if msg.get("type") != BRIDGE_HELLO:
                            raise mux.MuxError("no bridge hello")
                        said_hello = True
                        self._new_connection()
                    elif msg.get("type") == READY:
                        self._ready_now()
                        ours.settimeout(None)
                        rest = bytearray()
                        for more in decoder:  # what came along with ``ready``, for the link's thread
                            rest += mux.encode_record(*more)
                        if rest:
                            self._pending_records = bytes(rest)
                        return ours
                    else:
                        self._control(msg)
        except mux.MuxError as exc:
            ours.close()
            self._stop_ssh()
            raise SourceError(
                f"{self.host}: the remote iket-tui does not speak this bridge ({exc}): upgrade it there"
            ) from None
        except SourceError:
            ours.close()
            self._stop_ssh()
            raise

    _pending_records = b""

    def _new_connection(self) -> None:
        with self._lock:
            self._channels.clear()
            self._by_agent.clear()
            self._ready = False

    def _ready_now(self) -> None:
        """The bridge has announced the agents it found: those of the last connection it did
        not announce have gone (their processes ended while the link was lost)."""
        with self._lock:
            for key in self._seen:
                if key not in self._by_agent and key not in self._ended:
                    self._ended[key] = EXIT_GONE
            self._ready = True
            self.lost_at_s = None
            self.why = ""
            self._changed.notify_all()

    def _run(self, sock: socket.socket | None) -> None:
        """Carry the streams until closed, logging in again whenever the connection is lost
        (at once for a link started lost: ``sock`` is ``None``)."""
        failures = 0
        while not self._closed:
            if sock is not None:
                why = self._serve(sock)
                if self._closed:
                    break
                self._lose(why)
                sock = None
            while not self._closed:
                self._sleep(BACKOFF_S[min(failures, len(BACKOFF_S) - 1)])
                failures += 1
                if self._closed:
                    break
                try:
                    sock = self._login(DEFAULT_HELLO_TIMEOUT_S)
                except SourceError as exc:
                    with self._lock:
                        self.why = str(exc).removeprefix(f"{self.host}: ")
                    continue
                failures = 0
                break
        self._stop_ssh()
        with self._lock:
            for channel in self._channels.values():
                if channel.end is not None:
                    channel.end.close()

    def _lose(self, why: str) -> None:
        """The connection is lost: every agent's stream here pauses (its end closed)."""
        self._stop_ssh()
        with self._lock:
            self.lost_at_s = time.monotonic()
            self.why = why
            for channel in self._channels.values():
                if channel.end is not None:
                    with contextlib.suppress(OSError):
                        channel.end.shutdown(socket.SHUT_RDWR)
                    channel.end.close()
            self._channels.clear()
            self._by_agent.clear()
            self._claimed.clear()

    def _serve(self, sock: socket.socket) -> str:
        """Relay until the connection ends; returns why it did."""
        decoder = mux.MuxDecoder()
        decoder.feed(self._pending_records)
        self._pending_records = b""
        watched: dict[socket.socket, _Channel] = {}
        with sock, selectors.DefaultSelector() as sel:
            sel.register(sock, selectors.EVENT_READ)
            sel.register(self._wake_r, selectors.EVENT_READ)
            try:
                self._records(decoder, sock)
                while not self._closed:
                    for key, _ in sel.select():
                        if key.fileobj is self._wake_r:
                            with contextlib.suppress(OSError):
                                self._wake_r.recv(4096)
                            self._watch_claimed(sel, watched)
                        elif key.fileobj is sock:
                            data = sock.recv(_CHUNK)
                            if not data:
                                return self._lost_why()
                            decoder.feed(data)
                            self._records(decoder, sock)
                        else:
                            self._from_source(key.fileobj, watched, sel, sock)  # type: ignore[arg-type]
            except mux.MuxError as exc:
                return f"the bridge's stream is damaged ({exc})"
            except OSError as exc:
                return f"the connection broke ({exc.strerror or exc})"
        return "closed"

    def _watch_claimed(self, sel: selectors.BaseSelector, watched: dict[socket.socket, _Channel]) -> None:
        with self._lock:
            claimed, self._claimed = self._claimed, []
            for end in claimed:
                channel = next((c for c in self._channels.values() if c.end is end), None)
                if channel is not None:
                    watched[end] = channel
                    sel.register(end, selectors.EVENT_READ)

    def _from_source(
        self,
        end: socket.socket,
        watched: dict[socket.socket, _Channel],
        sel: selectors.BaseSelector,
        sock: socket.socket,
    ) -> None:
        """What a source sent its agent (its hello, requests), or that it hung up."""
        channel = watched[end]
        try:
            data = end.recv(_CHUNK)
        except OSError:
            data = b""
        if data:
            sock.sendall(mux.encode_record(channel.number, data))
            return
        sel.unregister(end)
        del watched[end]
        end.close()
        with self._lock:
            carried = self._channels.get(channel.number) is channel
            if carried:
                del self._channels[channel.number]
                self._by_agent.pop((channel.pid, channel.start_time), None)
                self._ended[(channel.pid, channel.start_time)] = EXIT_AGENT_AWAY  # until the bridge says
        if carried:  # the client is done with it: the bridge closes the agent's connection
            sock.sendall(mux.encode_control(mux.CLOSE, channel=channel.number))

    def _records(self, decoder: mux.MuxDecoder, sock: socket.socket) -> None:
        for number, body in decoder:
            if number == mux.CONTROL:
                self._control(mux.decode_control(body))
                continue
            with self._lock:
                channel = self._channels.get(number)
                if channel is None:
                    continue  # a stream that ended meanwhile
                end = channel.end
                if end is None:  # nobody reads it yet: held for the source that will
                    if len(channel.held) + len(body) > _HELD_MAX:
                        raise mux.MuxError(
                            f"pid {channel.pid} sent more than {_HELD_MAX} bytes before its client's hello"
                        )
                    channel.held += body
                    continue
            with contextlib.suppress(OSError):  # the source hung up: its end is seen closed by the selector
                end.sendall(body)

    def _control(self, msg: dict[str, Any]) -> None:
        kind = msg.get("type")
        number, pid, start = msg.get("channel"), msg.get("pid"), msg.get("start_time")
        with self._lock:
            if kind == mux.AGENT and type(number) is int and type(pid) is int and type(start) is int:
                channel = _Channel(number, pid, start)
                self._channels[number] = channel
                self._by_agent[(pid, start)] = channel
                self._seen.setdefault((pid, start), None)
                self._ended.pop((pid, start), None)
                self._changed.notify_all()
            elif kind == mux.AGENT_END and type(number) is int:
                code = msg.get("code")
                found = self._channels.pop(number, None) if number != mux.CONTROL else None
                if found is not None:
                    key = (found.pid, found.start_time)
                elif type(pid) is int and type(start) is int:
                    key = (pid, start)  # a stream the client had closed, or a process away that ended
                else:
                    return
                if self._by_agent.get(key) is found:
                    self._by_agent.pop(key, None)
                self._ended[key] = code if type(code) is int else EXIT_GONE
                if found is not None and found.end is not None:  # the source sees its stream end, its code known
                    with contextlib.suppress(OSError):
                        found.end.shutdown(socket.SHUT_RDWR)

    # -- ssh ------------------------------------------------------------------------------

    def _lost_why(self) -> str:
        code = self._ssh_exit(2.0)
        lines = [line.strip() for line in self._stderr_text().splitlines() if line.strip()]
        return lines[-1] if lines else f"ssh ended with code {code}" if code is not None else "the connection closed"

    def _sleep(self, seconds: float) -> None:
        with self._lock:
            self._changed.wait_for(lambda: self._closed, timeout=seconds)

    def _ssh_exit(self, wait_s: float) -> int | None:
        return ssh_exit(self._ssh, wait_s)

    def _stderr_text(self) -> str:
        return ssh_stderr_text(self._stderr)

    def _stop_ssh(self) -> None:
        process, self._ssh = self._ssh, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(2.0)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


class HostAgentSource(SocketSource):
    """One agent on a host, read through its :class:`HostLink`; named ``HOST/pid N``.

    Its stream waits for the link while the host is lost (for up to :data:`HOST_RECONNECT_S`)
    and takes up again from what this client has once the bridge carries the agent again.
    """

    native_margin_s = DEFAULT_HELLO_TIMEOUT_S + 5.0

    def __init__(
        self,
        link: HostLink,
        pid: int,
        start_time: int,
        *,
        filters: Mapping[str, Any] | None = None,
        frames_to: Callable[[bytes, list[m.Item]], None] | None = None,
        batch_interval_s: float = 0.03,
    ) -> None:
        super().__init__(
            Path(f"{link.host}:{pid}"),
            hello_timeout_s=DEFAULT_HELLO_TIMEOUT_S,
            batch_interval_s=batch_interval_s,
            reconnect_s=HOST_RECONNECT_S,
            filters=filters,
            frames_to=frames_to,
        )
        self.host = link.host
        self._link = link
        self._pid = pid
        self._start_time = start_time
        self.description = f"{self.host}:{pid}"

    @property
    def who(self) -> str:
        return f"{self.host}/pid {self._pid}"

    def _open_socket(self) -> socket.socket:
        try:
            return self._link.claim(self._pid, self._start_time)
        except _NotListening:
            raise SourceError(f"{self.host}:{self._pid}: no agent of that pid there now") from None

    def _connect_once(self) -> socket.socket:
        return self._link.claim(self._pid, self._start_time)

    def _check_identity(self, sock: socket.socket, hello: m.Message) -> None:
        if (hello["pid"], hello["start_time"]) != (self._pid, self._start_time):
            raise SourceError(
                f"{self.who}: the agent there says it is pid {hello['pid']}"
                f" started at {hello['start_time']}; refusing it"
            )

    def _describe(self, hello: m.Message) -> str:
        return f"{self.host}: {super()._describe(hello)}"

    def _served_by_agent(self, sock: socket.socket, hello: m.Message) -> bool:
        return True  # the bridge checked, over there, that the process named serves the socket

    def _still_runs(self, pid: int, start_time: int) -> bool:
        return self._link.may_return(pid, start_time)

    def _away_note(self, gap: str, pid: int) -> str:
        """Nothing while the host is lost (the header says so once for all its ranks), else the
        process in the user's words."""
        if self._link.lost_at_s is not None:
            return ""
        if gap == "stopped":
            return f"the agent of {self.who} stopped; waiting for it to start again"
        return f"{self.who} hung up without a bye but still runs; reconnecting"

    def _back_note(self, after: str, gone: str) -> str:
        return f"{self.who}: its stream taken up again after {after}; {gone}"

    def _native_stacks(self, hello: m.Message, timeout_s: float) -> NativeStacks:
        return native_stacks_there(RemoteTarget(self._link.host, self._pid), timeout_s)
