"""Who answers at a socket: the process the user named, or a one-line refusal.

An impostor of the same user listens on the socket of another process (a sleeping ``sleep``)
and says hello with its own pid, or lies and names the other process. A pid given, or a socket
named after a process, must be served by that very process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_agent import FakeAgent

from iket_tui.endpoints import process_start_time, resolve_target
from iket_tui.protocol import messages as m
from iket_tui.sources.base import SourceError, SourceState
from iket_tui.sources.socket import SocketSource

TIMEOUT_S = 120.0


@pytest.fixture
def victim() -> Iterator[subprocess.Popen[bytes]]:
    """A process of this user that runs no agent."""
    process = subprocess.Popen(["sleep", "600"])
    yield process
    process.kill()
    process.wait()


def _refusal(path: Path) -> str:
    source = SocketSource(path)
    with pytest.raises(SourceError) as caught:
        source.connect()
    source.close()
    return str(caught.value)


def test_an_impostor_on_the_socket_of_a_pid_is_refused(victim: subprocess.Popen[bytes]) -> None:
    with FakeAgent("endless", as_pid=victim.pid) as impostor:
        path = resolve_target(str(victim.pid))
        assert path == impostor.path
        refusal = _refusal(path)
    assert refusal == (
        f"{path}: the agent there says it is pid {impostor.pid}, not pid {victim.pid}; refusing it"
        " (another program listens at that socket)"
    )


def test_an_impostor_that_names_the_pid_in_its_hello_is_refused(victim: subprocess.Popen[bytes]) -> None:
    with FakeAgent("endless", as_pid=victim.pid, claim_pid=victim.pid) as liar:
        refusal = _refusal(resolve_target(str(victim.pid)))
    assert refusal == (
        f"{liar.path}: the agent there is served by pid {liar.pid}, not by pid {victim.pid}; refusing it"
        " (another program listens at that socket)"
    )


def test_a_socket_given_by_a_name_that_encodes_a_process_must_be_that_process(
    victim: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    start = process_start_time(victim.pid)
    path = tmp_path / f"{victim.pid}-{start}.sock"
    with FakeAgent("endless", socket_path=path) as impostor:
        refusal = _refusal(path)
    assert refusal == (
        f"{path}: the agent there says it is pid {impostor.pid}, not pid {victim.pid}; refusing it"
        " (another program listens at that socket)"
    )


def test_a_socket_of_any_other_name_is_shown_with_the_pid_that_answers(tmp_path: Path) -> None:
    with FakeAgent("normal", socket_path=tmp_path / "forwarded.sock") as agent:
        source = SocketSource(agent.path)
        batches = list(source.batches())
    assert batches[-1].state is SourceState.ENDED
    hello = batches[0].messages[0]
    assert isinstance(hello, dict) and hello["type"] == m.HELLO and hello["pid"] == agent.pid
    assert source.description.startswith(f"pid {agent.pid}: ")
    assert source.who == f"pid {agent.pid}"


def test_recording_an_impostor_is_one_line_and_writes_nothing(victim: subprocess.Popen[bytes], tmp_path: Path) -> None:
    out = tmp_path / "never.msgpack"
    with FakeAgent("endless", as_pid=victim.pid) as impostor:
        done = subprocess.run(
            [sys.executable, "-m", "iket_tui", "record", str(victim.pid), "-o", str(out)],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            env={**os.environ},
            stdin=subprocess.DEVNULL,
        )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"iket-tui: {impostor.path}: the agent there says it is pid {impostor.pid}, not pid {victim.pid};"
        " refusing it (another program listens at that socket)"
    ]
    assert not out.exists()
