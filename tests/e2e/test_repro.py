"""Reproducers from a real recording: the bundled program's compiles that fail in
tl.LayoutInference and in nvcc are recorded under the agent, ``iket-tui repro`` writes a
directory, and in a fresh process without the program ``repro.py`` raises the same error: from
the same pass, or from nvcc on the same source. A pass of the user's own is written but said to
be out of reach."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("tilelang")

from iket_tui.demo.kernels import MISSING_DEVICE_FUNCTION
from iket_tui.protocol import messages as m
from iket_tui.repro import ReproError, write
from iket_tui.sources.reading import read_recording

WAIT_S = 300.0
NVCC_ERROR = re.compile(r"^(?:\S*/)?(\S+\.cu\(\d+\): error: .*)$", re.MULTILINE)
"""nvcc's first error, without the temporary directory it compiled in."""


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


def _fresh_python(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python script`` in ``cwd``, in an environment without the agent."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("IKET_TUI")}
    return subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=WAIT_S, cwd=cwd, env=env)


def _failure(messages: list[m.Message], stage: str) -> tuple[m.Message, m.Message]:
    """The one ``compile_failure`` of ``stage`` in a recording, and its compile's end."""
    (failure,) = [msg for msg in messages if msg["type"] == m.COMPILE_FAILURE and msg.get("stage") == stage]
    end = next(msg for msg in messages if msg["type"] == m.COMPILE_END and msg["compile"] == failure["compile"])
    return failure, end


def _first_nvcc_error(text: str) -> str:
    found = NVCC_ERROR.search(text)
    assert found is not None, text[-2000:]
    return found.group(1)


def test_the_reproducer_raises_the_recorded_error_in_a_fresh_process(recording: Path, tmp_path: Path) -> None:
    messages, _ = read_recording(recording)
    failure, _ = _failure(messages, "pass")
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

    ran = _fresh_python("repro.py", out)
    assert ran.returncode != 0
    first_line = end["error"].split(": ", 1)[1].splitlines()[0]
    assert f"{end['error_type']}: {first_line}" in ran.stderr.splitlines()


def test_a_codegen_failure_is_reproduced_by_nvcc_in_a_fresh_process(recording: Path, tmp_path: Path) -> None:
    messages, _ = read_recording(recording)
    failure, end = _failure(messages, "codegen")
    assert (end["stage"], end["error_type"], failure["name"]) == (
        "codegen",
        "RuntimeError",
        "target.build.tilelang_cuda",
    )
    recorded = _first_nvcc_error(failure["compiler_output"])
    assert recorded.endswith(f'error: identifier "{MISSING_DEVICE_FUNCTION}" is undefined')

    out = tmp_path / "repro"
    written = _iket("repro", str(recording), "--compile", str(failure["compile"]), "-o", str(out))
    assert written.returncode == 0, written.stderr
    assert written.stderr.startswith(
        f"iket-tui: wrote a reproducer of compile {failure['compile']} (target.build.tilelang_cuda) to {out}: "
        f"python {out / 'repro.py'} runs nvcc on kernel.cu"
    )
    assert sorted(path.name for path in out.iterdir()) == ["kernel.cu", "repro.py"]
    assert (out / "kernel.cu").read_text() == failure["source"]
    assert MISSING_DEVICE_FUNCTION in failure["source"]

    ran = _fresh_python("repro.py", out)
    assert ran.returncode != 0
    first_line = end["error"].split(": ", 1)[1].splitlines()[0]
    assert first_line == "Compilation error:"
    assert f"{end['error_type']}: {first_line}" in ran.stderr.splitlines()
    assert _first_nvcc_error(ran.stderr) == recorded
    assert failure["source"] not in ran.stderr, "the echoed source is left out of the error"


def test_a_codegen_reproducer_compiles_against_this_tilelangs_headers(recording: Path, tmp_path: Path) -> None:
    """A recording made with TileLang installed elsewhere: its include directories are replaced
    by this install's, and one that is not TileLang's and does not exist here is reported."""
    messages, _ = read_recording(recording)
    failure, _ = _failure(messages, "codegen")
    here = failure["tilelang_paths"]["TILELANG_TEMPLATE_PATH"]
    elsewhere = "/opt/elsewhere/tilelang/src"
    moved = {
        **failure,
        "nvcc_options": [
            *(f"-I{elsewhere}" if option == f"-I{here}" else option for option in failure["nvcc_options"]),
            "-I",
            "/opt/gone/include",
        ],
        "tilelang_paths": {**failure["tilelang_paths"], "TILELANG_TEMPLATE_PATH": elsewhere},
    }
    assert f"-I{elsewhere}" in moved["nvcc_options"]
    found = write([moved if msg is failure else msg for msg in messages], tmp_path / "moved", failure["compile"])
    assert found.runnable

    ran = _fresh_python("repro.py", found.directory)
    assert ran.returncode != 0
    assert "repro: the include directory /opt/gone/include does not exist here" in ran.stderr.splitlines()
    assert elsewhere not in ran.stderr
    assert _first_nvcc_error(ran.stderr) == _first_nvcc_error(failure["compiler_output"])


