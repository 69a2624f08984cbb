"""A client of the same user that sends the agent one huge valid frame: the compiling target never
notices, and the client is hung up on with a one-line reason in the agent's log and counters."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from iket_tui import endpoints
from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import MessageDecoder, encode_message
from iket_tui.protocol.frames import encode_frame

pytestmark = pytest.mark.tilelang

TARGET = Path(__file__).parent / "targets" / "busy_compiler.py"
WAIT_S = 180.0


@pytest.fixture
def runtime_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ik"))  # short: socket paths are limited to 108 bytes
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(path))
    monkeypatch.delenv("IKET_TUI", raising=False)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def nested_empty_arrays() -> bytes:
    """One valid frame within every limit of the protocol (16 arrays of 1,000,000 empty arrays,
    16 MB) that decodes to 16 million Python lists."""
    inner = b"\xdd" + struct.pack(">I", 1_000_000) + b"\x90" * 1_000_000
    return encode_frame(b"\xdc" + struct.pack(">H", 16) + inner * 16)


def _readline(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "the target printed nothing in time"
    return proc.stdout.readline()


def _agent_socket(pid: int) -> Path:
    start = endpoints.process_start_time(pid)
    assert start is not None
    path = endpoints.socket_path_for(pid, start)
    assert path.exists()
    return path


def _greeted(path: Path) -> socket.socket:
    """A connection to the agent after both hellos, as any client of this user opens one."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(path))
    sock.settimeout(30)
    decoder = MessageDecoder()
    while not list(decoder):
        decoder.feed(sock.recv(65536))
    me = m.hello(role="client", pid=os.getpid(), start_time=0, software_version="test", capabilities=[])
    sock.sendall(encode_message(me))
    return sock


def _hung_up_within(sock: socket.socket, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    sock.settimeout(0.5)
    while time.monotonic() < deadline:
        try:
            if not sock.recv(65536):
                return True
        except TimeoutError:
            continue
        except ConnectionResetError:
            return True
    return False


def test_a_huge_frame_from_a_client_costs_the_compiling_target_nothing(runtime_dir: Path, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    env = {**os.environ, "IKET_TEST_GATE": str(gate)}
    env.pop("IKET_TUI", None)
    proc = subprocess.Popen(
        [sys.executable, str(TARGET)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert _readline(proc, WAIT_S) == "ready\n"
        sock = _greeted(_agent_socket(proc.pid))
        attacked = time.monotonic()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # hung up on before all was sent
            sock.sendall(nested_empty_arrays())
        assert _hung_up_within(sock, 30)
        time.sleep(2.0)  # the target lowers on meanwhile
        gate.touch()
        stdout, stderr = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr
    report = json.loads(stdout.splitlines()[-1])
    lowered = report["lowered"]
    during = [t for t in lowered if t > attacked]
    assert len(during) >= 3, "the main thread stopped lowering while the client was served"
    gaps = [later - earlier for earlier, later in itertools.pairwise(lowered)]
    typical = sorted(gaps)[len(gaps) // 2]
    assert max(gaps) < typical * 3 + 1.0, f"a lowering was held up: gaps {gaps}"
    assert report["longest_tick_gap_s"] < 1.0
    # Lowering alone grows the target by up to about 420 MiB on a loaded machine; decoding the frame added 1.2 GiB.
    assert report["peak_rss_kib"] - report["ready_rss_kib"] < 700 * 1024, "the frame was decoded"
    assert report["refused_clients"] == 1
    (reason,) = report["refusals"]
    assert reason.startswith(f"client pid {os.getpid()}: ")
    assert "sent a frame beyond a client's limits (frame length 16000083 exceeds the 65536 byte limit" in reason
    assert "\n" not in reason
    assert f"iket_tui.agent: refused {reason}" in stderr.splitlines()
