"""``iket-tui run --no-ui``, ``demo`` and usage errors, as a user runs them.

The programs run here are shells that start the fake agent; the agent's own ``IKET_TUI`` is
cleared so the real agent's start-up hook stays out of the way.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import (
    FAKE_AGENT_PATH,
    TIMEOUT_S,
    assert_no_traceback,
    assert_one_line_error,
    iket_command,
    run_iket,
    wait_for_size,
)

from iket_tui.protocol import messages as m
from iket_tui.sources.reading import read_recording


def _fake(mode: str, exit_code: int = 0) -> str:
    agent = f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKE_AGENT_PATH))}"
    return f"env IKET_TUI= {agent} {mode} --exit-code {exit_code}"


def test_run_records_the_program_and_exits_with_its_code(tmp_path: Path) -> None:
    out = tmp_path / "run.msgpack"
    seen_env = tmp_path / "env.txt"
    script = f'echo "$IKET_TUI $IKET_TUI_WAIT_CLIENT" > {shlex.quote(str(seen_env))}; exec {_fake("normal", 3)}'
    result = run_iket("run", "--no-ui", "--record", str(out), "--", "sh", "-c", script)
    assert result.returncode == 3, result.stderr
    assert seen_env.read_text().split() == ["1", "10"]
    assert result.stderr.splitlines() == [f"iket-tui: recorded 12 messages to {out}"]
    msgs, info = read_recording(out)
    assert info.ended
    types = [msg["type"] for msg in msgs]
    assert types[:3] == [m.RECORDING, m.HELLO, m.SYNC]
    assert types[-2:] == [m.BYE, m.END]


def test_run_with_kernels_passes_the_tracing_settings_to_the_program(tmp_path: Path) -> None:
    out = tmp_path / "run.msgpack"
    seen_env = tmp_path / "env.txt"
    variables = "$IKET_TUI_KERNELS $IKET_TUI_DRAIN_HZ $IKET_TUI_RING_CHUNKS $IKET_TUI_RING_SIZE"
    script = f'echo "{variables}" > {shlex.quote(str(seen_env))}; exec {_fake("normal")}'
    args = ("run", "--kernels", "--drain-hz", "50", "--ring-chunks", "64", "--ring-size", "256M", "--no-ui")
    result = run_iket(*args, "--record", str(out), "--", "sh", "-c", script)
    assert result.returncode == 0, result.stderr
    assert seen_env.read_text().split() == ["1", "50", "64", str(256 << 20)]


def test_run_finds_the_agent_in_a_process_the_program_started(tmp_path: Path) -> None:
    out = tmp_path / "run.msgpack"
    script = f"{_fake('normal')}; exit 5"
    result = run_iket("run", "--no-ui", "--record", str(out), "--", "sh", "-c", script)
    assert result.returncode == 5, result.stderr
    msgs, _ = read_recording(out)
    assert msgs[1]["type"] == m.HELLO
    assert "fake_agent.py" in " ".join(msgs[1]["argv"])


def test_run_of_a_program_without_agent_says_so_and_keeps_its_code() -> None:
    result = run_iket("run", "--no-ui", "--", "sh", "-c", "exit 4")
    assert result.returncode == 4
    assert result.stderr.splitlines() == ["iket-tui: sh exited with code 4 before an iket-tui agent started in it"]


def test_run_of_a_missing_command_is_one_line() -> None:
    result = run_iket("run", "--no-ui", "--", "no-such-command-iket")
    assert_no_traceback(result.stderr)
    assert result.stderr.splitlines() == ["iket-tui: no-such-command-iket: command not found"]
    assert result.returncode == 2


def test_run_interrupted_while_recording_leaves_a_closed_file(tmp_path: Path) -> None:
    out = tmp_path / "run.msgpack"
    runner = subprocess.Popen(
        iket_command("run", "--no-ui", "--record", str(out), "--", "sh", "-c", f"exec {_fake('endless')}"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for_size(out, 2000)
    runner.terminate()
    _, stderr = runner.communicate(timeout=TIMEOUT_S)
    assert_no_traceback(stderr)
    assert runner.returncode == 143
    msgs, info = read_recording(out)
    assert info.ended and msgs[-1]["reason"] == "terminated"


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ((), "choose a command"),
        (("run",), "run needs a command"),
        (("run", "--no-ui"), "run needs a command"),
        (("replay",), "the following arguments are required: FILE"),
        (("replay", "x.msgpack", "--speed", "-1"), "speed must be 0 or more"),
        (("record", "1"), "the following arguments are required: -o/--output"),
        (("record", "1", "-o", "x", "--duration", "0"), "must be a positive number of seconds"),
        (("dump", "x", "--format", "xml"), "invalid choice: 'xml'"),
        (("frobnicate",), "invalid choice: 'frobnicate'"),
        (("run", "--kernels", "--drain-hz", "0", "--", "true"), "the drain rate must be between 0 and 1000 Hz"),
        (("run", "--kernels", "--ring-chunks", "6", "--", "true"), "ring chunks must be a power of two"),
        (("run", "--kernels", "--ring-chunks", "0", "--", "true"), "at least 1"),
        (("run", "--kernels", "--ring-size", "512K", "--", "true"), "the ring size must be between 1M and 64G"),
        (("run", "--kernels", "--ring-size", "lots", "--", "true"), "not a size (such as 256M or 1G)"),
    ],
)
def test_usage_errors_are_one_line(args: tuple[str, ...], error: str) -> None:
    assert_one_line_error(run_iket(*args), error)


def test_replay_of_an_unreadable_file_is_one_line_before_any_ui(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.msgpack"
    garbage.write_bytes(b"not a recording at all")
    assert_one_line_error(run_iket("replay", str(garbage)), "bad magic")
    assert_one_line_error(run_iket("replay", str(tmp_path / "missing.msgpack")), "no such file")


def test_the_version_is_printed() -> None:
    result = run_iket("--version")
    assert result.returncode == 0
    assert result.stdout.startswith("iket-tui ")


def test_headless_commands_never_import_textual(tmp_path: Path) -> None:
    code = (
        "import sys; from iket_tui.cli import main; main(['ls']); "
        "main(['dump', sys.argv[1]]); print('textual' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "missing")], capture_output=True, text=True, timeout=TIMEOUT_S
    )
    assert result.stdout.splitlines()[-1] == "False"


def test_run_of_a_program_whose_stream_fails_mid_message_says_so_once_and_keeps_what_came(tmp_path: Path) -> None:
    out = tmp_path / "cut.msgpack"
    result = run_iket("run", "--no-ui", "--record", str(out), "--", "sh", "-c", f"exec {_fake('vanish')}")
    assert result.returncode == 9, result.stderr
    assert_no_traceback(result.stderr)
    failed, recorded = result.stderr.splitlines()
    assert failed.startswith("iket-tui: ") and "disappeared in the middle of a message" in failed
    assert failed.count("pid ") == 1, "the stream's own error, not one process's note (`pid N: ...`)"
    assert recorded.startswith("iket-tui: recorded ") and recorded.endswith(f" messages to {out}")
    msgs, _ = read_recording(out)
    assert [msg["seq"] for msg in msgs if msg["type"] == m.PASS_END] == [0, 1, 2]
