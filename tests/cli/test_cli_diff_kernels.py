"""``iket-tui diff`` of kernel launches: two recordings written through the CPU producer and the
real drain, one with a range of one kernel made slower, and the real H200 recordings, compared as
a user (or a CI job) compares them: what is named first, what is flagged, the exit code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.cli_helpers import run_iket
from tests.cli.kernel_runs import K_STEPS, kernel_recording

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE = EXAMPLES / "h200-demo.msgpack"
WAITING = EXAMPLES / "h200-demo-waiting.msgpack"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("kernels")
    return {
        "before": kernel_recording(tmp / "before.msgpack", seed=1),
        "again": kernel_recording(tmp / "again.msgpack", seed=7),
        "slowed": kernel_recording(tmp / "slowed.msgpack", seed=2, slower={"mma": 320}),
        "fewer": kernel_recording(tmp / "fewer.msgpack", seed=1, k_steps=K_STEPS - 2),
    }


def test_a_slowed_range_is_named_first_and_nothing_else_is_flagged(runs: dict[str, Path]) -> None:
    result = run_iket("diff", str(runs["before"]), str(runs["slowed"]))
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    head = lines.index("process 1 launch 3 gemm  [range-slower]")
    assert lines[head + 1].startswith("  grid 4x2x1: ")
    assert lines[head + 2].split() == ["event", "count", "p50", "A", "p50", "B", "p99", "A", "p99", "B", "total"]
    first = lines[head + 3]
    assert first.split()[:3] == ["!", "mma", "128"] and "640 ns" in first and "960 ns" in first
    assert [line for line in lines if line.startswith("  ! ")] == [first]
    assert "process 1 launch 4 softmax" in lines
    assert lines[-1] == "2 launches matched; flagged: range-slower (exit 1: range-slower)"

    document = json.loads(run_iket("diff", str(runs["before"]), str(runs["slowed"]), "--format", "json").stdout)
    gemm, softmax = document["launches"]
    assert (gemm["a"]["kernel"], gemm["a"]["grid"], softmax["a"]["kernel"]) == ("gemm", [4, 2, 1], "softmax")
    assert gemm["events"][0]["name"] == "mma"
    assert gemm["events"][0]["after"]["p50_ns"] == gemm["events"][0]["before"]["p50_ns"] + 320
    slower = [
        (pair["a"]["kernel"], event["name"])
        for pair in document["launches"]
        for event in pair["events"]
        if event["slower"]
    ]
    assert slower == [("gemm", "mma")]
    assert (gemm["flags"], softmax["flags"]) == (["range-slower"], [])
    assert len(gemm["blocks"]) == 8 and all(block["change_ns"] > 0 for block in gemm["blocks"])
    assert document["flags"] == ["range-slower"] and document["failing"] == ["range-slower"]
    assert document["thresholds"]["range_slower_pct"] == 20.0 and document["thresholds"]["range_min_ns"] == 100


def test_two_runs_alike_flag_nothing(runs: dict[str, Path]) -> None:
    result = run_iket("diff", str(runs["before"]), str(runs["again"]))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == "2 launches matched; nothing flagged"
    assert "!" not in result.stdout


def test_range_thresholds_are_settable(runs: dict[str, Path]) -> None:
    """320 ns more of a 640 ns range is 50%: not flagged when 60% or 400 ns counts."""
    for args in (("--range-slower", "60"), ("--range-min-ns", "400")):
        result = run_iket("diff", str(runs["before"]), str(runs["slowed"]), *args)
        assert result.returncode == 0, (args, result.stdout)
        assert result.stdout.splitlines()[-1] == "2 launches matched; nothing flagged"


def test_counts_and_payloads_that_changed_are_said_and_gate_when_asked(runs: dict[str, Path]) -> None:
    result = run_iket("diff", str(runs["before"]), str(runs["fewer"]))
    assert result.returncode == 0, result.stdout  # neither is among the default --fail-on
    lines = result.stdout.splitlines()
    assert "process 1 launch 3 gemm  [count-changed, payload-changed]" in lines
    assert "  count: mma 128 -> 96; load 128 -> 96; k_step 128 -> 96" in lines
    assert "  payload: k_step 0..7 -> 0..5" in lines
    gated = run_iket("diff", str(runs["before"]), str(runs["fewer"]), "--fail-on", "count-changed")
    assert gated.returncode == 1
    assert gated.stdout.splitlines()[-1].endswith("(exit 1: count-changed)")


def test_the_real_recordings_match_their_launches_and_list_the_one_more(tmp_path: Path) -> None:
    """The H200 run against the same run with one more launch, whose block (3,0) waited 4 s."""
    result = run_iket("diff", str(EXAMPLE), str(WAITING))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert [line for line in lines if line.startswith("process 1 launch")] == [
        "process 1 launch 3 traced_gemm_kernel",
        "process 1 launch 4 traced_gemm_kernel",
        "process 1 launch 5 traced_gemm_kernel",
    ]
    assert "  only in B: process 1 launch 6 traced_gemm_kernel grid 8x8x1" in lines
    assert lines[-1] == "9 compiles matched, 3 launches matched; flagged: unmatched"
    assert run_iket("diff", str(EXAMPLE), str(WAITING), "--fail-on", "unmatched").returncode == 1


def test_two_launches_of_one_recording(tmp_path: Path) -> None:
    result = run_iket("diff", str(WAITING), "--launch", "5", "--launch", "6", "--format", "json")
    assert result.returncode == 1, result.stdout + result.stderr
    document = json.loads(result.stdout)
    (change,) = document["launches"]
    assert document["pairs"] == [] and (change["a"]["launch"], change["b"]["launch"]) == (5, 6)
    assert change["events"][0]["name"] == "mma"
    assert change["blocks"][0]["block"] == "(3,0,0)" and change["blocks"][0]["after_ns"] > 4_000_000_000
    assert change["flags"] == ["range-slower", "payload-changed"]
    text = run_iket("diff", str(WAITING), "--launch", "5", "--launch", "6").stdout.splitlines()
    at = text.index("  blocks changed most:")
    assert text[at + 1].split()[0] == "(3,0,0)"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--launch", "5"), "iket-tui: --launch is given twice or not at all: --launch N --launch M"),
        (("--launch", "5", "--launch", "9"), f"iket-tui: {WAITING}: no launch 9 (launches: 3, 4, 5, 6)"),
        (
            ("--launch", "5", "--launch", "6", "--range-slower", "-5"),
            "iket-tui: argument --range-slower: must be a number of at least 0",
        ),
        (
            ("--launch", "5", "--launch", "6", "--fail-on", "range-slowest"),
            "iket-tui: argument --fail-on: unknown flag 'range-slowest'",
        ),
    ],
    ids=["one-launch", "no-such-launch", "negative-threshold", "unknown-flag"],
)
def test_bad_options_are_one_line_and_exit_2(args: tuple[str, ...], said: str) -> None:
    result = run_iket("diff", str(WAITING), *args)
    assert result.returncode == 2, result.stdout
    assert result.stdout == ""
    assert result.stderr.strip().splitlines()[-1].startswith(said)
