"""``iket-tui bridge --all``: the streams of every agent on this machine over one standard input and output.

``iket-tui attach node1: node2:`` runs ``ssh HOST iket-tui bridge --all`` once per host, not
once per agent: this bridge connects to every live agent of this user here (and to those that
start later, looked for every :data:`FIND_EVERY_S`), with the checks the one-agent bridge
makes (the peer runs as this user, the process the socket is named after serves it, its hello
names that pid and start time), and carries their streams unchanged, each on a channel of its
own (:mod:`iket_tui.protocol.mux`). It announces each agent before its bytes, says when an
agent's stream ended and why, and says ``ready`` once it has looked for the agents here the
first time. It ends when the client closes its standard input.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import time
from dataclasses import dataclass, field

from iket_tui import __version__
from iket_tui.cli.bridge import _check_hello, _Refused
from iket_tui.cli.errors import EXIT_BAD_INPUT, say
from iket_tui.endpoints import (
    EndpointError,
    check_peer,
    list_endpoints,
    must_run_as,
    peer_pid,
    process_alive,
    socket_path_for,
)
from iket_tui.protocol import mux
from iket_tui.protocol.frames import FrameDecoder, FrameError
from iket_tui.sources.ssh import EXIT_AGENT_AWAY

FIND_EVERY_S = 1.0
"""How often the bridge looks for agents that started since."""
BRIDGE: str = "bridge"
"""The bridge's first control message: it speaks this wire (``version``, the iket-tui there)."""
READY: str = "ready"
"""Control message: every agent listening when the bridge started has been announced."""
_CHUNK = 256 * 1024
_DYING_S = 0.3  # a process whose agent hung up may be a moment from exiting


@dataclass(eq=False)
class _Agent:
    """One agent's connection, on its channel."""

    channel: int
    pid: int
    start_time: int
    sock: socket.socket
    hello: FrameDecoder = field(default_factory=FrameDecoder)
    checked: bool = False


