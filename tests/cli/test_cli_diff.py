"""``iket-tui diff``: real TileLang compiles recorded twice, one with a pass slowed, compared as a
user (or a CI job) compares them: what is named first, what is flagged, the exit code."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from iket_tui.model import synthetic
from iket_tui.protocol.codec import encode_batch
from iket_tui.sources.reading import RecordingReader
from iket_tui.sources.recorder import RecordingWriter
from tests.cli.cli_helpers import failed_compile_recording, run_iket

SLOWED_PASS = "tl.InjectSoftwarePipeline"
"""The pass the demo's ``--slow`` slows (``iket_tui.demo.kernels.SLOWED_PASS``, a module that needs
TileLang to import)."""

NOISE = ("--slower", "100", "--min-ms", "50")
"""Thresholds above what a shared, loaded machine adds to a real pass between two runs (a pass of
65 ms was seen to take 88 ms), far below the half second the slowed pass gains."""
PROGRAM = ("-m", "iket_tui.demo.program", "--kernels", "slow_gemm,vector_add", "--pause", "0", "--lower-only")


def _record(path: Path, slow_seconds: float) -> Path:
    """A real program lowering two real kernels under ``iket-tui run --no-ui --record``."""
    result = run_iket(
        "run", "--no-ui", "--record", str(path), "--", sys.executable, *PROGRAM, "--slow-seconds", str(slow_seconds)
    )
    assert result.returncode == 0, result.stderr
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("diff")
    return {
        "before": _record(tmp / "before.msgpack", 0),
        "again": _record(tmp / "again.msgpack", 0),
        "slowed": _record(tmp / "slowed.msgpack", 0.5),
    }


def _synthetic(path: Path, *lowerings: synthetic.Lowering) -> Path:
    writer = RecordingWriter(path, source="pid 4242: python kernels/demo.py")
    writer.write(synthetic.agent_hello())
    for lowering in lowerings:
        messages = lowering.messages()
        writer.write_frames(encode_batch(messages), messages)
    writer.close("target exited")
    return path


@pytest.mark.tilelang
def test_a_slowed_pass_is_named_first_and_nothing_else_is_flagged(runs: dict[str, Path]) -> None:
    result = run_iket("diff", str(runs["before"]), str(runs["slowed"]), *NOISE)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    header = next(i for i, line in enumerate(lines) if "slow_gemm" in line and "compile 1" in line)
    assert lines[header].endswith("[1 pass slower]")
    first_pass = lines[header + 3]
    assert first_pass.split()[:2] == ["!", SLOWED_PASS]
    assert [line for line in lines if line.startswith("  ! ")] == [first_pass]
    assert lines[-1] == "2 compiles matched; flagged: slower (exit 1: slower)"

    document = json.loads(run_iket("diff", str(runs["before"]), str(runs["slowed"]), *NOISE, "--format", "json").stdout)
    gemm, add = document["pairs"]
    assert (gemm["a"]["kernel"], add["a"]["kernel"]) == ("slow_gemm", "vector_add")
    assert gemm["passes"][0]["name"] == SLOWED_PASS
    assert gemm["passes"][0]["after_ns"] > 5 * gemm["passes"][0]["before_ns"]
    slower = [(p["a"]["kernel"], c["name"]) for p in document["pairs"] for c in p["passes"] if c["slower"]]
    assert slower == [("slow_gemm", SLOWED_PASS)]
    assert document["flags"] == ["slower"] and document["failing"] == ["slower"]
    assert (gemm["added"], gemm["removed"], gemm["failure"]) == ([], [], None)


@pytest.mark.tilelang
def test_two_runs_alike_flag_nothing(runs: dict[str, Path]) -> None:
    result = run_iket("diff", str(runs["before"]), str(runs["again"]), *NOISE)
    assert result.returncode == 0, result.stdout
    assert result.stdout.splitlines()[-1] == "2 compiles matched; nothing flagged"
    assert "!" not in result.stdout


@pytest.mark.tilelang
def test_thresholds_are_settable(runs: dict[str, Path]) -> None:
    """A slowdown of half a second is not flagged when only 2 s counts."""
    result = run_iket("diff", str(runs["before"]), str(runs["slowed"]), "--min-ms", "2000")
    assert result.returncode == 0, result.stdout
    assert result.stdout.splitlines()[-1] == "2 compiles matched; nothing flagged"


@pytest.mark.tilelang
def test_two_compiles_of_one_recording(runs: dict[str, Path]) -> None:
    result = run_iket("diff", str(runs["slowed"]), "--compile", "1", "--compile", "2", "--fail-on", "removed")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "process 1 compile 1 -> 2 slow_gemm" in result.stdout
    assert "  removed: " in result.stdout  # passes the GEMM runs and the elementwise add does not
    assert result.stdout.splitlines()[-1].endswith("(exit 1: removed)")


@pytest.mark.tilelang
def test_compiles_without_a_match_are_listed(runs: dict[str, Path], tmp_path: Path) -> None:
    other = failed_compile_recording(tmp_path / "other.msgpack")
    result = run_iket("diff", str(runs["before"]), str(other))
    assert result.returncode == 0, result.stdout  # unmatched is not among the default --fail-on
    lines = result.stdout.splitlines()
    at = lines.index("without a match:")
    assert lines[at + 1].startswith("  only in A: process 1 compile 1 slow_gemm [stage=lower, kernel=slow_gemm")
    assert lines[at + 2].startswith("  only in A: process 1 compile 2 vector_add")
    assert lines[at + 3] == "  only in B: process 1 compile 2 bad [stage=jit-lower, kernel=bad]"
    assert lines[-1] == "0 compiles matched; flagged: unmatched"
    gated = run_iket("diff", str(runs["before"]), str(other), "--fail-on", "unmatched", "--format", "json")
    assert gated.returncode == 1
    document = json.loads(gated.stdout)
    assert [s["kernel"] for s in document["only_b"]] == ["bad"]


def test_with_the_default_thresholds_only_the_slowed_pass_is_flagged(tmp_path: Path) -> None:
    """The same compiles, one pass of one of them four times slower: it alone is flagged."""
    before = _synthetic(
        tmp_path / "before.msgpack",
        synthetic.Lowering(compile=1, kernel="gemm", start_ns=10_000_000),
        synthetic.Lowering(compile=2, kernel="softmax", start_ns=2_000_000_000),
    )
    slowed = {"tl.LayoutInference": 4 * 26_908_000}
    after = _synthetic(
        tmp_path / "after.msgpack",
        synthetic.Lowering(compile=1, kernel="gemm", start_ns=10_000_000, slow=slowed),
        synthetic.Lowering(compile=2, kernel="softmax", start_ns=2_000_000_000),
    )
    document = json.loads(run_iket("diff", str(before), str(after), "--format", "json").stdout)
    slower = [(p["a"]["kernel"], c["name"]) for p in document["pairs"] for c in p["passes"] if c["slower"]]
    assert slower == [("gemm", "tl.LayoutInference")]
    assert document["pairs"][0]["passes"][0]["name"] == "tl.LayoutInference"
    assert document["flags"] == ["slower"]
    assert run_iket("diff", str(before), str(before)).returncode == 0


def test_a_new_failure_is_flagged_and_a_fixed_one_said(tmp_path: Path) -> None:
    ok = _synthetic(tmp_path / "ok.msgpack", synthetic.Lowering(compile=1, kernel="gemm", start_ns=10_000_000))
    failing = synthetic.Lowering(compile=1, kernel="gemm", start_ns=10_000_000, fail_in="tl.LayoutInference")
    bad = _synthetic(tmp_path / "bad.msgpack", failing)
    result = run_iket("diff", str(ok), str(bad))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "  failed (new): " in result.stdout
    assert "flagged: failed" in result.stdout.splitlines()[-1]
    back = run_iket("diff", str(bad), str(ok), "--format", "json")
    assert back.returncode == 0, back.stdout
    assert json.loads(back.stdout)["pairs"][0]["failure"] == "fixed"


@pytest.mark.parametrize(
    ("content", "said"),
    [(None, "no such file"), (b"not a recording at all" * 10, "")],
    ids=["missing", "garbage"],
)
@pytest.mark.tilelang
def test_bad_input_is_one_line_and_exit_2(
    runs: dict[str, Path], tmp_path: Path, content: bytes | None, said: str
) -> None:
    bad = tmp_path / "bad.msgpack"
    if content is not None:
        bad.write_bytes(content)
    for args in ((str(bad), str(runs["before"])), (str(runs["before"]), str(bad))):
        result = run_iket("diff", *args)
        assert result.returncode == 2, result.stdout
        (line,) = result.stderr.splitlines()
        assert line.startswith("iket-tui: ") and said in line and str(bad) in line
        assert result.stdout == ""


@pytest.mark.tilelang
def test_bad_options_are_one_line_and_exit_2(runs: dict[str, Path]) -> None:
    for args in (
        ("--fail-on", "slowest"),
        ("--compile", "1"),
        ("--slower", "-5"),
    ):
        result = run_iket("diff", str(runs["before"]), *args)
        assert result.returncode == 2, (args, result.stdout)
        assert result.stderr.strip().splitlines()[-1].startswith("iket-tui")
    result = run_iket("diff", str(runs["before"]), "--compile", "1", "--compile", "9")
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line == f"iket-tui: {runs['before']}: no compile 9 (compiles: 1, 2)"


@pytest.mark.tilelang
def test_a_cut_recording_compares_what_was_complete_and_says_where_it_was_cut(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    """The slowed recording rewritten a message a frame up to the middle of its second compile,
    then cut in its last frame."""
    messages = list(RecordingReader(runs["slowed"]))
    second = next(i for i, msg in enumerate(messages) if msg["type"] == "compile_begin" and msg["compile"] == 2)
    writer = RecordingWriter(tmp_path / "whole.msgpack", source="pid 1: python -m iket_tui.demo.program")
    for msg in messages[: second + 20]:
        writer.write(msg)
    writer.close("target exited")
    whole = (tmp_path / "whole.msgpack").read_bytes()
    cut = tmp_path / "cut.msgpack"
    cut.write_bytes(whole[:-3])
    result = run_iket("diff", str(runs["before"]), str(cut), *NOISE, "--format", "json")
    (note,) = result.stderr.splitlines()
    assert note.startswith(f"iket-tui: {cut}: recording cut at byte ")
    compared = json.loads(result.stdout)
    assert [p["a"]["kernel"] for p in compared["pairs"]] == ["slow_gemm"]
    assert compared["pairs"][0]["passes"][0]["name"] == SLOWED_PASS
    assert [s["kernel"] for s in compared["incomplete"]] == ["vector_add"]
    assert [s["kernel"] for s in compared["only_a"]] == ["vector_add"]
    assert compared["notes"][str(cut)] == [note.removeprefix(f"iket-tui: {cut}: ")]
    assert result.returncode == 1
