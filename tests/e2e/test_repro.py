"""Reproducers from a real recording: the bundled program's compile that fails in
tl.LayoutInference is recorded under the agent, ``iket-tui repro`` writes a directory, and in a
fresh process without the program ``repro.py`` raises the same error from the same pass. A
codegen failure and a pass of the user's own are said to be out of reach, in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("tilelang")

from iket_tui.protocol import messages as m
from iket_tui.repro import ReproError, write
from iket_tui.sources.reading import read_recording

WAIT_S = 300.0


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("repro") / "failures.msgpack"
    program = [sys.executable, "-m", "iket_tui.demo.program", "--kernels", "layout_conflict,nvcc_error", "--pause", "0"]
    done = _iket("run", "--no-ui", "--record", str(path), "--", *program)
    assert done.returncode == 0, done.stderr
    yield path


def _iket(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "IKET_TUI": ""}
    return subprocess.run(
        [sys.executable, "-m", "iket_tui", *args], capture_output=True, text=True, timeout=WAIT_S, env=env, cwd=cwd
    )


def test_the_reproducer_raises_the_recorded_error_in_a_fresh_process(recording: Path, tmp_path: Path) -> None:
    messages, _ = read_recording(recording)
    (failure,) = [msg for msg in messages if msg["type"] == m.COMPILE_FAILURE]
    end = next(msg for msg in messages if msg["type"] == m.COMPILE_END and msg["compile"] == failure["compile"])
    assert failure["name"] == "tl.LayoutInference" and failure["ir_json"] and failure["ir_script"]

    out = tmp_path / "repro"
    written = _iket("repro", str(recording), "-o", str(out))
    assert written.returncode == 0, written.stderr
    assert written.stderr.startswith(
        f"iket-tui: wrote a reproducer of compile {failure['compile']} (tl.LayoutInference)"
    )
    assert sorted(path.name for path in out.iterdir()) == ["before.py", "config.json", "module.json", "repro.py"]
    assert (out / "before.py").read_text() == failure["ir_script"]

    env = {key: value for key, value in os.environ.items() if not key.startswith("IKET_TUI")}
    ran = subprocess.run([sys.executable, "repro.py"], capture_output=True, text=True, timeout=WAIT_S, cwd=out, env=env)
    assert ran.returncode != 0
    first_line = end["error"].split(": ", 1)[1].splitlines()[0]
    assert f"{end['error_type']}: {first_line}" in ran.stderr.splitlines()


def test_a_codegen_failure_is_said_to_be_out_of_reach(recording: Path, tmp_path: Path) -> None:
    messages, _ = read_recording(recording)
    codegen = next(msg for msg in messages if msg["type"] == m.COMPILE_END and msg.get("stage") == "codegen")
    done = _iket("repro", str(recording), "--compile", str(codegen["compile"]), "-o", str(tmp_path / "x"))
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1
    assert "failed in codegen" in done.stderr and "only failed passes are reproduced" in done.stderr


def test_a_pass_of_the_users_own_is_written_but_not_runnable(recording: Path, tmp_path: Path) -> None:
    messages, _ = read_recording(recording)
    renamed = [
        {**msg, "name": "my_project.FuseEverything"} if msg["type"] == m.COMPILE_FAILURE else msg for msg in messages
    ]
    found = write(renamed, tmp_path / "own")
    assert not found.runnable
    assert "my_project.FuseEverything is not one of TileLang's or TVM's passes" in found.note
    assert (tmp_path / "own" / "module.json").is_file()


def test_recordings_without_a_failure_or_unreadable_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(ReproError, match="no compile failed in this recording"):
        write([{"type": m.COMPILE_END, "compile": 1, "ok": True}], tmp_path / "none")
    garbage = tmp_path / "garbage.msgpack"
    garbage.write_bytes(b"not a recording at all")
    done = _iket("repro", str(garbage), "-o", str(tmp_path / "y"))
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr


def test_the_failed_compile_says_what_was_captured(recording: Path) -> None:
    from iket_tui.model.pass_tree import PassTree
    from iket_tui.ui.details import describe

    messages, _ = read_recording(recording)
    tree = PassTree()
    tree.apply(messages)
    failed = next(comp for comp in tree.compiles if comp.kernel == "layout_conflict")
    fields = dict(describe(tree, failed, tree.last_t_ns).fields)
    assert fields["captured"].startswith("the IR given to tl.LayoutInference (")
    assert fields["captured"].endswith(f"iket-tui repro RECORDING --compile {failed.id} -o DIR")
