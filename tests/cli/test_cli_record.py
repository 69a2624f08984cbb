"""``iket-tui record`` and the bad targets of ``record`` and ``attach``, as a user runs them."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path

import pytest
from cli_helpers import (
    TIMEOUT_S,
    FakeAgent,
    assert_no_traceback,
    assert_one_line_error,
    complete_messages,
    iket_command,
    run_iket,
    wait_for_size,
    wait_until,
)

from iket_tui.protocol import messages as m
from iket_tui.sources.base import SourceError
from iket_tui.sources.reading import read_recording


def _stream(msgs: list[m.Message]) -> list[m.Message]:
    return [msg for msg in msgs if msg["type"] not in (m.RECORDING, m.CHECKPOINT, m.END)]


@pytest.mark.parametrize("by", ["pid", "path"])
def test_record_follows_the_target_to_its_exit(tmp_path: Path, by: str) -> None:
    out = tmp_path / "run.msgpack"
    with FakeAgent("normal") as agent:
        target = str(agent.pid) if by == "pid" else str(agent.path)
        result = run_iket("record", target, "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.startswith(f"recorded 12 messages from pid {agent.pid} to {out} in ")
    assert result.stdout.rstrip().endswith("(the target exited)")
    msgs, info = read_recording(out)
    stream = _stream(msgs)
    assert stream[0]["type"] == m.HELLO and stream[0]["pid"] == agent.pid
    assert stream[-1]["type"] == m.BYE
    assert info.ended and msgs[-1]["reason"] == "the target said bye (exit)"


def test_record_stops_after_its_duration_with_an_end_frame(tmp_path: Path) -> None:
    out = tmp_path / "run.msgpack"
    with FakeAgent("endless") as agent:
        result = run_iket("record", str(agent.pid), "-o", str(out), "--duration", "0.5")
    assert result.returncode == 0, result.stderr
    assert "(0.5 s elapsed)" in result.stdout
    msgs, info = read_recording(out)
    assert info.ended and msgs[-1]["reason"] == "duration reached"
    assert msgs[-1]["messages"] == len(_stream(msgs))
    assert any(msg["type"] == m.PASS_END for msg in msgs)


@pytest.mark.parametrize(
    ("signum", "code", "reason"),
    [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")],
    ids=["sigterm", "ctrl-c"],
)
def test_record_stopped_by_a_signal_leaves_a_closed_file(
    tmp_path: Path, signum: signal.Signals, code: int, reason: str
) -> None:
    out = tmp_path / "run.msgpack"
    with FakeAgent("endless") as agent:
        recorder = subprocess.Popen(
            iket_command("record", str(agent.pid), "-o", str(out)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_for_size(out, 2000)
        recorder.send_signal(signum)
        stdout, stderr = recorder.communicate(timeout=TIMEOUT_S)
    assert_no_traceback(stderr)
    assert recorder.returncode == code, stderr
    assert f"({reason})" in stdout
    msgs, info = read_recording(out)
    assert info.ended and info.cut_at is None
    assert msgs[-1]["reason"] == reason


def test_a_recorder_killed_mid_write_leaves_every_complete_frame_readable(tmp_path: Path) -> None:
    out = tmp_path / "run.msgpack"
    with FakeAgent("endless") as agent:
        recorder = subprocess.Popen(iket_command("record", str(agent.pid), "-o", str(out)), stdout=subprocess.DEVNULL)
        wait_for_size(out, 20_000)
        recorder.kill()
        recorder.wait(TIMEOUT_S)
    data = out.read_bytes()
    result = run_iket("dump", str(out), "--format", "jsonl")
    assert result.returncode == 0
    assert len(result.stdout.splitlines()) == complete_messages(data)
    notes = result.stderr.splitlines()
    assert len(notes) == 1
    assert "recording cut at byte" in notes[0] or "no end frame" in notes[0]


def test_a_peer_vanishing_mid_message_is_one_line_and_the_file_keeps_what_came_before(tmp_path: Path) -> None:
    out = tmp_path / "run.msgpack"
    with FakeAgent("vanish") as agent:
        result = run_iket("record", str(agent.pid), "-o", str(out))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"iket-tui: pid {agent.pid} disappeared in the middle of a message (9 complete messages received)"
    ]
    assert "(failed)" in result.stdout
    msgs, info = read_recording(out)
    assert [msg["type"] for msg in _stream(msgs)] == [m.HELLO, m.SYNC, m.COMPILE_BEGIN, *[m.PASS_START, m.PASS_END] * 3]
    assert info.ended and msgs[-1]["reason"].startswith("error: ")


def test_a_target_killed_without_bye_ends_the_recording_cleanly(tmp_path: Path) -> None:
    out = tmp_path / "run.msgpack"
    with FakeAgent("nobye") as agent:
        result = run_iket("record", str(agent.pid), "-o", str(out))
    assert result.returncode == 0
    assert result.stderr.splitlines() == [
        f"iket-tui: pid {agent.pid} closed the connection without saying bye (killed?)"
    ]
    _, info = read_recording(out)
    assert info.ended


def _pid_max() -> int:
    return int(Path("/proc/sys/kernel/pid_max").read_text())


@pytest.mark.parametrize("command", ["record", "attach"])
def test_bad_targets_are_one_line_errors(command: str, tmp_path: Path) -> None:
    out = ["-o", str(tmp_path / "never.msgpack")] if command == "record" else []
    not_a_socket = tmp_path / "plain.txt"
    not_a_socket.write_text("hello")
    stale = tmp_path / "stale.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(stale))
    server.close()
    sleeper = subprocess.Popen(["sleep", "60"])  # a process without the agent that attach cannot start one in
    no_agent = {
        "record": (str(os.getpid()), f"process {os.getpid()} runs no iket-tui agent"),
        "attach": (str(sleeper.pid), f"process {sleeper.pid} (sleep) is not a Python program"),
    }
    cases = [
        (str(_pid_max() + 1), f"no process with pid {_pid_max() + 1}"),
        no_agent[command],
        (str(tmp_path / "nothing-here"), "no such pid or socket"),
        (str(not_a_socket), "not a socket"),
        (str(stale), "connection refused"),
    ]
    try:
        for target, error in cases:
            assert_one_line_error(run_iket(command, target, *out), error)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert not (tmp_path / "never.msgpack").exists()


@pytest.mark.parametrize("command", ["record", "attach"])
@pytest.mark.parametrize(
    ("mode", "error"),
    [("garbage", "not an iket-tui agent"), ("major", "peer speaks 2.0, this iket-tui speaks 1.1")],
)
def test_a_foreign_peer_is_a_one_line_error(command: str, mode: str, error: str, tmp_path: Path) -> None:
    out = ["-o", str(tmp_path / "never.msgpack")] if command == "record" else []
    with FakeAgent(mode) as agent:
        assert_one_line_error(run_iket(command, str(agent.pid), *out), error)
    assert not (tmp_path / "never.msgpack").exists()


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to run a peer as another user")
def test_another_users_socket_is_refused(runtime_dir: Path, tmp_path: Path) -> None:
    shared = runtime_dir / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    runtime_dir.chmod(0o755)
    with FakeAgent("normal", socket_path=shared / "other.sock", uid=65534) as agent:
        result = run_iket("record", str(agent.path), "-o", str(tmp_path / "never.msgpack"))
    assert_one_line_error(result, "peer runs as uid 65534")


def test_an_output_in_a_missing_directory_is_refused_before_connecting(tmp_path: Path) -> None:
    with FakeAgent("normal") as agent:
        result = run_iket("record", str(agent.pid), "-o", str(tmp_path / "no" / "such" / "dir.msgpack"))
        assert_one_line_error(result, "no such directory")
        assert agent.process is not None and agent.process.poll() is None


def test_ctrl_c_while_waiting_for_the_hello_ends_cleanly(tmp_path: Path) -> None:
    out = tmp_path / "never.msgpack"
    with FakeAgent("silent") as agent:
        recorder = subprocess.Popen(
            iket_command("record", str(agent.pid), "-o", str(out)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert agent.process is not None and agent.process.stdout is not None
        assert agent.process.stdout.readline() == "greeted\n"
        recorder.send_signal(signal.SIGINT)
        stdout, stderr = recorder.communicate(timeout=TIMEOUT_S)
    assert recorder.returncode == 130
    assert (stdout, stderr) == ("", "")
    assert not out.exists()


def test_record_of_a_quiet_target_stops_on_sigterm(tmp_path: Path) -> None:
    out = tmp_path / "quiet.msgpack"
    with FakeAgent("quiet") as agent:
        recorder = subprocess.Popen(
            iket_command("record", str(agent.pid), "-o", str(out)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_until(lambda: m.COMPILE_BEGIN in _recorded_types(out))
        recorder.terminate()
        stdout, stderr = recorder.communicate(timeout=TIMEOUT_S)
    assert_no_traceback(stderr)
    assert recorder.returncode == 143
    assert stdout.startswith(f"recorded 3 messages from pid {agent.pid}")
    msgs, info = read_recording(out)
    assert info.ended and msgs[-1]["reason"] == "terminated"


def _recorded_types(path: Path) -> list[str]:
    try:
        msgs, _ = read_recording(path)
    except SourceError:
        return []
    return [msg["type"] for msg in msgs]


@pytest.mark.parametrize("command", ["record", "stacks"])
@pytest.mark.parametrize("process", ["sleep", "a zombie", "pid 1"])
def test_a_process_that_is_not_python_is_said_so_not_advised_to_attach(
    command: str, process: str, tmp_path: Path
) -> None:
    """No agent could be started in it: ``attach`` would fail, so it is not advised."""
    out = ["-o", str(tmp_path / "never.msgpack")] if command == "record" else []
    child = subprocess.Popen(["sleep", "60"] if process == "sleep" else ["true"])
    try:
        if process == "a zombie":
            wait_until(lambda: Path(f"/proc/{child.pid}/stat").read_text().split(") ")[1].startswith("Z"))
        pid = 1 if process == "pid 1" else child.pid
        program = Path(f"/proc/{pid}/comm").read_text().strip()
        if process == "pid 1" and "python" in program:
            pytest.skip("pid 1 runs Python here")
        said = {
            "sleep": f"process {pid} (sleep) is not a Python program; start it with `iket-tui run -- CMD`",
            "a zombie": f"process {pid} has ended (a zombie its parent has not reaped yet)",
            "pid 1": "process 1 (",
        }[process]
        result = run_iket(command, str(pid), *out)
    finally:
        child.kill()
        child.wait()
    assert_one_line_error(result, said, "has ended" if process == "a zombie" else "is not a Python program")
    assert "attach" not in result.stderr and "--start-agent" not in result.stderr
    assert not (tmp_path / "never.msgpack").exists()
