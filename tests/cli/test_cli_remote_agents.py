"""``attach HOST:`` lists the agents on HOST again while it watches, on a thread of its own that
ends once the merged stream stops asking (it was closed): no ssh runs on for nothing."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from iket_tui.cli import targets


def test_the_listing_thread_adds_new_agents_and_ends_once_nobody_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    listings = iter([[1, 2], [1, 2, 3]])
    calls: list[str] = []

    def remote_pids(host: str, *, timeout_s: float, batch: bool) -> list[int]:
        calls.append(host)
        assert batch  # never a prompt: the UI owns the terminal
        return next(listings, [1, 2, 3])

    monkeypatch.setattr(targets, "remote_pids", remote_pids)
    monkeypatch.setattr(targets, "REMOTE_FIND_EVERY_S", 0.02)
    agents = targets._RemoteAgents("box", [1])
    lister = next(t for t in threading.enumerate() if t.name == "iket-tui-agents-on-box")
    deadline = time.monotonic() + 10
    while Path("box:3") not in agents.paths():
        assert time.monotonic() < deadline, "the new agent was never listed"
        time.sleep(0.01)
    assert agents.paths() == [Path("box:1"), Path("box:2"), Path("box:3")]
    assert agents.target(Path("box:3")) == targets.RemoteTarget("box", 3)
    lister.join(timeout=10)  # nobody asks any more
    assert not lister.is_alive()
    assert calls and set(calls) == {"box"}
