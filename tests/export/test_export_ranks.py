"""A real recording of several processes: ``iket-tui run --ranks`` following a TileLang program
whose two workers (ranks 0 and 1) each lower kernels, exported in every format and read back:
each worker's compiles under its own process, named and ordered by rank, with exactly the
passes its agent reported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from perfetto_reader import decode

from iket_tui.cli import main
from iket_tui.export import recording_session
from iket_tui.model.nodes import ProcessNode
from iket_tui.protocol import messages as m
from iket_tui.sources.reading import read_recording

pytestmark = pytest.mark.tilelang

TARGET = Path(__file__).parent / "targets" / "ranks.py"


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ranks") / "ranks.msgpack"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "iket_tui",
            "run",
            "--no-ui",
            "--ranks",
            "--record",
            str(out),
            "--",
            sys.executable,
            str(TARGET),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return out


def _workers(path: Path) -> list[ProcessNode]:
    """The ranked processes of the recording, by rank, as the model reads them."""
    msgs, info = read_recording(path)
    assert info.ended
    assert {msg["rank"] for msg in msgs if msg["type"] == m.HELLO and "rank" in msg} == {0, 1}
    session = recording_session(msgs)
    workers = sorted((p for p in session.tree.processes if p.rank is not None), key=lambda p: p.rank or 0)
    assert [len(p.compiles) for p in workers] == [1, 2], "rank R lowers R + 1 kernels"
    assert all(comp.status.value == "done" for p in workers for comp in p.compiles)
    return workers


def _passes(process: ProcessNode) -> int:
    return sum(len(ctx.passes) for comp in process.compiles for ctx in comp.context_order)


def _title(process: ProcessNode) -> str:
    return f"pid {process.pid} rank {process.rank}: {process.command}"


def _export(path: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> Path:
    out = path.with_name(f"ranks.{fmt}")
    assert main(["export", str(path), "--format", fmt, "-o", str(out)]) == 0
    assert "Traceback" not in capsys.readouterr().err
    return out


def test_chrome_puts_each_ranks_compiles_under_its_own_pid(recording: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workers = _workers(recording)
    doc = json.loads(_export(recording, "chrome", capsys).read_text())
    events = doc["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    order = {e["pid"]: e["args"]["sort_index"] for e in events if e["ph"] == "M" and e["name"] == "process_sort_index"}
    for worker in workers:
        (pid,) = [pid for pid, name in names.items() if name == _title(worker)]
        assert order[pid] == worker.rank
        compiles = [e for e in events if e.get("cat") == "compile" and e["pid"] == pid]
        assert [e["args"]["compile"] for e in compiles] == [comp.id for comp in worker.compiles]
        assert sum(1 for e in events if e.get("cat") == "pass" and e["pid"] == pid) == _passes(worker) > 50
    assert sum(1 for e in events if e.get("cat") == "compile") == 3


def test_speedscope_and_perfetto_name_a_profile_and_a_process_track_per_rank(
    recording: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workers = _workers(recording)
    doc = json.loads(_export(recording, "speedscope", capsys).read_text())
    assert [profile["name"] for profile in doc["profiles"]] == [
        f"{_title(worker)} ({len(worker.compiles)} compiles)" for worker in workers
    ]
    for profile, worker in zip(doc["profiles"], workers, strict=True):
        opened = sum(1 for event in profile["events"] if event["type"] == "O")
        steps = sum(len(comp.codegen_steps) for comp in worker.compiles)
        assert opened == len(worker.compiles) + _passes(worker) + steps
    trace = decode(_export(recording, "perfetto", capsys).read_bytes())
    tracks = trace.processes()
    assert [(track.pid, track.process_name) for track in tracks] == [(w.pid, _title(w)) for w in workers]
    for track, worker in zip(tracks, workers, strict=True):
        compile_tracks = trace.children(track.uuid)
        assert [t.name for t in compile_tracks] == [f"compile {comp.id}: {comp.title}" for comp in worker.compiles]
        assert sum(len(trace.slices(t)) for t in compile_tracks) == len(worker.compiles) + _passes(worker)
