"""Completion offers the hosts of ``~/.ssh/config`` as ``HOST:`` where a TARGET is typed with a
letter (pids stay what an empty or numeric word gets), in real bash, zsh and fish."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import run_iket
from test_cli_completion import _bash, _fish, _Zsh, needs_fish, needs_zsh

CONFIG = """\
# the machines of the lab
Host gpu-box gpu-box-2  # two names
    HostName 10.0.0.7
Host=lab-a100
    User me
Host *.internal !bastion ?x
    ProxyJump bastion
Host *
    ServerAliveInterval 30
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home whose ~/.ssh/config names three hosts, among patterns."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(CONFIG)
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def files(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work


def test_the_hosts_of_the_ssh_config_are_listed_without_its_patterns(home: Path) -> None:
    result = run_iket("completion", "--list-hosts")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["gpu-box:", "gpu-box-2:", "lab-a100:"]


def test_without_an_ssh_config_no_host_is_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    result = run_iket("completion", "--list-hosts")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_bash_offers_hosts_for_a_target_typed_with_a_letter(home: Path, files: Path) -> None:
    assert _bash(files, ("attach", "gpu"), ("record", "l"), ("attach", "x")) == [
        ["gpu-box-2:", "gpu-box:"],
        ["lab-a100:"],
        [],
    ]


@needs_fish
def test_fish_offers_hosts_for_a_target_typed_with_a_letter(home: Path, files: Path) -> None:
    assert _fish(files, "iket-tui attach lab", "iket-tui stacks gpu-box-") == [["lab-a100:"], ["gpu-box-2:"]]


@needs_zsh
def test_zsh_offers_hosts_for_a_target_typed_with_a_letter(home: Path, files: Path) -> None:
    zsh = _Zsh(files)
    try:
        zsh.complete("iket-tui attach lab", b"iket-tui attach lab-a100:")
    finally:
        zsh.close()


def test_the_hosts_of_included_files_are_listed_where_they_are_included(home: Path) -> None:
    ssh = home / ".ssh"
    (ssh / "config.d").mkdir()
    (ssh / "config.d" / "10-lab").write_text("Host lab-h100\n  HostName 10.0.0.9\nInclude ../config\n")
    (ssh / "config.d" / "20-cloud").write_text("Host=cloud-a cloud-b\nInclude ~/.ssh/loop\n")
    (ssh / "loop").write_text("Host loop-box\nInclude loop\nInclude config.d/*\n")  # includes itself and back
    (ssh / "absolute").write_text("Host far-box\n")
    (ssh / "config").write_text(f"Include config.d/*\nHost gpu-box\nInclude {ssh / 'absolute'} missing-file\n")
    result = run_iket("completion", "--list-hosts")
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.splitlines() == ["lab-h100:", "cloud-a:", "cloud-b:", "loop-box:", "gpu-box:", "far-box:"]
