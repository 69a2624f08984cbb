"""The agent in a program that never uses TileLang: its socket, its goodbye, its failures, its peers.

The target (``targets/plain.py``) prints two lines after a gate file appears and exits with
code 3; with the agent running, it must do exactly that and nothing else.
"""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

from agent_wire import WireClient, events, socket_of, spawn_target

from iket_tui import endpoints
from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import encode_message
from iket_tui.protocol.frames import FrameDecoder

PLAIN_OUTPUT = "plain started\ntilelang imported: False\nwait knob inherited: False\n"


def test_program_without_tilelang_runs_unaffected_and_gets_a_goodbye(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    proc = spawn_target("plain.py", env={"IKET_TEST_GATE": str(gate), "IKET_TUI_WAIT_CLIENT": "120"})
    path = socket_of(proc)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [e.pid for e in endpoints.list_endpoints()] == [proc.pid]
    client = WireClient(path)
    assert client.agent_hello["pid"] == proc.pid
    assert client.agent_hello["caps"] == [m.CAP_PASSES, "resume"]
    assert client.agent_hello["argv"][-1].endswith("plain.py")
    catch_up, sync = client.catch_up()
    assert (catch_up, sync["backlog"], sync["backlog_lost"]) == ([], 0, 0)
    gate.touch()
    received = client.read_to_end()
    stdout, stderr = proc.communicate(timeout=60)

    assert (proc.returncode, stdout, stderr) == (3, PLAIN_OUTPUT, "")
    assert events(received) == []
    assert received[-1]["type"] == m.BYE
    assert (received[-1]["reason"], received[-1]["produced"], received[-1]["dropped"]) == ("exit", 0, 0)
    assert not path.exists()


def test_killed_target_ends_the_stream_and_its_socket_is_cleaned_up(tmp_path: Path) -> None:
    proc = spawn_target("plain.py", env={"IKET_TEST_GATE": str(tmp_path / "never")})
    path = socket_of(proc)
    client = WireClient(path)
    client.catch_up()
    proc.kill()
    proc.wait()
    received = client.read_to_end()
    assert client.eof
    assert m.BYE not in {msg["type"] for msg in received}
    assert path.exists(), "a killed agent cannot remove its socket"
    assert proc.pid not in [e.pid for e in endpoints.list_endpoints()]
    assert not path.exists()


def test_foreign_peers_are_hung_up_on_and_the_target_carries_on(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    proc = spawn_target("plain.py", env={"IKET_TEST_GATE": str(gate)})
    path = socket_of(proc)

    garbage = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    garbage.connect(str(path))
    garbage.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + os.urandom(512))
    assert _hung_up(garbage)

    impostor = WireClient(path, hello=False)
    impostor.next()
    agent_hello = m.hello(role="agent", pid=os.getpid(), start_time=0, software_version="x", capabilities=[])
    impostor.sock.sendall(encode_message(agent_hello))
    assert _hung_up(impostor.sock)

    newer = WireClient(path, hello=False)
    newer.next()
    future = {**m.hello(role="client", pid=os.getpid(), start_time=0, software_version="x", capabilities=[])}
    future["proto"] = [m.PROTOCOL_VERSION[0] + 1, 0]
    newer.sock.sendall(encode_message(future))
    assert _hung_up(newer.sock)

    client = WireClient(path)
    _, sync = client.catch_up()
    assert sync["type"] == m.SYNC
    gate.touch()
    assert client.read_to_end()[-1]["type"] == m.BYE
    stdout, stderr = proc.communicate(timeout=60)
    assert (proc.returncode, stdout, stderr) == (3, PLAIN_OUTPUT, "")


def test_bad_knobs_are_one_line_each_and_the_program_runs(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    gate.touch()
    env = {"IKET_TEST_GATE": str(gate), "IKET_TUI_BACKLOG": "lots", "IKET_TUI_QUEUE": "-5"}
    proc = spawn_target("plain.py", env=env)
    stdout, stderr = proc.communicate(timeout=60)
    assert (proc.returncode, stdout) == (3, PLAIN_OUTPUT)
    assert stderr.splitlines() == [
        "iket-tui agent: IKET_TUI_BACKLOG must be a positive whole number, got 'lots'; using the default",
        "iket-tui agent: IKET_TUI_QUEUE must be a positive whole number, got '-5'; using the default",
    ]


def test_no_client_within_the_wait_is_one_line_and_the_program_runs(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    gate.touch()
    proc = spawn_target("plain.py", env={"IKET_TEST_GATE": str(gate), "IKET_TUI_WAIT_CLIENT": "0.2"})
    stdout, stderr = proc.communicate(timeout=60)
    assert (proc.returncode, stdout) == (3, PLAIN_OUTPUT)
    assert stderr.splitlines() == ["iket-tui agent: no client attached within 0.2 s; running on"]


def test_unusable_runtime_directory_is_one_line_and_the_program_runs(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    gate.touch()
    (tmp_path / "iket-tui").write_text("not a directory")
    proc = spawn_target("plain.py", env={"IKET_TEST_GATE": str(gate), "XDG_RUNTIME_DIR": str(tmp_path)})
    stdout, stderr = proc.communicate(timeout=60)
    assert (proc.returncode, stdout) == (3, PLAIN_OUTPUT)
    lines = stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("iket-tui agent: not started: ")


WITHOUT_TILELANG = """
import importlib.abc, sys

class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.partition(".")[0] == "tilelang":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NotInstalled())
import iket_tui.agent
agent = iket_tui.agent.start()
try:
    import tilelang
except ModuleNotFoundError as exc:
    print(f"import failed: {exc}")
print(f"watching TileLang: {agent.watching_tilelang}")
"""


def test_where_tilelang_is_missing_the_agent_runs_and_the_import_fails_as_usual() -> None:
    proc = spawn_target(WITHOUT_TILELANG, agent=False)
    stdout, stderr = proc.communicate(timeout=60)
    assert (proc.returncode, stdout, stderr) == (
        0,
        "import failed: No module named 'tilelang'\nwatching TileLang: False\n",
        "",
    )


def _hung_up(sock: socket.socket) -> bool:
    """Whether the agent closes this connection (after whatever it sent first)."""
    sock.settimeout(30)
    frames = FrameDecoder()
    try:
        while data := sock.recv(4096):
            frames.feed(data)
    except ConnectionResetError:
        pass
    sock.close()
    return len(list(frames)) <= 1
