"""Completion of TARGETs beyond the first: ``attach`` takes several pids, so each word after the
first is offered the live agents again, less those already on the line; ``repro --stuck`` takes a
live TARGET as well as a recording, so it is offered both (plain ``repro`` only recordings). In
real bash, zsh and fish."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import wait_until
from test_cli_completion import AGENT_PROGRAM, _bash, _fish, _Zsh, files, needs_fish, needs_zsh

from iket_tui.cli.completion import script
from iket_tui.endpoints import list_endpoints

__all__ = ["files"]  # a fixture, shared with the first completion tests


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home whose ~/.ssh/config names one host."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text("Host lab-a100\n    User me\n")
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def agents() -> Iterator[list[str]]:
    """Two Python programs that run the real agent; their pids, smaller first."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("IKET_TUI")}
    programs = [
        subprocess.Popen([sys.executable, "-c", AGENT_PROGRAM], env=env, stdin=subprocess.DEVNULL) for _ in range(2)
    ]
    pids = sorted(program.pid for program in programs)
    try:
        wait_until(lambda: sorted(endpoint.pid for endpoint in list_endpoints(listening_only=True)) == pids)
        yield [str(pid) for pid in pids]
    finally:
        for program in programs:
            program.kill()
            program.wait()


def test_bash_offers_the_other_live_agents_after_a_pid_attach_was_given(files: Path, agents: list[str]) -> None:
    first, second = agents
    assert _bash(
        files,
        ("attach", ""),
        ("attach", first, ""),
        ("attach", second, ""),
        ("attach", first, second, ""),
        ("attach", "--record", "x.msgpack", second, "--depth", "2", ""),
        ("attach", first, "-"),
    ) == [
        [first, second],
        [second],
        [first],
        [],  # both are given
        [first],
        [
            "--all",
            "--depth",
            "--help",
            "--hosts",
            "--kernel-stuck-after",
            "--max-passes",
            "--passes",
            "--record",
            "--stuck-after",
            "-h",
        ],
    ]


def test_bash_offers_only_one_target_where_a_command_takes_one(files: Path, agents: list[str]) -> None:
    assert _bash(files, ("stacks", agents[0], "")) == [[]]


def test_bash_offers_record_the_other_live_agent_as_attach(files: Path, agents: list[str]) -> None:
    first, second = agents
    assert _bash(files, ("record", first, ""), ("record", first, second, "")) == [[second], []]


def test_bash_offers_live_agents_and_recordings_to_repro_stuck(files: Path, home: Path, agents: list[str]) -> None:
    first, second = agents
    stuck, after, named, hosts, plain = _bash(
        files,
        ("repro", "--stuck", ""),
        ("repro", "-o", "hang", "--stuck", ""),
        ("repro", "--stuck", "r"),
        ("repro", "--stuck", "lab"),
        ("repro", ""),
    )
    assert stuck == after == sorted([first, second, "older", "run.msgpack"])
    assert named == ["run.msgpack"]
    assert hosts == ["lab-a100:"]
    assert plain == ["older", "run.msgpack"]  # without --stuck a pid is refused: recordings only


@needs_fish
def test_fish_offers_the_other_live_agents_after_a_pid_attach_was_given(files: Path, agents: list[str]) -> None:
    first, second = agents
    assert _fish(
        files,
        "iket-tui attach ",
        f"iket-tui attach {first} ",
        f"iket-tui attach --depth 2 {second} ",
        f"iket-tui attach {first} {second} ",
        f"iket-tui record {first} ",
        f"iket-tui stacks {first} ",
    ) == [[first, second], [second], [first], [], [second], []]


@needs_fish
def test_fish_offers_live_agents_and_recordings_to_repro_stuck(files: Path, home: Path, agents: list[str]) -> None:
    stuck, hosts, plain = _fish(files, "iket-tui repro --stuck ", "iket-tui repro --stuck la", "iket-tui repro ")
    assert sorted(stuck) == sorted([*agents, "older/", "run.msgpack"])
    assert hosts == ["lab-a100:"]
    assert sorted(plain) == ["older/", "run.msgpack"]


@needs_zsh
def test_zsh_offers_the_other_live_agent_after_a_pid_attach_was_given(files: Path, agents: list[str]) -> None:
    first, second = agents
    zsh = _Zsh(files)
    try:
        zsh.complete(f"iket-tui attach {first} ", f"iket-tui attach {first} {second} ".encode())  # the only other
        zsh.complete(f"iket-tui attach {second} ", f"iket-tui attach {second} {first} ".encode())
    finally:
        zsh.close()


@needs_zsh
def test_zsh_offers_live_agents_and_recordings_to_repro_stuck(files: Path, home: Path, agents: list[str]) -> None:
    zsh = _Zsh(files)
    try:
        zsh.complete("iket-tui repro --stuck ", b"run.msgpack")
        for expected in (*agents, "older/"):
            zsh.wait_for(expected.encode())
        assert b"notes.txt" not in zsh.screen
        zsh.complete("iket-tui repro --stuck la", b"iket-tui repro --stuck lab-a100:")
        zsh.complete("iket-tui repro ", b"run.msgpack")
        zsh.wait_for(b"older/")
        assert not any(pid.encode() in zsh.screen for pid in agents)
    finally:
        zsh.close()


def test_a_widening_flag_the_command_lost_stops_the_script_being_made() -> None:
    parser = argparse.ArgumentParser(prog="iket-tui")
    repro = parser.add_subparsers().add_parser("repro")
    repro.add_argument("file", metavar="FILE")
    with pytest.raises(ValueError, match="repro has no flag --stuck to widen its FILE"):
        script("bash", parser)
    repro.add_argument("--stuck", action="store_true")
    assert "targets-or-recordings" in script("bash", parser)