def test_a_codegen_failure_without_its_source_says_why_in_one_line(recording: Path, tmp_path: Path) -> None:
    messages, _ = read_recording(recording)
    failure, _ = _failure(messages, "codegen")
    missing = {**failure, "source": None, "source_missing": "the codegen step failed without a failing nvcc run"}
    with pytest.raises(ReproError) as raised:
        write([missing if msg is failure else msg for msg in messages], tmp_path / "none", failure["compile"])
    assert str(raised.value) == (
        f"compile {failure['compile']} failed in codegen (target.build.tilelang_cuda) without the source nvcc was "
        "given: the codegen step failed without a failing nvcc run"
    )
    assert not (tmp_path / "none").exists()

    uncaptured = [msg for msg in messages if msg is not failure]
    with pytest.raises(ReproError) as raised:
        write(uncaptured, tmp_path / "old", failure["compile"])
    assert str(raised.value) == (
        f"compile {failure['compile']} failed in codegen (RuntimeError), and the recording holds no capture of it "
        "(recorded before iket-tui captured codegen failures); iket-tui dump shows the compiler's error"
    )


def test_a_pass_of_the_users_own_is_written_but_not_runnable(recording: Path, tmp_path: Path) -> None:
    messages, _ = read_recording(recording)
    failure, _ = _failure(messages, "pass")
    renamed = [{**msg, "name": "my_project.FuseEverything"} if msg is failure else msg for msg in messages]
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


def test_the_failed_compile_says_what_was_captured(recording: Path, tmp_path: Path) -> None:
    from iket_tui.model.session import Session
    from iket_tui.ui.details import describe

    messages, _ = read_recording(recording)
    session = Session()
    tree = session.tree
    session.apply(messages)
    failed = next(comp for comp in tree.compiles if comp.kernel == "layout_conflict")
    assert failed.failing is not None
    for node in (failed, failed.failing):
        fields = dict(describe(session, node, session.last_t_ns, recording).fields)
        assert fields["captured"].startswith("the IR given to tl.LayoutInference (")
        assert fields["captured"].endswith(f"iket-tui repro {recording} --compile {failed.id} -o DIR")
        # live, with nothing recorded, no command that could not work: how to get a recording
        live = dict(describe(session, node, session.last_t_ns).fields)["captured"]
        assert live.endswith(
            ": no recording to make a reproducer from (watch with --record FILE, then iket-tui repro FILE -o DIR)"
        )
    # the command the pane names works as it is written
    command = shlex.split(fields["captured"].rsplit(": ", 1)[1])
    assert command[:2] == ["iket-tui", "repro"] and command[-1] == "DIR"
    written = _iket(*command[1:-1], str(tmp_path / "from-the-pane"))
    assert written.returncode == 0, written.stderr
    assert (tmp_path / "from-the-pane" / "repro.py").is_file()

    rejected = next(comp for comp in tree.compiles if comp.kernel == "nvcc_error")
    assert rejected.failed_codegen is not None and rejected.failure is not None
    lines = len(rejected.failure["source"].splitlines())
    said = _first_nvcc_error(rejected.failure["compiler_output"])
    for node in (rejected, rejected.failed_codegen):
        fields = dict(describe(session, node, session.last_t_ns, recording).fields)
        assert fields["captured"] == (
            f"the CUDA source nvcc rejected ({lines:,} lines), nvcc's options and output: "
            f"iket-tui repro {recording} --compile {rejected.id} -o DIR"
        )
        assert fields["nvcc said"] == said


def test_a_compile_that_did_not_fail_is_told_with_those_that_did(tmp_path: Path) -> None:
    demo = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"
    for compile_id, said in (("1", "compile 1 did not fail"), ("99", "no compile 99")):
        done = _iket("repro", str(demo), "--compile", compile_id, "-o", str(tmp_path / compile_id))
        assert done.returncode == 2
        assert done.stderr == f"iket-tui: {demo}: {said} in this recording (failed: 5, 6)\n"
        assert not (tmp_path / compile_id).exists()
