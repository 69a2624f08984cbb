"""``-o -``: ``record`` writes the recording, ``export`` the document and ``repro`` a tar archive
of the reproducer to standard output, for a pipe; the one-line messages stay on stderr, and
a terminal as standard output is refused for bytes it cannot show."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import (
    TIMEOUT_S,
    FakeAgent,
    Terminal,
    assert_no_traceback,
    assert_one_line_error,
    failed_compile_recording,
    iket_command,
    run_iket,
    wait_until,
)
from full_disk import file_size_limit

from iket_tui.protocol import messages as m
from iket_tui.protocol.recording import MAGIC
from iket_tui.sources.reading import read_recording

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"


def _run(*args: str, stdout: int | io.BufferedWriter = subprocess.PIPE) -> subprocess.CompletedProcess[bytes]:
    """``iket-tui ARGS`` with its standard output as bytes (or into a file), and stderr as text."""
    result = subprocess.run(
        iket_command(*args), stdout=stdout, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=TIMEOUT_S
    )
    assert_no_traceback(result.stderr.decode())
    return result


def _said(result: subprocess.CompletedProcess[bytes]) -> str:
    (line,) = result.stderr.decode().splitlines()
    return line


# export


@pytest.mark.parametrize("format", ["chrome", "speedscope"])
def test_export_to_stdout_writes_the_same_document_as_to_a_file(tmp_path: Path, format: str) -> None:
    out = tmp_path / "trace.json"
    assert run_iket("export", str(SAMPLE), "-o", str(out), "--format", format).returncode == 0
    result = _run("export", str(SAMPLE), "-o", "-", "--format", format)
    assert result.returncode == 0
    assert result.stdout == out.read_bytes()
    assert json.loads(result.stdout)
    assert _said(result).startswith("iket-tui: wrote ") and _said(result).endswith(" events to standard output")


def test_export_to_a_reader_that_stops_early_is_no_error() -> None:
    done = subprocess.run(
        f"{' '.join(iket_command('export', str(SAMPLE), '-o', '-'))} | head -c 100",
        shell=True,
        capture_output=True,
        timeout=TIMEOUT_S,
    )
    assert done.stdout.startswith(b'{"traceEvents":[') and len(done.stdout) == 100
    assert done.stderr == b""


# record


def test_record_to_stdout_writes_the_recording_and_says_so_on_stderr(tmp_path: Path) -> None:
    with FakeAgent("normal") as agent:
        result = _run("record", str(agent.pid), "-o", "-")
    assert result.returncode == 0
    assert result.stdout.startswith(MAGIC)
    saved = tmp_path / "run.msgpack"
    saved.write_bytes(result.stdout)
    msgs, info = read_recording(saved)
    assert info.ended and msgs[1]["type"] == m.HELLO and msgs[1]["pid"] == agent.pid
    stream = [msg for msg in msgs if msg["type"] not in (m.RECORDING, m.CHECKPOINT, m.END)]
    assert _said(result).startswith(
        f"iket-tui: recorded {len(stream)} messages from pid {agent.pid} to standard output in "
    )
    assert re.search(r" in \d+(\.\d+)? (ns|µs|ms|s) \(the target exited\)$", _said(result)), _said(result)


def test_record_through_a_pipe_into_another_command(tmp_path: Path) -> None:
    out = tmp_path / "piped.msgpack"
    with FakeAgent("normal") as agent:
        command = " ".join(iket_command("record", str(agent.pid), "-o", "-"))
        done = subprocess.run(f"{command} | cat > {out}", shell=True, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    msgs, info = read_recording(out)
    assert info.ended and msgs[1]["pid"] == agent.pid
    assert done.stdout == ""


def test_record_appended_to_a_file_that_fills_up_keeps_what_the_file_held(tmp_path: Path) -> None:
    """A recording cut short (the file reached its size limit) is cut back to its last whole
    frame, never into what was in the file before it (``>> FILE``)."""
    out = tmp_path / "log"
    before = b"earlier output\n" * 100
    out.write_bytes(before)
    with FakeAgent("endless") as agent, out.open("ab") as appended:
        result = subprocess.run(
            iket_command("record", str(agent.pid), "-o", "-"),
            stdout=appended,
            stderr=subprocess.PIPE,
            text=True,
            timeout=TIMEOUT_S,
            preexec_fn=file_size_limit(50_000),
        )
    assert result.returncode == 2
    summary, stopped = result.stderr.splitlines()
    assert summary.startswith("iket-tui: recorded ") and summary.endswith(" (recording stopped)")
    assert stopped.startswith("iket-tui: recording stopped, file too large: /dev/stdout was cut at byte ")
    data = out.read_bytes()
    assert data.startswith(before + MAGIC)
    cut_at = int(stopped.split("was cut at byte ")[1].split(",")[0])
    assert len(data) - len(before) in range(cut_at, cut_at + 200)  # its end frame, where it fits
    recording = tmp_path / "run.msgpack"
    recording.write_bytes(data[len(before) :])
    msgs, info = read_recording(recording)
    assert info.cut_at is None and info.skipped_bytes == 0 and msgs[1]["pid"] == agent.pid


def test_record_to_stdout_on_a_terminal_is_refused() -> None:
    with FakeAgent("endless") as agent:
        terminal = Terminal("record", str(agent.pid), "-o", "-")
        assert terminal.wait_exit() == 2
    said = terminal.output.decode().strip()
    assert said == (
        "iket-tui: -o - writes a recording to standard output, which is a terminal: "
        "pipe it (| ssh host 'cat > run.msgpack') or redirect it"
    )


def test_a_perfetto_export_to_stdout_on_a_terminal_is_refused() -> None:
    """Perfetto's trace is binary protobuf: on a terminal it would be garbage, so ``-o -`` there
    is refused with nothing written, as ``record`` is; a JSON format is text and still goes."""
    terminal = Terminal("export", str(SAMPLE), "--format", "perfetto", "-o", "-")
    assert terminal.wait_exit() == 2
    said = terminal.output.decode().strip()
    assert said == (
        "iket-tui: -o - writes a Perfetto trace to standard output, which is a terminal: "
        "pipe it (| gzip > trace.perfetto-trace.gz) or redirect it"
    )
    terminal = Terminal("export", str(SAMPLE), "--format", "speedscope", "-o", "-")
    assert terminal.wait_exit() == 0
    assert b'"$schema"' in terminal.output


def test_a_recording_of_a_ui_command_is_never_standard_output() -> None:
    result = run_iket("run", "--no-ui", "--record", "/dev/stdout", "--", "true")
    assert_one_line_error(result, "-o -: only `record`, `export` and `repro` write to standard output")


# repro


def test_repro_to_stdout_is_a_tar_archive_of_the_directory_it_writes(tmp_path: Path) -> None:
    recording = failed_compile_recording(tmp_path / "failed.msgpack")
    assert run_iket("repro", str(recording), "-o", str(tmp_path / "repro")).returncode == 0
    result = _run("repro", str(recording), "-o", "-")
    assert result.returncode == 0
    assert _said(result) == (
        "iket-tui: wrote a reproducer of compile 2 (tl.LayoutInference) to standard output, a tar archive of "
        "iket-repro-c2/: python iket-repro-c2/repro.py runs tl.LayoutInference on the module it was given"
    )
    with tarfile.open(fileobj=io.BytesIO(result.stdout)) as archive:
        members = {member.name: member for member in archive.getmembers()}
        assert sorted(members) == [
            "iket-repro-c2",
            "iket-repro-c2/before.py",
            "iket-repro-c2/module.json",
            "iket-repro-c2/repro.py",
        ]
        assert members["iket-repro-c2"].isdir()
        for name in ("before.py", "module.json", "repro.py"):
            extracted = archive.extractfile(members[f"iket-repro-c2/{name}"])
            assert extracted is not None
            assert extracted.read() == (tmp_path / "repro" / name).read_bytes()


def test_repro_to_stdout_unpacks_with_tar_elsewhere(tmp_path: Path) -> None:
    recording = failed_compile_recording(tmp_path / "failed.msgpack")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    command = " ".join(iket_command("repro", str(recording), "-o", "-"))
    done = subprocess.run(
        f"{command} | tar -x -C {elsewhere}", shell=True, capture_output=True, text=True, timeout=TIMEOUT_S
    )
    assert done.returncode == 0, done.stderr
    assert (elsewhere / "iket-repro-c2" / "module.json").read_text() == '{"root": 1}'
    assert "python iket-repro-c2/repro.py" in done.stderr


def test_repro_to_stdout_on_a_terminal_is_refused(tmp_path: Path) -> None:
    recording = failed_compile_recording(tmp_path / "failed.msgpack")
    terminal = Terminal("repro", str(recording), "-o", "-")
    assert terminal.wait_exit() == 2
    said = terminal.output.decode().strip()
    assert said == (
        "iket-tui: -o - writes a tar archive to standard output, which is a terminal: pipe it (| tar -x) or redirect it"
    )


# A standard output that cannot be written: full (/dev/full, a full disk) or closed (>&-)


def _close_stdout() -> None:
    os.close(1)


def _with_stdout(how: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``iket-tui ARGS`` with standard output on ``/dev/full`` or closed; never a traceback."""
    with open("/dev/full", "wb") as full:
        result = subprocess.run(
            iket_command(*args),
            stdout=full if how == "full" else None,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=TIMEOUT_S,
            preexec_fn=_close_stdout if how == "closed" else None,
        )
    assert_no_traceback(result.stderr)
    return result


