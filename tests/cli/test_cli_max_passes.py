"""``--max-passes``: the commands that open the UI take a bound on the passes the tree keeps;
one that is not a whole number above 0 is said in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import assert_no_traceback, run_iket

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"


@pytest.mark.parametrize("command", ["replay", "attach", "run"])
def test_the_ui_commands_document_the_bound(command: str) -> None:
    result = run_iket(command, "--help")
    assert result.returncode == 0
    assert "--max-passes N" in result.stdout
    assert "failed, stuck and running ones keep theirs" in " ".join(result.stdout.split())


@pytest.mark.parametrize(
    ("args", "bound"),
    [(("replay", str(EXAMPLE)), "0"), (("replay", str(EXAMPLE)), "many"), (("attach", "1"), "-5"), (("run",), "1.5")],
)
def test_a_bad_bound_is_one_line(args: tuple[str, ...], bound: str) -> None:
    result = run_iket(*args, "--max-passes", bound, *(["--", "true"] if args == ("run",) else []))
    assert result.returncode == 2
    assert_no_traceback(result.stderr)
    error = result.stderr.strip().splitlines()[-1]
    assert "--max-passes" in error and repr(bound) in error
