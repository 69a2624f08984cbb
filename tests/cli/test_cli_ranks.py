"""``iket-tui run --ranks`` over ``torchrun --nproc-per-node 8`` on this CPU (gloo), in a real
terminal: eight ranks each lowering the demo's GEMM, one of them slowed in a pass; the UI names
the rank and compares the pass across ranks while it is stuck, shows the ranks in rank order
under the launcher, and the recording's dump says the same afterwards."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from cli_helpers import Terminal, assert_one_line_error, run_iket

from iket_tui.model.session import Session
from iket_tui.protocol import messages as m
from iket_tui.sources.reading import read_recording

pytestmark = pytest.mark.tilelang

RANKS = Path(__file__).resolve().parents[1] / "e2e" / "targets" / "ranks.py"
SLOWED = "tl.InjectSoftwarePipeline"


def torchrun() -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "8", str(RANKS)]


def test_run_ranks_over_torchrun_names_the_rank_behind_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch.distributed")
    monkeypatch.setenv("IKET_TEST_SLOW_RANK", "3")
    monkeypatch.setenv("IKET_TEST_SLOW", "12")
    out = tmp_path / "ranks.msgpack"
    terminal = Terminal(
        "run", "--ranks", "--stuck-after", "1", "--record", str(out), "--", *torchrun(), columns=160, rows=50
    )
    terminal.wait_for(f"rank 3 has been in `{SLOWED}`".encode(), timeout=240)
    terminal.wait_for(b"9 processes (8 ranks): 9 ended", timeout=240)
    terminal.wait_for(b"disconnected", timeout=60)  # the merged stream ends once torchrun exited
    terminal.press(b"q")
    assert terminal.wait_exit() == 0

    msgs, info = read_recording(out)
    assert info.ended
    session = Session(by_rank=True)
    session.apply(msgs)
    tree = session.tree
    (launcher,) = [process for process in tree.processes if process.parent is None]
    assert launcher.rank is None and not launcher.compiles
    assert sorted(child.rank or 0 for child in launcher.children) == list(range(8))
    assert all(len(child.compiles) == 1 and child.compiles[0].status.value == "done" for child in launcher.children)
    slowed = next(child for child in launcher.children if child.rank == 3)
    assert slowed.compiles[0].duration_ns is not None and slowed.compiles[0].duration_ns > 12e9

    dump = run_iket("dump", str(out))
    assert dump.returncode == 0
    (behind,) = [line for line in dump.stdout.splitlines() if " pass_behind " in line]
    assert re.search(rf"rank 3 was in `{SLOWED}` 1[2-9]\.\d+ s; the other ranks finished it in", behind), behind
    assert sum(1 for msg in msgs if msg["type"] == m.HELLO and type(msg.get("rank")) is int) == 8


def test_ranks_cannot_go_with_no_follow() -> None:
    assert_one_line_error(run_iket("run", "--ranks", "--no-follow", "--", "true"), "--ranks", "--no-follow")
    assert os.environ.get("IKET_TUI") in (None, "")
