"""The bare command names every subcommand there is, as --help lists them."""

from __future__ import annotations

import re

import pytest

from iket_tui.cli import main


def test_the_bare_command_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    usage = capsys.readouterr().out
    commands = re.findall(r"^    ([a-z]+)(?: |$)", usage, flags=re.MULTILINE)  # the rows under "COMMAND"
    expected = {"run", "attach", "record", "replay", "dump", "export", "repro", "abort", "stacks", "ir", "ls", "demo"}
    assert expected | {"serve", "completion"} <= set(commands)
    assert main([]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == f"iket-tui: choose a command: {', '.join(commands)} (see --help)"
