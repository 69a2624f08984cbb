"""``iket-tui ls``: the live agents of this user, and never a dead one."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import TIMEOUT_S, FakeAgent, run_iket


def test_ls_lists_a_live_agent_and_not_a_dead_one() -> None:
    with FakeAgent("endless") as live, FakeAgent("endless") as dead:
        assert dead.process is not None
        dead.process.kill()
        dead.process.wait(TIMEOUT_S)
        assert dead.path.exists()
        result = run_iket("ls")
        assert result.returncode == 0 and result.stderr == ""
        header, *rows = result.stdout.splitlines()
        assert header.split() == ["PID", "UPTIME", "SOCKET", "COMMAND"]
        assert len(rows) == 1
        assert rows[0].split()[0] == str(live.pid)
        assert rows[0].split()[2] == str(live.path)
        assert rows[0].endswith("fake_agent.py endless --exit-code 0")
        assert not dead.path.exists()


def test_ls_without_agents_says_so(runtime_dir: Path) -> None:
    result = run_iket("ls")
    assert result.returncode == 0
    assert result.stdout.startswith("no live iket-tui agents of this user")
