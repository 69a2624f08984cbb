"""``iket-tui bridge PID``: an agent's stream over standard input and output, for a UI on another machine.

``iket-tui attach HOST:PID`` runs ``ssh HOST iket-tui bridge PID``. The bridge connects to the
agent of PID on this machine with the checks a local attach makes (the peer runs as this user,
by ``SO_PEERCRED``; the process named serves the socket; the agent's hello names that pid and
the start time its socket is named after), then copies bytes both ways, unchanged, until either
side ends. Its exit code tells the other end why (the ``EXIT_*`` codes of
:mod:`iket_tui.sources.ssh`); what went wrong is one line on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import selectors
import socket
import time

from iket_tui.cli.errors import EXIT_BAD_INPUT, say
from iket_tui.endpoints import (
    EndpointError,
    ForeignPeerError,
    NoAgentError,
    check_peer,
    must_run_as,
    peer_pid,
    process_alive,
    process_start_time,
    resolve_target,
)
from iket_tui.protocol.codec import ProtocolError, decode_body
from iket_tui.protocol.frames import FrameDecoder, FrameError
from iket_tui.sources.ssh import EXIT_AGENT_AWAY, EXIT_GONE, EXIT_NO_AGENT

_CHUNK = 256 * 1024
_DYING_S = 0.3  # a process whose agent hung up may be a moment from exiting
_RETRY_S = 0.1


class _Refused(Exception):
    """The bridge cannot carry this stream: a one-line reason and the exit code that says why."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def cmd_bridge(args: argparse.Namespace) -> int:
    """Carry the stream of the agent of ``args.pid`` over stdin and stdout until either side ends."""
    if args.all:
        if args.pid is not None:
            say("bridge --all carries every agent here: name no PID with it")
            return EXIT_BAD_INPUT
        from iket_tui.cli.host_bridge import cmd_bridge_all

        return cmd_bridge_all()
    if args.pid is None:
        say("bridge needs a PID, or --all")
        return EXIT_BAD_INPUT
    if os.isatty(1):
        say(
            "bridge writes an agent's binary stream to standard output, which is a terminal here:"
            " it is what `iket-tui attach HOST:PID` runs on HOST through ssh"
        )
        return EXIT_BAD_INPUT
    try:
        sock, start = _connect(args.pid, args.start_time, args.wait)
    except _Refused as exc:
        say(str(exc))
        return exc.code
    with sock:
        try:
            return _carry(sock, args.pid, start)
        except _Refused as exc:
            say(str(exc))
            return exc.code


def _connect(pid: int, start_time: int | None, wait_s: float) -> tuple[socket.socket, int]:
    """A connection to the agent of ``pid`` (the one that started at ``start_time``, if given),
    waiting up to ``wait_s`` for it to listen; and the process's start time."""
    deadline = time.monotonic() + wait_s
    while True:
        start = process_start_time(pid)
        if start is None or (start_time is not None and start != start_time):
            raise _Refused(EXIT_GONE, f"no process with pid {pid}" + (" any more" if start_time is not None else ""))
        try:
            path = resolve_target(str(pid))
        except NoAgentError as exc:
            not_listening = str(exc)
        except EndpointError as exc:
            raise _Refused(EXIT_BAD_INPUT, str(exc)) from None
        else:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(str(path))
                check_peer(sock)
                served_by = peer_pid(sock)
                if served_by not in (0, pid):
                    raise _Refused(EXIT_BAD_INPUT, f"{path}: served by pid {served_by}, not by pid {pid}; refusing it")
                return sock, start
            except (FileNotFoundError, ConnectionRefusedError):
                sock.close()
                not_listening = f"process {pid}: no agent listens at {path} (it stopped?)"
            except ForeignPeerError as exc:
                sock.close()
                raise _Refused(EXIT_BAD_INPUT, f"{path}: the agent runs as uid {exc.uid}; {must_run_as()}") from None
            except OSError as exc:
                sock.close()
                raise _Refused(EXIT_BAD_INPUT, f"{path}: cannot connect ({exc.strerror or exc})") from None
            except _Refused:
                sock.close()
                raise
        if time.monotonic() >= deadline:
            raise _Refused(EXIT_NO_AGENT, not_listening)
        time.sleep(_RETRY_S)


def _carry(sock: socket.socket, pid: int, start: int) -> int:
    """Copy the client's bytes (stdin) to the agent and the agent's (once its hello is checked)
    to stdout, until one side ends; the exit code says which, and whether the process runs on."""
    hello = FrameDecoder()
    held = bytearray()  # the agent's first bytes, until its hello is checked
    checked = False
    sock.setblocking(True)
    with selectors.DefaultSelector() as sel:
        sel.register(sock, selectors.EVENT_READ)
        sel.register(0, selectors.EVENT_READ)
        while True:
            for key, _ in sel.select():
                if key.fileobj == 0:
                    data = _read_stdin()
                    if not data:
                        return 0  # the client left
                    try:
                        sock.sendall(data)
                    except OSError:
                        return _agent_ended(pid, start)
                    continue
                try:
                    data = sock.recv(_CHUNK)
                except OSError:
                    data = b""
                if not data:
                    if held:
                        _write_out(bytes(held))
                    return _agent_ended(pid, start)
                if checked:
                    if not _write_out(data):
                        return 0
                    continue
                held += data
                hello.feed(data)
                try:
                    body = next(hello)
                except StopIteration:
                    continue
                except FrameError:
                    pass  # not an agent's stream: the client says so
                else:
                    _check_hello(body, pid, start)
                checked = True
                if not _write_out(bytes(held)):
                    return 0
                held.clear()


def _check_hello(body: bytes, pid: int, start: int) -> None:
    """Refuse an agent whose hello names another process than the one asked for; a hello this
    iket-tui cannot read (another protocol) is left to the client to say so."""
    try:
        hello = decode_body(body)
    except ProtocolError:
        return
    said = (hello.get("pid"), hello.get("start_time"))
    if said != (pid, start):
        raise _Refused(
            EXIT_BAD_INPUT,
            f"the agent of pid {pid} says it is pid {said[0]} started at {said[1]},"
            f" not pid {pid} started at {start} (clock ticks since boot); refusing it",
        )


def _read_stdin() -> bytes:
    try:
        return os.read(0, _CHUNK)
    except OSError:
        return b""


def _write_out(data: bytes) -> bool:
    """Write all of ``data`` to stdout; ``False`` when the client's end is gone."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(1, view) :]
    except OSError:
        return False
    return True


def _agent_ended(pid: int, start: int) -> int:
    """The exit code once the agent closed the stream: 0 when its process ended (or is ending),
    :data:`EXIT_AGENT_AWAY` when it runs on (its agent stopped, and may start again)."""
    with contextlib.suppress(OSError):
        os.close(1)  # the client sees the end of the stream now, not when this process exits
    deadline = time.monotonic() + _DYING_S
    while process_alive(pid, start):
        if time.monotonic() >= deadline:
            return EXIT_AGENT_AWAY
        time.sleep(0.02)
    return 0
