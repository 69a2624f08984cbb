"""``iket-tui demo --tvm``: the bundled plain Apache TVM program under the agent, recorded
without the UI; and the one line it says where TileLang makes plain TVM unavailable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HAS_TILELANG

from iket_tui.model.session import Session
from iket_tui.sources.reading import read_recording


@pytest.mark.tvm
def test_the_tvm_demo_records_its_compiles_labelled_by_what_was_compiled(tmp_path: Path) -> None:
    out = tmp_path / "tvm-demo.msgpack"
    done = subprocess.run(
        [sys.executable, "-m", "iket_tui", "demo", "--tvm", "--no-ui", "--record", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    messages, info = read_recording(out)
    assert info.ended
    session = Session()
    session.apply(messages)
    compiles = session.tree.compiles
    assert {"MLP", "vector_add"} <= {comp.kernel for comp in compiles}
    assert all("target=llvm" in comp.label for comp in compiles)
    assert any(comp.failing is not None for comp in compiles)  # the demo fails on purpose
    assert session.counters.malformed == 0


@pytest.mark.skipif(not HAS_TILELANG, reason="the refusal is for an environment with TileLang")
def test_where_tilelang_is_installed_the_tvm_demo_says_why_not_in_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "iket_tui", "demo", "--tvm"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "iket-tui: the TVM demo needs Apache TVM without TileLang: pip install 'iket-tui[tvm]' in a venv of its own"
    ]
