"""``attach``'s app, still running while the target stops its agent and starts it again: it takes
the stream up again, every event once, and says so."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from iket_tui.sources.base import SourceState
from iket_tui.sources.socket import SocketSource
from iket_tui.ui.app import IketApp

TARGET = Path(__file__).resolve().parents[1] / "sources" / "restarting_target.py"
WAIT_S = 120.0


@pytest.fixture
def runtime_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ik"))  # short: socket paths are limited to 107 bytes
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(path))
    monkeypatch.delenv("IKET_TUI", raising=False)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_the_app_follows_an_agent_stopped_and_started_again(runtime_dir: Path, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    env = {**os.environ, "IKET_TEST_GATE": str(gate)}
    proc = subprocess.Popen([sys.executable, str(TARGET)], env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    path = Path(proc.stdout.readline().strip())

    async def scenario() -> None:
        app = IketApp(SocketSource(path))
        async with app.run_test(size=(160, 48)) as pilot:
            await _until(pilot, lambda: app.session.counters.events == 100)
            gate.touch()  # the target stops its agent, and starts it again
            await _until(pilot, lambda: app.session.counters.events == 250)
            assert app.source_state is SourceState.LIVE
            assert any(note.startswith(f"reconnected to pid {proc.pid} after ") for note in app.notes)
            assert app.session.process.pid == proc.pid
            gate.with_name("gate.exit").touch()
            await _until(pilot, lambda: app.source_state is SourceState.ENDED)
            assert app.session.counters.events == 250
            assert app.session.counters.backlog_lost == 0

    try:
        asyncio.run(scenario())
        assert proc.wait(WAIT_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


async def _until(pilot: Any, condition: Any) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await pilot.pause(0.05)
