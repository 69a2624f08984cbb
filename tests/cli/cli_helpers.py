"""Helpers for command-line tests: the fake agent and checks on what the user sees."""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import decode_body
from iket_tui.protocol.frames import HEADER
from iket_tui.protocol.messages import BATCH, UNDELIVERED_TYPES
from iket_tui.protocol.recording import MAGIC
from iket_tui.sources.recorder import RecordingWriter

TIMEOUT_S = 120.0
FAKE_AGENT_PATH = Path(__file__).resolve().parents[1] / "sources" / "fake_agent.py"


def _load_fake_agent() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cli_fake_agent", FAKE_AGENT_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FakeAgent = _load_fake_agent().FakeAgent


def iket_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "iket_tui", *args]


def run_iket(*args: str, timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """Run ``python -m iket_tui ARGS`` to completion; never a traceback."""
    result = subprocess.run(
        iket_command(*args),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ),
        stdin=subprocess.DEVNULL,
    )
    assert_no_traceback(result.stderr)
    return result


def assert_no_traceback(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr


def assert_one_line_error(result: subprocess.CompletedProcess[str], *expected: str) -> None:
    """Exit code 2 and exactly one ``iket-tui: ...`` line on stderr containing ``expected``."""
    assert_no_traceback(result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("iket-tui: "), result.stderr
    for part in expected:
        assert part in lines[0], result.stderr
    assert result.returncode == 2, (result.returncode, result.stderr)


def complete_messages(data: bytes) -> int:
    """How many messages the whole frames after a recording's magic hold (a batch holds several,
    its index none that a reader delivers)."""
    count = 0
    pos = len(MAGIC)
    while pos + HEADER.size <= len(data):
        length, _crc = HEADER.unpack_from(data, pos)
        if pos + HEADER.size + length > len(data):
            break
        msg = decode_body(data[pos + HEADER.size : pos + HEADER.size + length])
        count += len(msg["messages"]) if msg["type"] == BATCH else 0 if msg["type"] in UNDELIVERED_TYPES else 1
        pos += HEADER.size + length
    return count


def wait_until(condition: Callable[[], bool], *, timeout: float = TIMEOUT_S) -> None:
    """Until ``condition()`` holds, checked every 50 ms."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{condition} never held"
        time.sleep(0.05)


def wait_for_size(path: Path, size: int, *, timeout: float = TIMEOUT_S) -> None:
    """Until the file at ``path`` holds at least ``size`` bytes."""
    wait_until(lambda: path.exists() and path.stat().st_size >= size, timeout=timeout)


class Terminal:
    """``python -m iket_tui ARGS`` in a real pseudo-terminal, as a user at a keyboard runs it."""

    def __init__(self, *args: str, columns: int = 120, rows: int = 40) -> None:
        self.output = b""
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.environ["TERM"] = "xterm-256color"
            os.environ["PYTHONFAULTHANDLER"] = "1"
            command = iket_command(*args)
            os.execv(command[0], command)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))

    def wait_for(self, text: bytes, *, timeout: float = TIMEOUT_S) -> None:
        """Until ``text`` has appeared on the screen (in the raw output)."""
        deadline = time.monotonic() + timeout
        while text not in self.output:
            if time.monotonic() > deadline:
                self._abort(f"{text!r} never appeared")
            self._read(0.1)

    def read_for(self, seconds: float) -> None:
        """Keep reading the screen for ``seconds``; what it draws meanwhile lands in :attr:`output`."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self._read(0.05)

    def press(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def wait_exit(self, *, timeout: float = TIMEOUT_S) -> int:
        """The exit code, reading the screen until the process ends."""
        deadline = time.monotonic() + timeout
        while True:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                while self._read(0.05):
                    pass
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
            if time.monotonic() > deadline:
                self._abort("the command never exited")
            self._read(0.1)

    def _abort(self, why: str) -> NoReturn:
        """Fail with where every thread of the command stood (its fault handler's dump)."""
        os.kill(self.pid, signal.SIGABRT)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not os.waitpid(self.pid, os.WNOHANG)[0]:
            self._read(0.1)
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        dump = self.output.rsplit(b"Fatal Python error", 1)[-1].decode(errors="replace")
        raise AssertionError(f"{why}; the command's threads:\n{dump[-6000:]}")

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return False
        try:
            data = os.read(self.fd, 65536)
        except OSError:
            return False
        self.output += data
        return bool(data)

    @property
    def lines_after_ui(self) -> list[str]:
        """What was printed after the full-screen UI closed (its alternate screen left)."""
        tail = self.output.rsplit(b"\x1b[?1049l", 1)[-1]
        text = tail.decode(errors="replace")
        text = re.sub(r"\x1b\[[0-9;?<>=]*[A-Za-z~]", "", text)
        return [line.strip() for line in text.replace("\r", "").splitlines() if line.strip()]


def failed_compile_recording(path: Path) -> Path:
    """A small recording of a compile whose pass failed, with what the agent captured of it."""
    writer = RecordingWriter(path, source="pid 1: python fails.py")
    common: dict[str, Any] = {"compile": 2, "context": 0, "seq": 4, "depth": 0, "parent": None, "phase": None}
    writer.write(m.compile_begin(compile=2, label="stage=jit-lower, kernel=bad", kernel="bad", target="cuda", t_ns=10))
    writer.write(m.pass_start(name="tl.LayoutInference", t_ns=20, **common))
    writer.write(m.pass_incomplete(name="tl.LayoutInference", t_ns=30, error="InternalError: conflict", **common))
    writer.write(
        m.compile_failure(
            compile=2,
            stage="pass",
            seq=4,
            name="tl.LayoutInference",
            error="InternalError: conflict",
            error_type="tvm.error.InternalError",
            t_ns=35,
            ir_json='{"root": 1}',
            ir_script="# from tvm.script import tir as T\n",
            target="cuda",
        )
    )
    writer.write(
        m.compile_end(
            compile=2,
            label="stage=jit-lower, kernel=bad",
            t_ns=40,
            duration_ns=30,
            ok=False,
            error="InternalError: conflict",
            error_type="tvm.error.InternalError",
            stage="pass",
        )
    )
    writer.close("target exited")
    return path
