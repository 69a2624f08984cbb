"""A test client that speaks the iket-tui protocol to a real agent over its real Unix socket."""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from iket_tui import endpoints
from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import MessageDecoder, check_hello, encode_message
from iket_tui.protocol.messages import Message

TARGETS = Path(__file__).parent / "targets"
WAIT_S = 120.0
SESSION_TYPES = frozenset({m.HELLO, m.HEARTBEAT, m.SYNC, m.DROPPED, m.BYE})


def events(msgs: list[Message]) -> list[Message]:
    """The target's events among ``msgs``: everything but the session's own messages."""
    return [msg for msg in msgs if msg["type"] not in SESSION_TYPES]


def of_type(msgs: list[Message], kind: str, **fields: Any) -> list[Message]:
    return [msg for msg in msgs if msg["type"] == kind and all(msg.get(k) == v for k, v in fields.items())]


def spawn_target(script: str, *, env: Mapping[str, str] | None = None, agent: bool = True) -> subprocess.Popen[str]:
    """Run ``targets/<script>`` (or ``-c`` code) with the agent enabled through IKET_TUI=1."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("IKET_TUI", None)
    if agent:
        full_env["IKET_TUI"] = "1"
    args = [sys.executable, str(TARGETS / script)] if script.endswith(".py") else [sys.executable, "-c", script]
    return subprocess.Popen(args, cwd=TARGETS, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def socket_of(proc: subprocess.Popen[str], timeout: float = WAIT_S) -> Path:
    """The agent socket of a running target, once it exists."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        start = endpoints.process_start_time(proc.pid)
        if start is not None:
            path = endpoints.socket_path_for(proc.pid, start)
            if path.exists():
                return path
        if proc.poll() is not None:
            raise AssertionError(f"target exited with {proc.returncode} before serving: {proc.stderr.read()}")  # type: ignore[union-attr]
        time.sleep(0.02)
    raise AssertionError(f"no agent socket for pid {proc.pid} after {timeout} s")


def wait_until(condition: Callable[[], bool], timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


class WireClient:
    """Connects, exchanges hellos, and records every message it reads, in order."""

    def __init__(self, path: Path, *, hello: bool = True) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        self.decoder = MessageDecoder()
        self.received: list[Message] = []
        self.eof = False
        self._pending: list[Message] = []
        self.agent_hello: Message = {}
        if hello:
            first = self.next()
            assert first is not None
            check_hello(first, expect_role="agent")
            self.agent_hello = first
            me = m.hello(role="client", pid=os.getpid(), start_time=0, software_version="test", capabilities=[])
            self.sock.sendall(encode_message(me))

    def next(self, timeout: float = WAIT_S) -> Message | None:
        """The next message, or ``None`` at end of stream."""
        deadline = time.monotonic() + timeout
        while not self._pending:
            if self.eof:
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no message within {timeout} s; last: {self.received[-3:]}")
            ready, _, _ = select.select([self.sock], [], [], remaining)
            if not ready:
                continue
            try:
                data = self.sock.recv(65536)
            except ConnectionResetError:
                data = b""
            if not data:
                self.eof = True
                self._pending.extend(self.decoder.finish())
                continue
            self.decoder.feed(data)
            self._pending.extend(self.decoder)
        msg = self._pending.pop(0)
        self.received.append(msg)
        return msg

    def read_until(self, predicate: Callable[[Message], bool], timeout: float = WAIT_S) -> Message:
        deadline = time.monotonic() + timeout
        while True:
            msg = self.next(max(0.0, deadline - time.monotonic()))
            if msg is None:
                raise AssertionError(f"stream ended before the awaited message; last: {self.received[-3:]}")
            if predicate(msg):
                return msg

    def read_to_end(self, timeout: float = WAIT_S) -> list[Message]:
        deadline = time.monotonic() + timeout
        while self.next(max(0.0, deadline - time.monotonic())) is not None:
            pass
        return self.received

    def catch_up(self) -> tuple[list[Message], Message]:
        """Reads through ``sync``: the catch-up messages (after the hello) and the sync itself."""
        sync = self.read_until(lambda msg: msg["type"] == m.SYNC)
        return self.received[1:-1], sync

    def close(self) -> None:
        self.sock.close()
