"""A plain TVM program under the agent, watched by a real client: what the tree shows, and the
socket to ask it for more (the fixtures of the TVM tests use it)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from iket_tui import endpoints
from iket_tui.model.nodes import CompileNode, PassNode
from iket_tui.model.session import Session
from iket_tui.protocol import messages as m
from iket_tui.sources.socket import SocketSource

TARGETS = Path(__file__).parent / "targets"
WAIT_S = 120.0


@dataclass
class Watched:
    """A target that compiled under the agent and waits, alive, until :meth:`release`."""

    program: subprocess.Popen[str]
    path: Path
    gate: Path
    session: Session
    messages: list[m.Message] = field(default_factory=list)

    def compile_named(self, kernel: str, index: int = 0) -> CompileNode:
        found = [comp for comp in self.session.tree.compiles if comp.kernel == kernel]
        assert len(found) > index, f"no compile {index} of {kernel}: {[c.title for c in self.session.tree.compiles]}"
        return found[index]

    def release(self) -> str:
        """Let the target exit; its stdout."""
        self.gate.touch()
        out, _ = self.program.communicate(timeout=WAIT_S)
        return out

    def kill(self) -> None:
        self.gate.touch()
        if self.program.poll() is None:
            self.program.kill()
        self.program.communicate()


def passes_of(comp: CompileNode) -> list[PassNode]:
    """The compile's passes in tree order."""
    found: list[PassNode] = []

    def walk(nodes: list[PassNode]) -> None:
        for node in nodes:
            found.append(node)
            walk(node.children)

    for context in comp.context_order:
        walk(context.roots)
    return found


def path_of(node: PassNode) -> list[str]:
    """The pass's name after those of the passes it runs inside, outermost first."""
    names = []
    walk: PassNode | None = node
    while walk is not None:
        names.append(walk.name)
        walk = walk.parent
    return names[::-1]


def agent_env(**extra: str) -> dict[str, str]:
    """The environment of a target under the agent, waiting for the test's client."""
    return {**os.environ, "IKET_TUI": "1", "IKET_TUI_WAIT_CLIENT": str(WAIT_S), **extra}


def start(script: str, *args: str, gate: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Run ``targets/<script>`` with ``args``; it waits for ``gate`` before it exits."""
    return subprocess.Popen(
        [sys.executable, str(TARGETS / script), *args],
        env={**(env if env is not None else agent_env()), "IKET_TEST_GATE": str(gate)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def socket_of(program: subprocess.Popen[str]) -> Path:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        started = endpoints.process_start_time(program.pid)
        if started is not None:
            path = endpoints.socket_path_for(program.pid, started)
            if path.exists():
                return path
        if program.poll() is not None:
            raise AssertionError(f"the target exited with {program.returncode} before serving: {program.stderr.read()}")  # type: ignore[union-attr]
        time.sleep(0.02)
    raise AssertionError(f"no agent socket for pid {program.pid}")


def watch(script: str, *args: str, compiles: int, gate: Path, env: dict[str, str] | None = None) -> Watched:
    """Start ``script`` under the agent and read its stream, as the UI does, until ``compiles``
    compiles ended; the target then waits for the gate, for requests."""
    program = start(script, *args, gate=gate, env=env)
    try:
        path = socket_of(program)
        source = SocketSource(path)
        source.connect()
        session = Session()
        messages: list[m.Message] = []
        ended = 0
        deadline = time.monotonic() + WAIT_S
        for batch in source.batches():
            session.apply(batch.messages)
            for item in batch.messages:
                msg = m.message_of(item) if isinstance(item, list) else item
                messages.append(msg)
                ended += msg["type"] == m.COMPILE_END
            if ended >= compiles or batch.error or time.monotonic() > deadline:
                break
        source.close_and_wait("seen")
        assert ended >= compiles, f"{ended} of {compiles} compiles ended; stderr: {program.stderr}"
        return Watched(program, path, gate, session, messages)
    except BaseException:
        gate.touch()
        program.kill()
        program.communicate()
        raise
