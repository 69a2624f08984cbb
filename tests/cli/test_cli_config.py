"""The config file ($XDG_CONFIG_HOME/iket-tui/config.toml) sets the defaults of the UI's options,
flags win over it, and a file that cannot be used is one line naming the file, the key and the
problem, with exit code 2, whatever the command."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from cli_helpers import assert_one_line_error, run_iket

from iket_tui.cli.config import apply_config, config_keys, config_path, ui_theme
from iket_tui.cli.parser import build_parser


@pytest.fixture
def config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The config file of a fresh $XDG_CONFIG_HOME (not written yet)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config-home"))
    path = tmp_path / "config-home" / "iket-tui" / "config.toml"
    path.parent.mkdir(parents=True)
    return path


def _parsed(*argv: str) -> argparse.Namespace:
    parser = build_parser()
    apply_config(parser, config_keys())
    return parser.parse_args(argv)


def test_the_file_sets_the_defaults_and_a_flag_wins(config: Path) -> None:
    config.write_text('stuck-after = 7\nmax-passes = 5000\nring-size = "256M"\nspeed = "max"\ntheme = "nord"\n')
    replay = _parsed("replay", "run.msgpack")
    assert (replay.stuck_after, replay.max_passes, replay.speed) == (7.0, 5000, 0.0)
    assert _parsed("replay", "run.msgpack", "--stuck-after", "3").stuck_after == 3.0
    run = _parsed("run", "--kernels", "--", "python", "x.py")
    assert run.ring_size == 256 << 20 and run.stuck_after == 7.0
    assert _parsed("attach", "123").kernel_stuck_after == 2.0  # not in the file
    assert ui_theme() == "nord"


def test_without_a_file_the_defaults_are_the_flags_own(config: Path) -> None:
    replay = _parsed("replay", "run.msgpack")
    assert (replay.stuck_after, replay.speed) == (30.0, 1.0)
    assert ui_theme() is None


def test_the_file_is_under_xdg_config_home_else_dot_config(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, config: Path
) -> None:
    assert config_path() == config
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert config_path() == tmp_path / "home" / ".config" / "iket-tui" / "config.toml"


def test_config_and_help_say_where_the_file_is_read_and_what_it_sets(config: Path) -> None:
    config.write_text("stuck-after = 12\n")
    said = run_iket("config")
    assert said.returncode == 0, said.stderr
    assert said.stdout.splitlines()[0] == f"config file: {config} (read)"
    assert "  stuck-after         = 12.0  (a positive number of seconds; --stuck-after)" in said.stdout
    assert "  theme               not set" in said.stdout
    top = run_iket("--help")
    assert str(config) in " ".join(top.stdout.split())
    replay = run_iket("replay", "--help")
    assert f"{config}setsstuck-after=12.0" in "".join(replay.stdout.split())  # a long path is cut across lines


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("stuck-after = \n", "not valid TOML: Invalid value (at line 1, column 15)"),
        ("stuck = 1\n", "unknown key 'stuck'; the keys are drain-hz, kernel-stuck-after, max-passes,"),
        ("stuck-after = -1\n", "stuck-after: must be a positive number of seconds: '-1'"),
        ("max-passes = [1]\n", "max-passes: must be a whole number of passes, not a TOML list"),
        ('theme = "pink"\n', "theme: no theme 'pink'; the themes are ansi-dark,"),
        ('ring-size = "lots"\n', "ring-size: not a size (such as 256M or 1G): 'lots'"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_file_the_key_and_the_problem(config: Path, text: str, said: str) -> None:
    config.write_text(text)
    for command in (("replay", "missing.msgpack"), ("attach", "1"), ("config",)):
        done = run_iket(*command)
        assert_one_line_error(done, f"iket-tui: {config}: {said}")
    listed = run_iket("ls")  # a command that takes none of its options runs whatever the file holds
    assert listed.returncode == 0 and listed.stderr == ""


def test_a_config_path_with_a_percent_sign_still_shows_help(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    home = tmp_path / "100% mine"
    (home / "iket-tui").mkdir(parents=True)
    (home / "iket-tui" / "config.toml").write_text("stuck-after = 7\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    shown = run_iket("replay", "--help")
    assert shown.returncode == 0, shown.stderr
    assert "100%mine/iket-tui/config.tomlsetsstuck-after=7.0" in "".join(shown.stdout.split())
