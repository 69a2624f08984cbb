"""``iket-tui completion bash|zsh|fish``: the scripts, loaded into real shells, complete
commands, options and choices, the pids of live agents where a command takes a TARGET, and
recordings where it takes a FILE."""

from __future__ import annotations

import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import TIMEOUT_S, assert_one_line_error, run_iket, wait_until

from iket_tui.endpoints import list_endpoints

IKET_TUI = Path(sys.executable).parent / "iket-tui"
"""The installed command, as a user's shell finds it: the scripts ask it for the live agents."""

AGENT_PROGRAM = "import time, iket_tui.agent; iket_tui.agent.start(); time.sleep(600)"

pytestmark = pytest.mark.skipif(not IKET_TUI.exists(), reason=f"no iket-tui command beside {sys.executable}")


@pytest.fixture
def files(tmp_path: Path) -> Path:
    """A directory holding a recording, another file, and a directory."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "run.msgpack").write_bytes(b"")
    (work / "notes.txt").write_text("")
    (work / "older").mkdir()
    return work


@pytest.fixture
def agent() -> Iterator[int]:
    """A Python program that runs the real agent (which the scripts' probes leave running); its pid."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("IKET_TUI")}
    program = subprocess.Popen([sys.executable, "-c", AGENT_PROGRAM], env=env, stdin=subprocess.DEVNULL)
    try:
        wait_until(lambda: [endpoint.pid for endpoint in list_endpoints(listening_only=True)] == [program.pid])
        yield program.pid
    finally:
        program.kill()
        program.wait()


def _environment() -> dict[str, str]:
    return {**os.environ, "PATH": f"{IKET_TUI.parent}:{os.environ['PATH']}"}


def _script(shell: str) -> str:
    result = run_iket("completion", shell)
    assert result.returncode == 0, result.stderr
    return result.stdout


# bash: the completion function asked directly, as bash asks it on TAB


def _bash(files: Path, *lines: tuple[str, ...]) -> list[list[str]]:
    """What bash offers for each line (its words, the last one being completed)."""
    asks = "\n".join(
        "COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); COMPREPLY=(); _iket_tui; "
        "printf '%s\\n' \"${{COMPREPLY[@]}}\" | sort; echo ---".format(
            words=" ".join(f"'{word}'" for word in (str(IKET_TUI), *line))
        )
        for line in lines
    )
    program = f"source <({IKET_TUI} completion bash)\n{asks}\n"
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", program],
        capture_output=True,
        text=True,
        cwd=files,
        env=_environment(),
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 0 and not done.stderr, done.stderr
    answers = done.stdout.split("---\n")[:-1]
    return [[word for word in answer.splitlines() if word] for answer in answers]


def test_bash_offers_the_pids_of_live_agents_for_a_target(files: Path, agent: int) -> None:
    pid = str(agent)
    answers = _bash(files, *[(command, "") for command in ("attach", "record", "stacks", "ir", "abort")])
    assert answers == [[pid]] * 5
    assert _bash(files, ("attach", pid[0]), ("record", pid, "-o", "x", "")) == [[pid], []]


def test_bash_offers_recordings_and_directories_for_a_file(files: Path) -> None:
    answers = _bash(files, ("replay", ""), ("dump", "r"), ("export", ""), ("repro", ""), ("export", "run.msgpack", ""))
    recordings = ["older", "run.msgpack"]  # and directories to look in, never notes.txt
    assert answers[:4] == [recordings, ["run.msgpack"], recordings, recordings]
    assert answers[4] == []  # export takes one recording
    (written,) = _bash(files, ("export", "run.msgpack", "-o", ""))
    assert written == ["notes.txt", "older", "run.msgpack"]  # -o takes any file


def test_bash_completes_commands_options_and_choices(files: Path) -> None:
    commands, options, choices, shells, served = _bash(
        files, ("",), ("dump", "run.msgpack", "--"), ("dump", "--format", ""), ("completion", ""), ("serve", "")
    )
    assert {"run", "attach", "record", "replay", "dump", "cut", "export", "repro", "ls", "demo", "completion"} <= set(
        commands
    )
    assert options == ["--format", "--from", "--help", "--records", "--to"]
    assert choices == ["jsonl", "text"]
    assert shells == ["bash", "fish", "zsh"]
    assert served == ["attach", "replay", "run"]


def test_bash_completes_the_program_run_starts(files: Path) -> None:
    program, argument, option = _bash(files, ("run", "--", "bas"), ("run", "--", "bash", "no"), ("run", "--kern"))
    assert "bash" in program
    assert argument == ["notes.txt"]
    assert option == ["--kernel-stuck-after", "--kernels"]


def test_the_live_targets_are_listed_with_their_commands(agent: int) -> None:
    result = run_iket("completion", "--list-targets")
    assert result.returncode == 0, result.stderr
    (line,) = result.stdout.splitlines()
    pid, command = line.split("\t")
    assert pid == str(agent) and command.startswith(f"{sys.executable} -c {AGENT_PROGRAM}"[:50])


def test_completion_without_a_shell_says_which(files: Path) -> None:
    assert_one_line_error(run_iket("completion"), "completion needs a shell: iket-tui completion bash|zsh|fish")
    result = run_iket("completion", "tcsh")
    assert result.returncode == 2 and "invalid choice: 'tcsh'" in result.stderr


# fish: its own `complete --do-complete` answers without a terminal

needs_fish = pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed (apt-get install fish)")


def _fish(files: Path, *lines: str) -> list[list[str]]:
    asks = "; ".join(f"complete --do-complete '{line}'; echo ---" for line in lines)
    done = subprocess.run(
        ["fish", "--no-config", "-c", f"iket-tui completion fish | source; {asks}"],
        capture_output=True,
        text=True,
        cwd=files,
        env=_environment(),
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 0 and not done.stderr, done.stderr
    return [[word.split("\t")[0] for word in answer.splitlines()] for answer in done.stdout.split("---\n")[:-1]]


@needs_fish
def test_fish_parses_the_script(tmp_path: Path) -> None:
    script = tmp_path / "iket-tui.fish"
    script.write_text(_script("fish"))
    done = subprocess.run(["fish", "--no-execute", str(script)], capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr


@needs_fish
def test_fish_offers_live_agents_recordings_and_choices(files: Path, agent: int) -> None:
    pid = str(agent)
    targets, aborts, recordings, written, formats, rest = _fish(
        files,
        "iket-tui attach ",
        "iket-tui abort --compile 3 ",
        "iket-tui replay ",
        "iket-tui export run.msgpack -o ",
        "iket-tui dump --format ",
        "iket-tui run -- bash no",
    )
    assert targets == [pid] and aborts == [pid]
    assert sorted(recordings) == ["older/", "run.msgpack"]
    assert sorted(written) == ["notes.txt", "older/", "run.msgpack"]
    assert sorted(formats) == ["jsonl", "text"]
    assert rest == ["notes.txt"]


# zsh: completion needs its line editor, so an interactive zsh in a terminal gets a TAB

needs_zsh = pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed (apt-get install zsh)")


class _Zsh:
    """An interactive ``zsh -f`` in a pseudo-terminal with the script loaded."""

    def __init__(self, cwd: Path) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.chdir(cwd)
            os.execve("/bin/sh", ["sh", "-c", "exec zsh -f -i"], {**_environment(), "TERM": "dumb", "PS1": "> "})
        self.output = b""
        self.type(
            "autoload -U compinit && compinit -u -D && source <(iket-tui completion zsh) && echo loaded-$((6 * 7))\n"
        )
        self.wait_for(b"loaded-42")

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def wait_for(self, text: bytes) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while text not in self.screen:
            assert time.monotonic() < deadline, f"{text!r} never appeared in {self.screen[-2000:]!r}"
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if ready:
                self.output += os.read(self.fd, 65536)

    @property
    def screen(self) -> bytes:
        return re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]|[\r\x07]", b"", self.output)

    def complete(self, line: str, expected: bytes) -> None:
        """Type ``line`` and TAB, until ``expected`` is on the screen; then clear the line."""
        self.output = b""
        self.type(line + "\t")
        self.wait_for(expected)
        self.type("\x15")  # ^U: the line is wiped for the next one

    def close(self) -> None:
        self.type("exit\n")
        os.close(self.fd)
        os.waitpid(self.pid, 0)


@needs_zsh
def test_zsh_parses_the_script(tmp_path: Path) -> None:
    script = tmp_path / "_iket-tui"
    script.write_text(_script("zsh"))
    done = subprocess.run(["zsh", "-n", str(script)], capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr


@needs_zsh
def test_zsh_offers_live_agents_recordings_and_choices(files: Path, agent: int) -> None:
    zsh = _Zsh(files)
    try:
        zsh.complete("iket-tui attach ", f"iket-tui attach {agent} ".encode())  # the one agent, filled in
        zsh.complete("iket-tui dump r", b"iket-tui dump run.msgpack ")
        zsh.complete("iket-tui dump --format j", b"iket-tui dump --format jsonl ")
        zsh.complete("iket-tui compl", b"iket-tui completion ")
        zsh.complete("iket-tui replay ", b"older/")  # a directory to look in, and the recording
        assert b"run.msgpack" in zsh.screen and b"notes.txt" not in zsh.screen
    finally:
        zsh.close()
