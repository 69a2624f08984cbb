"""A failure in a pass that ``--passes`` left out, in a real plain TVM run: the demo program's
two failing compiles (``bad_pipeline`` fails in ``s_tir.InjectSoftwarePipeline``; the MLP in
``demo.RejectRelu``, inside ``demo.pipeline``) recorded by ``iket-tui run --no-ui``, once with
every pass and once keeping only ``tirx.*`` and ``demo.pipeline``. Filtered, the failing passes
are left out: no kept pass is blamed (``demo.pipeline`` is left incomplete) and the compile's
detail pane names the pass the unfiltered run shows failed, from the agent's ``compile_failure``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from iket_tui.model.nodes import FAILED, INCOMPLETE, CompileNode
from iket_tui.model.session import Session
from iket_tui.sources.reading import read_recording
from iket_tui.ui.details import describe

pytestmark = pytest.mark.tvm

WAIT_S = 300.0
PROGRAM = ("-m", "iket_tui.demo.tvm_program", "--kernels", "bad_pipeline,rejected_mlp", "--pause", "0")


def recorded(path: Path, *flags: str) -> Session:
    """The demo program's two failing compiles run under ``iket-tui run --no-ui`` with ``flags``,
    recorded to ``path`` and read back as the UI reads a recording."""
    env = {**os.environ, "IKET_TUI": ""}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "iket_tui",
            "run",
            "--no-ui",
            *flags,
            "--record",
            str(path),
            "--",
            sys.executable,
            *PROGRAM,
        ],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    messages, info = read_recording(path)
    assert info.ended
    session = Session()
    session.apply(messages)
    assert session.counters.malformed == 0
    return session


def by_kernel(session: Session) -> dict[str | None, CompileNode]:
    compiles = {comp.kernel: comp for comp in session.tree.compiles}
    assert set(compiles) == {"bad_pipeline", "MLP"}
    assert all(comp.status is FAILED for comp in compiles.values())
    return compiles


def test_a_failure_in_a_pass_left_out_is_named_and_no_kept_pass_is_blamed(tmp_path: Path) -> None:
    whole = by_kernel(recorded(tmp_path / "whole.msgpack"))
    blamed = {}
    for kernel, comp in whole.items():
        assert comp.failing is not None
        blamed[kernel] = (comp.failing.name, comp.failing.seq)
    assert blamed["bad_pipeline"][0] == "s_tir.InjectSoftwarePipeline"
    assert blamed["MLP"][0] == "demo.RejectRelu"

    session = recorded(tmp_path / "filtered.msgpack", "--passes", "tirx.*", "--passes", "demo.pipeline")
    assert session.counters.filtered_passes > 0
    compiles = by_kernel(session)
    kept = [node for comp in compiles.values() for ctx in comp.context_order for node in ctx.passes.values()]
    assert {node.name for node in kept} - {"demo.pipeline"} and all(
        node.name == "demo.pipeline" or node.name.startswith("tirx.") for node in kept
    )
    assert [node.name for node in kept if node.status is FAILED] == []
    [pipeline] = [node for node in kept if node.name == "demo.pipeline"]
    assert pipeline.status is INCOMPLETE and pipeline.compile is compiles["MLP"]
    for kernel, comp in compiles.items():
        assert comp.failing is None
        name, seq = blamed[kernel]
        fields = dict(describe(session, comp, session.last_t_ns).fields)
        assert fields["failed in"] == f"{name} (seq {seq}, left out by the filter)"
        assert fields["captured"].startswith(f"the IR given to {name} ")
