"""Reproducers of plain TVM failures from a real recording: the demo program's compile that fails
in TVM's own ``s_tir.InjectSoftwarePipeline`` and the one that fails in a pass of its own are
recorded under the agent; ``iket-tui repro`` writes a script that imports Apache TVM, not
TileLang, and in a fresh process raises the same error from the same pass on the module it was
given, from TVM's JSON of it or, without that, from its TVMScript."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from iket_tui.protocol import messages as m
from iket_tui.sources.reading import read_recording

pytestmark = pytest.mark.tvm

WAIT_S = 300.0
PASS = "s_tir.InjectSoftwarePipeline"


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("repro") / "failures.msgpack"
    program = [sys.executable, "-m", "iket_tui.demo.tvm_program", "--kernels", "bad_pipeline,rejected_mlp"]
    done = _iket("run", "--no-ui", "--record", str(path), "--", *program, "--pause", "0")
    assert done.returncode == 0, done.stderr
    yield path


def _iket(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "IKET_TUI": ""}
    return subprocess.run(
        [sys.executable, "-m", "iket_tui", *args], capture_output=True, text=True, timeout=WAIT_S, env=env
    )


def _fresh_python(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("IKET_TUI")}
    return subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=WAIT_S, cwd=cwd, env=env)


def _failed(recording: Path, pass_name: str) -> tuple[m.Message, m.Message]:
    messages, _ = read_recording(recording)
    (failure,) = [msg for msg in messages if msg["type"] == m.COMPILE_FAILURE and msg["name"] == pass_name]
    end = next(msg for msg in messages if msg["type"] == m.COMPILE_END and msg["compile"] == failure["compile"])
    return failure, end


def test_the_reproducer_raises_the_recorded_error_with_plain_tvm(recording: Path, tmp_path: Path) -> None:
    failure, end = _failed(recording, PASS)
    out = tmp_path / "repro"
    written = _iket("repro", str(recording), "-o", str(out))
    assert written.returncode == 0, written.stderr
    assert written.stderr.startswith(
        f"iket-tui: wrote a reproducer of compile {failure['compile']} ({PASS}) to {out}: "
        f"python {out / 'repro.py'} runs {PASS} on the module it was given"
    )
    assert sorted(path.name for path in out.iterdir()) == ["before.py", "config.json", "module.json", "repro.py"]
    script = (out / "repro.py").read_text()
    assert '"""Reproduces a failed Apache TVM compile recorded by iket-tui' in script
    assert "\nimport tvm\n" in script and "tilelang" not in script.replace("not TileLang's TVM", "")

    ran = _fresh_python("repro.py", out)
    assert ran.returncode != 0
    assert end["error"] == "ValueError: Check failed: (pipeline_body_seq) is false: " + (
        "The body of the software pipeline should be SeqStmt, got tirx.For"
    )
    assert end["error"] in ran.stderr.splitlines()
    assert "tvm::s_tir::software_pipeline::PipelineInjector" in ran.stderr, "raised by the same pass"


def test_without_tvms_json_the_reproducer_reads_the_module_from_its_tvmscript(recording: Path, tmp_path: Path) -> None:
    out = tmp_path / "repro"
    assert _iket("repro", str(recording), "-o", str(out)).returncode == 0
    (out / "module.json").unlink()
    ran = _fresh_python("repro.py", out)
    assert ran.returncode != 0
    _failure, end = _failed(recording, PASS)
    assert end["error"] in ran.stderr.splitlines()


def test_a_pass_of_the_programs_own_is_written_but_said_to_be_out_of_reach(recording: Path, tmp_path: Path) -> None:
    failure, _end = _failed(recording, "demo.RejectRelu")
    out = tmp_path / "own"
    written = _iket("repro", str(recording), "--compile", str(failure["compile"]), "-o", str(out))
    assert written.returncode == 2, written.stderr
    assert written.stderr.endswith(
        "demo.RejectRelu is not one of Apache TVM's passes: repro.py cannot rebuild it; "
        "module.json and before.py hold its input\n"
    )
    assert "R.nn.relu" in (out / "before.py").read_text()
    ran = _fresh_python("repro.py", out)
    assert ran.returncode == 1
    assert ran.stderr.strip() == "repro: demo.RejectRelu is not one of Apache TVM's passes; module.json holds its input"


CONTEXT_PROGRAM = """\
import tvm
from iket_tui.demo import tvm_program as demo

context = tvm.transform.PassContext(
    opt_level=2, disabled_pass=["tirx.UnrollLoop"], config={"tirx.disable_vectorize": True}
)
with context:
    try:
        demo.COMPILES["bad_pipeline"].compile(0)
    except Exception as error:
        print("failed:", type(error).__name__)
"""


def test_the_reproducer_makes_the_pass_context_the_failure_ran_in(tmp_path: Path) -> None:
    """The failure capture holds the pass context's opt_level, required and disabled passes
    besides its configuration, and the reproducer makes the same context."""
    program = tmp_path / "in_context.py"
    program.write_text(CONTEXT_PROGRAM)
    recording = tmp_path / "context.msgpack"
    done = _iket("run", "--no-ui", "--record", str(recording), "--", sys.executable, str(program))
    assert done.returncode == 0, done.stderr
    failure, end = _failed(recording, PASS)
    assert (failure["opt_level"], failure["required_pass"], failure["disabled_pass"]) == (2, [], ["tirx.UnrollLoop"])
    assert "tirx.disable_vectorize" in failure["config_json"]
    out = tmp_path / "repro"
    assert _iket("repro", str(recording), "-o", str(out)).returncode == 0
    assert "\nCONTEXT = {'opt_level': 2, 'disabled_pass': ['tirx.UnrollLoop']}\n" in (out / "repro.py").read_text()
    ran = _fresh_python("repro.py", out)
    assert end["error"] in ran.stderr.splitlines()
