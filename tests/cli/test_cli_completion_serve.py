"""Completion after ``iket-tui serve``: once the command it serves is named (replay, attach or
run, after serve's own options or none), the words are completed as that command's (live agents
for attach, recordings for replay, a program after run --) with its options and serve's own
(--port, --host, --record) too. In real bash, zsh and fish."""

from __future__ import annotations

from pathlib import Path

from test_cli_completion import _bash, _fish, _Zsh, agent, files, needs_fish, needs_zsh

__all__ = ["agent", "files"]  # fixtures, shared with the first completion tests

REPLAY_OPTIONS = [
    "--help",
    "--host",
    "--kernel-stuck-after",
    "--max-passes",
    "--paused",
    "--port",
    "--speed",
]  # no --record: refused
REPLAY_OPTIONS += ["--stuck-after", "-h"]


def test_bash_completes_the_served_command_as_itself(files: Path, agent: int) -> None:
    pid = str(agent)
    assert _bash(
        files,
        ("serve", ""),
        ("serve", "attach", ""),
        ("serve", "--port", "8001", "attach", ""),
        ("serve", "attach", pid, ""),  # serve shows one process
        ("serve", "replay", ""),
        ("serve", "--host", "0.0.0.0", "replay", "r"),
        ("serve", "replay", "run.msgpack", "--sp"),
        ("serve", "replay", "run.msgpack", "--po"),
        ("serve", "replay", "run.msgpack", "-"),
        ("serve", "attach", "--record", ""),
        ("serve", "attach", "--port", "8001", ""),
        ("serve", "run", "--kern"),
        ("serve", "run", "--", "bash", "no"),
        ("serve", "--port", ""),
        ("serve", "attach", "--a"),  # serve shows one process: no --all
        ("serve", "run", "--no"),  # nor a run without its UI
    ) == [
        ["attach", "replay", "run"],
        [pid],
        [pid],
        [],
        ["older", "run.msgpack"],
        ["run.msgpack"],
        ["--speed"],
        ["--port"],
        REPLAY_OPTIONS,
        ["notes.txt", "older", "run.msgpack"],  # --record takes any file
        [pid],
        ["--kernel-stuck-after", "--kernels"],
        ["notes.txt"],
        [],  # a port is a number
        [],
        ["--no-follow"],
    ]


@needs_fish
def test_fish_completes_the_served_command_as_itself(files: Path, agent: int) -> None:
    pid = str(agent)
    answers = _fish(
        files,
        "iket-tui serve ",
        "iket-tui serve attach ",
        "iket-tui serve --port 8001 attach ",
        f"iket-tui serve attach {pid} ",
        "iket-tui serve replay ",
        "iket-tui serve replay run.msgpack --sp",
        "iket-tui serve replay run.msgpack --po",
        "iket-tui serve attach --port 8001 ",
        "iket-tui serve run -- bash no",
    )
    assert [sorted(answer) for answer in answers] == [
        ["attach", "replay", "run"],
        [pid],
        [pid],
        [],
        ["older/", "run.msgpack"],
        ["--speed"],
        ["--port"],
        [pid],
        ["notes.txt"],
    ]


@needs_zsh
def test_zsh_completes_the_served_command_as_itself(files: Path, agent: int) -> None:
    zsh = _Zsh(files)
    try:
        zsh.complete("iket-tui serve att", b"iket-tui serve attach ")
        zsh.complete("iket-tui serve attach ", f"iket-tui serve attach {agent} ".encode())
        zsh.complete("iket-tui serve --port 8001 attach ", f"iket-tui serve --port 8001 attach {agent} ".encode())
        zsh.complete("iket-tui serve replay r", b"iket-tui serve replay run.msgpack ")
        zsh.complete("iket-tui serve replay run.msgpack --sp", b"iket-tui serve replay run.msgpack --speed ")
        zsh.complete("iket-tui serve attach --po", b"iket-tui serve attach --port ")
        zsh.complete("iket-tui serve replay ", b"older/")
        assert b"run.msgpack" in zsh.screen and b"notes.txt" not in zsh.screen
    finally:
        zsh.close()