class HostBridge:
    """Every agent's stream on one channel each, over fds 0 (in) and 1 (out)."""

    def __init__(self) -> None:
        self._agents: dict[int, _Agent] = {}  # by channel
        self._open: dict[tuple[int, int], _Agent] = {}  # by (pid, start time)
        self._declined: set[tuple[int, int]] = set()  # refused: never connected to again
        self._away: set[tuple[int, int]] = set()  # streams ended while their processes ran on
        self._next_channel = 1
        self._decoder = mux.MuxDecoder()
        self._sel = selectors.DefaultSelector()
        self._out_ok = True

    def run(self) -> int:
        self._write(mux.encode_control(BRIDGE, version=__version__))
        self._find()
        self._write(mux.encode_control(READY))
        self._sel.register(0, selectors.EVENT_READ)
        next_find = time.monotonic() + FIND_EVERY_S
        try:
            while self._out_ok:
                for key, _ in self._sel.select(max(0.0, next_find - time.monotonic())):
                    if key.fileobj == 0:
                        if not self._from_client():
                            return 0
                    else:
                        self._from_agent(key.data)
                if time.monotonic() >= next_find:
                    self._find()
                    next_find = time.monotonic() + FIND_EVERY_S
            return 0
        finally:
            for agent in list(self._agents.values()):
                agent.sock.close()
            self._sel.close()

    # -- agents -------------------------------------------------------------------------

    def _find(self) -> None:
        """Connect to every agent not carried yet (nor refused), and say which of the processes
        whose streams ended while they ran on have ended since."""
        for endpoint in list_endpoints():
            key = (endpoint.pid, endpoint.start_time)
            if key not in self._open and key not in self._declined:
                self._connect(*key)
        for pid, start in list(self._away):
            if (pid, start) in self._open or not process_alive(pid, start):
                self._away.discard((pid, start))
            if (pid, start) not in self._open and not process_alive(pid, start):
                self._write(
                    mux.encode_control(
                        mux.AGENT_END, channel=0, pid=pid, start_time=start, code=0, reason="its process ended"
                    )
                )

    def _connect(self, pid: int, start_time: int) -> bool:
        """Connect to the agent of ``pid`` and announce its channel; ``False`` when none listens."""
        path = socket_path_for(pid, start_time)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(path))
            check_peer(sock)
            served_by = peer_pid(sock)
        except EndpointError as exc:
            sock.close()
            say(f"{path}: the agent {exc}; {must_run_as()}")
            self._declined.add((pid, start_time))
            return False
        except OSError:
            sock.close()
            return False
        if served_by not in (0, pid):
            sock.close()
            say(f"{path}: served by pid {served_by}, not by pid {pid}; refusing it")
            self._declined.add((pid, start_time))
            return False
        agent = _Agent(self._next_channel, pid, start_time, sock)
        self._next_channel += 1
        self._agents[agent.channel] = agent
        self._open[(pid, start_time)] = agent
        self._sel.register(sock, selectors.EVENT_READ, agent)
        self._write(mux.encode_control(mux.AGENT, channel=agent.channel, pid=pid, start_time=start_time))
        return True

    def _from_agent(self, agent: _Agent) -> None:
        try:
            data = agent.sock.recv(_CHUNK)
        except OSError:
            data = b""
        if not data:
            self._ended(agent, self._agent_gone(agent), "the agent closed the stream")
            return
        if not agent.checked:
            agent.hello.feed(data)
            try:
                body = next(agent.hello)
            except StopIteration:
                body = None
            except FrameError:
                agent.checked = True  # not an agent's stream: the client says so
            if body is not None:
                try:
                    _check_hello(body, agent.pid, agent.start_time)
                except _Refused as exc:
                    self._ended(agent, exc.code, str(exc))
                    self._declined.add((agent.pid, agent.start_time))
                    return
                agent.checked = True
        self._write(mux.encode_record(agent.channel, data))

    def _agent_gone(self, agent: _Agent) -> int:
        """0 when the agent's process ended (or is ending), else :data:`EXIT_AGENT_AWAY`."""
        deadline = time.monotonic() + _DYING_S
        while process_alive(agent.pid, agent.start_time):
            if time.monotonic() >= deadline:
                return EXIT_AGENT_AWAY
            time.sleep(0.02)
        return 0

    def _ended(self, agent: _Agent, code: int, reason: str) -> None:
        """The agent's stream ended (``code`` says why): its connection closed, the client told."""
        self._sel.unregister(agent.sock)
        agent.sock.close()
        del self._agents[agent.channel]
        key = (agent.pid, agent.start_time)
        self._open.pop(key, None)
        if code == EXIT_AGENT_AWAY:
            self._away.add(key)  # carried again once it listens; the client is told if it ends
        end = mux.encode_control(
            mux.AGENT_END, channel=agent.channel, pid=agent.pid, start_time=agent.start_time, code=code, reason=reason
        )
        self._write(end)

    # -- the client ---------------------------------------------------------------------

    def _from_client(self) -> bool:
        """Take what the client sent; ``False`` once it has left."""
        try:
            data = os.read(0, _CHUNK)
        except OSError:
            data = b""
        if not data:
            return False
        self._decoder.feed(data)
        try:
            for channel, body in self._decoder:
                if channel == mux.CONTROL:
                    self._control(mux.decode_control(body))
                    continue
                agent = self._agents.get(channel)
                if agent is None:
                    continue  # an agent that ended while this was on its way
                try:
                    agent.sock.sendall(body)
                except OSError:
                    self._ended(agent, self._agent_gone(agent), "the agent closed the stream")
        except mux.MuxError as exc:
            say(f"the client does not speak the bridge's wire ({exc})")
            return False
        return True

    def _control(self, msg: dict[str, object]) -> None:
        kind, channel = msg.get("type"), msg.get("channel")
        if kind == mux.CLOSE and type(channel) is int and channel in self._agents:  # others are skipped
            agent = self._agents[channel]
            runs_on = process_alive(agent.pid, agent.start_time)
            self._ended(agent, EXIT_AGENT_AWAY if runs_on else 0, "closed by the client")

    def _write(self, data: bytes) -> None:
        """Write all of ``data`` to stdout; once the client's end is gone, the bridge ends."""
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(1, view) :]
        except OSError:
            self._out_ok = False


def cmd_bridge_all() -> int:
    """Carry every agent's stream here until the client leaves (see the module's docstring)."""
    if os.isatty(1):
        say(
            "bridge writes agents' binary streams to standard output, which is a terminal here:"
            " it is what `iket-tui attach HOST:` runs on HOST through ssh"
        )
        return EXIT_BAD_INPUT
    with contextlib.suppress(KeyboardInterrupt):
        return HostBridge().run()
    return 0