STDOUT_SAYS = {"full": "No space left on device", "closed": "standard output is closed"}


@pytest.fixture
def python_agent(runtime_dir: Path) -> Iterator[int]:
    """A plain Python program running the agent; its pid."""
    program = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"],
        env={**os.environ, "IKET_TUI": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: any(path.name.startswith(f"{program.pid}-") for path in runtime_dir.glob("*/*.sock")))
        yield program.pid
    finally:
        program.kill()
        program.wait()


@pytest.mark.parametrize("how", ["full", "closed"])
@pytest.mark.parametrize(
    "command",
    [("dump", str(SAMPLE)), ("ls",), ("completion", "bash"), ("--help",), ("export", "--help")],
    ids=["dump", "ls", "completion", "help", "export help"],
)
def test_text_to_a_standard_output_that_cannot_take_it_is_one_line(how: str, command: tuple[str, ...]) -> None:
    result = _with_stdout(how, *command)
    assert_one_line_error(result, STDOUT_SAYS[how])


@pytest.mark.parametrize("how", ["full", "closed"])
def test_stacks_to_a_standard_output_that_cannot_take_them_is_one_line(how: str, python_agent: int) -> None:
    assert_one_line_error(_with_stdout(how, "stacks", str(python_agent)), STDOUT_SAYS[how])


@pytest.mark.parametrize("how", ["full", "closed"])
@pytest.mark.parametrize("command", ["export", "repro", "record"])
def test_bytes_to_a_standard_output_that_cannot_take_them_are_one_line(how: str, command: str, tmp_path: Path) -> None:
    recording = failed_compile_recording(tmp_path / "failed.msgpack")
    if command == "record":
        with FakeAgent("normal") as agent:
            result = _with_stdout(how, "record", str(agent.pid), "-o", "-")
    else:
        result = _with_stdout(how, command, str(recording), "-o", "-")
    full = "No space left on device" if command != "record" else "the disk is full"
    assert_one_line_error(result, full if how == "full" else STDOUT_SAYS[how])


@pytest.mark.parametrize("how", ["full", "closed"])
def test_a_recording_whose_summary_cannot_be_printed_is_whole_and_says_so(how: str, tmp_path: Path) -> None:
    out = tmp_path / "run.msgpack"
    with FakeAgent("normal") as agent:
        result = _with_stdout(how, "record", str(agent.pid), "-o", str(out))
    assert_one_line_error(result, STDOUT_SAYS[how])
    msgs, info = read_recording(out)
    assert info.ended and msgs[1]["pid"] == agent.pid
