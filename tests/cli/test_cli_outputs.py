"""Where commands write what a user names (``record -o``, ``--record``, ``export -o``, ``repro -o``):
never through a link planted at that name, never into another user's directory, an existing
file replaced whole; each refusal is one line and exit code 2, before any work."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_helpers import (
    FakeAgent,
    assert_no_traceback,
    assert_one_line_error,
    failed_compile_recording,
    iket_command,
    run_iket,
)

from iket_tui.sources.reading import read_recording

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"
PRECIOUS = "a file the link points to\n"
OTHER_UID = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a directory of another user")


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    return failed_compile_recording(tmp_path / "failed.msgpack")


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file a planted link points to; no command may change it."""
    path = tmp_path / "victim" / "precious.txt"
    path.parent.mkdir()
    path.write_text(PRECIOUS)
    return path


def _plant_link(at: Path, to: Path) -> Path:
    at.symlink_to(to)
    return at


def _foreign_directory(path: Path) -> Path:
    path.mkdir(mode=0o777)
    path.chmod(0o777)
    os.chown(path, OTHER_UID, OTHER_UID)
    return path


def _untouched(victim: Path) -> None:
    assert victim.read_text() == PRECIOUS
    assert sorted(p.name for p in victim.parent.iterdir()) == ["precious.txt"]


def _no_leftovers(directory: Path, *expected: str) -> None:
    assert sorted(p.name for p in directory.iterdir()) == sorted(expected)


@pytest.mark.parametrize("command", ["record", "attach", "run"])
def test_a_link_planted_at_a_recordings_name_is_refused_and_what_it_points_to_is_untouched(
    command: str, tmp_path: Path, victim: Path
) -> None:
    link = _plant_link(tmp_path / "run.msgpack", victim)
    with FakeAgent("normal") as agent:
        argv = {
            "record": ("record", str(agent.pid), "-o", str(link)),
            "attach": ("attach", str(agent.pid), "--record", str(link)),
            "run": ("run", "--no-ui", "--record", str(link), "--", "true"),
        }[command]
        result = run_iket(*argv, timeout=30)
        assert agent.process is not None and agent.process.poll() is None, "connected before refusing"
    assert_one_line_error(result, f"{link}: is a symbolic link (to {victim}): ", "remove it or name another file")
    _untouched(victim)
    assert link.is_symlink()


def test_a_link_planted_at_an_exports_name_is_refused(tmp_path: Path, recording: Path, victim: Path) -> None:
    link = _plant_link(tmp_path / "trace.json", victim)
    assert_one_line_error(run_iket("export", str(recording), "-o", str(link)), f"{link}: is a symbolic link")
    _untouched(victim)


def test_a_link_planted_as_a_reproducers_directory_is_refused(tmp_path: Path, recording: Path, victim: Path) -> None:
    link = _plant_link(tmp_path / "repro", victim.parent)
    assert_one_line_error(run_iket("repro", str(recording), "-o", str(link)), f"{link}: is a symbolic link")
    _untouched(victim)


def test_a_link_planted_inside_a_reproducers_directory_is_refused_before_anything_is_written(
    tmp_path: Path, recording: Path, victim: Path
) -> None:
    out = tmp_path / "repro"
    out.mkdir()
    link = _plant_link(out / "repro.py", victim)
    assert_one_line_error(run_iket("repro", str(recording), "-o", str(out)), f"{link}: is a symbolic link")
    _untouched(victim)
    _no_leftovers(out, "repro.py")


def test_a_hard_link_at_the_output_is_replaced_not_written_through(
    tmp_path: Path, recording: Path, victim: Path
) -> None:
    trace = tmp_path / "trace.json"
    os.link(victim, trace)
    result = run_iket("export", str(recording), "-o", str(trace))
    assert result.returncode == 0, result.stderr
    _untouched(victim)
    assert trace.read_text().startswith("{")
    with FakeAgent("normal") as agent:
        os.link(victim, tmp_path / "run.msgpack")
        assert run_iket("record", str(agent.pid), "-o", str(tmp_path / "run.msgpack")).returncode == 0
    _untouched(victim)
    assert read_recording(tmp_path / "run.msgpack")[1].ended


@needs_root
@pytest.mark.parametrize("command", ["record", "export", "repro into", "repro beside"])
def test_a_directory_of_another_user_is_refused(command: str, tmp_path: Path, recording: Path) -> None:
    foreign = _foreign_directory(tmp_path / "theirs")
    with FakeAgent("normal") as agent:
        argv = {
            "record": ("record", str(agent.pid), "-o", str(foreign / "run.msgpack")),
            "export": ("export", str(recording), "-o", str(foreign / "trace.json")),
            "repro into": ("repro", str(recording), "-o", str(foreign)),
            "repro beside": ("repro", str(recording), "-o", str(foreign / "repro")),
        }[command]
        result = run_iket(*argv)
    assert_one_line_error(result, f"{foreign}: belongs to uid {OTHER_UID}, not to this user (uid 0)")
    _no_leftovers(foreign)


def test_an_existing_file_is_replaced_whole_keeping_its_mode_and_nothing_is_left_beside(
    tmp_path: Path, recording: Path
) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    trace = out_dir / "trace.json"
    trace.write_text("x" * 10_000_000)
    trace.chmod(0o600)
    result = run_iket("export", str(recording), "-o", str(trace))
    assert result.returncode == 0, result.stderr
    assert trace.read_text().startswith('{"traceEvents":') and trace.stat().st_size < 10_000
    assert stat.S_IMODE(trace.stat().st_mode) == 0o600
    repro = out_dir / "repro"
    assert run_iket("repro", str(recording), "-o", str(repro)).returncode == 0
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((repro / "repro.py").stat().st_mode) == 0o666 & ~umask
    assert run_iket("repro", str(recording), "-o", str(repro)).returncode == 0
    _no_leftovers(repro, "before.py", "module.json", "repro.py")
    _no_leftovers(out_dir, "repro", "trace.json")


@pytest.mark.skipif(not Path("/dev/null").exists(), reason="needs /dev/null")
def test_a_device_is_written_in_place(recording: Path) -> None:
    result = run_iket("export", str(recording), "-o", "/dev/null")
    assert (result.returncode, result.stderr) == (0, "iket-tui: wrote 2 events to /dev/null\n")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@needs_root
@pytest.mark.parametrize("command", ["export", "record"])
def test_another_users_fifo_at_the_name_is_refused_and_gets_nothing(
    command: str, recording: Path, tmp_path: Path
) -> None:
    """A FIFO someone else planted (in a shared, sticky directory) would hand them what is
    written: refused like their link would be, and nothing is written into it."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    fifo = shared / "out.json"
    os.mkfifo(fifo, 0o666)
    os.chown(fifo, OTHER_UID, OTHER_UID)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader waiting, as the planter's would
    try:
        if command == "export":
            result = run_iket("export", str(recording), "-o", str(fifo))
        else:
            with FakeAgent("normal") as agent:
                result = run_iket("record", str(agent.pid), "-o", str(fifo), timeout=30)
        assert_one_line_error(result, f"{fifo}: a FIFO of uid {OTHER_UID}, not of this user (uid 0)")
        assert os.read(reader, 1 << 16) == b""  # nothing came: no writer, nothing written
    finally:
        os.close(reader)


def test_a_fifo_that_nobody_reads_is_refused_at_once(recording: Path, tmp_path: Path) -> None:
    """Opening a FIFO for writing waits for a reader: the command says so rather than hanging."""
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    result = run_iket("export", str(recording), "-o", str(fifo), timeout=30)
    assert_one_line_error(result, f"{fifo}: a FIFO that nobody reads: start its reader first")


def test_a_fifo_with_its_reader_gets_the_whole_export(recording: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # there before the export opens it
    got = bytearray()
    try:
        export = subprocess.Popen(
            iket_command("export", str(recording), "-o", str(fifo)), stderr=subprocess.PIPE, text=True
        )
        while True:
            try:
                chunk = os.read(reader, 1 << 16)
            except BlockingIOError:
                chunk = None
            if chunk:
                got.extend(chunk)
            elif export.poll() is not None:
                break
            else:
                time.sleep(0.01)
        _, stderr = export.communicate(timeout=30)
    finally:
        os.close(reader)
    assert export.returncode == 0, stderr
    assert json.loads(got)["traceEvents"]


# An output that is the input


@pytest.mark.parametrize(
    "named", ["the same name", "another spelling", "a hard link", "a symbolic link", "a linked directory"]
)
def test_an_export_onto_its_own_recording_is_refused_and_the_recording_kept(
    named: str, tmp_path: Path, recording: Path
) -> None:
    before = recording.read_bytes()
    output = {
        "the same name": recording,
        "another spelling": tmp_path / "." / recording.name,
        "a hard link": tmp_path / "hard.msgpack",
        "a symbolic link": tmp_path / "soft.msgpack",
        "a linked directory": tmp_path / "here" / recording.name,
    }[named]
    if named == "a hard link":
        os.link(recording, output)
    elif named == "a symbolic link":
        output.symlink_to(recording)
    elif named == "a linked directory":
        output.parent.symlink_to(tmp_path)
    result = run_iket("export", str(recording), "-o", str(output))
    assert_one_line_error(result, f"{output}: is the file being read", "name another output")
    assert recording.read_bytes() == before
    assert read_recording(recording)[1].ended


@pytest.mark.parametrize("command", ["dump", "export", "repro"])
def test_standard_output_appended_to_the_recording_being_read_is_refused(
    command: str, tmp_path: Path, recording: Path
) -> None:
    """``dump X >> X`` would read what it writes, growing the file as long as it reads it."""
    before = recording.read_bytes()
    argv = {"dump": ("dump", str(recording)), "export": ("export", str(recording), "-o", "-")}.get(
        command, ("repro", str(recording), "-o", "-")
    )
    with recording.open("ab") as appended:
        done = subprocess.run(
            iket_command(*argv),
            stdout=appended,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=60,
        )
    assert_one_line_error(done, "standard output is the file being read", "name another output")
    assert recording.read_bytes() == before


def test_a_reproducer_that_would_write_over_its_recording_is_refused_before_anything_is_written(
    tmp_path: Path, recording: Path
) -> None:
    out = tmp_path / "repro"
    out.mkdir()
    named_so = out / "repro.py"
    named_so.write_bytes(recording.read_bytes())
    result = run_iket("repro", str(named_so), "-o", str(out))
    assert_one_line_error(result, f"{named_so}: is the file being read")
    assert named_so.read_bytes() == recording.read_bytes()
    _no_leftovers(out, "repro.py")


# A directory this user may not enter


def _run_as_nobody(argv: tuple[str, ...], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``iket-tui ARGV``, as uid 65534 when this is root (for whom no permission is ever
    denied), through an interpreter that user may run (this one may lie in root's home)."""
    python, env, user = sys.executable, dict(os.environ), None
    if os.geteuid() == 0:
        system = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
        if not system.exists():
            pytest.skip(f"no {system} that another user could run")
        packages = next(path for path in sys.path if path.endswith("site-packages"))
        python, user = str(system), OTHER_UID
        env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2]), packages])
    done = subprocess.run(
        [python, "-m", "iket_tui", *argv],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        cwd=cwd,
        env=env,
        user=user,
        group=user,
        extra_groups=[] if user is not None else None,
    )
    assert_no_traceback(done.stderr)
    return done


@pytest.mark.parametrize("command", ["export", "repro", "record", "run"])
def test_an_output_under_a_directory_this_user_may_not_enter_is_one_line(
    command: str, tmp_path: Path, recording: Path
) -> None:
    tmp_path.chmod(0o755)
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    readable = shared / "failed.msgpack"
    readable.write_bytes(recording.read_bytes())
    readable.chmod(0o644)
    locked = shared / "locked"
    (locked / "inside").mkdir(parents=True)
    if os.geteuid() == 0:
        os.chown(locked, OTHER_UID, OTHER_UID)
    locked.chmod(0o000)
    target = Path("locked", "inside", "out")  # relative: the directories above may be closed to that user too
    argv = {
        "export": ("export", readable.name, "-o", str(target)),
        "repro": ("repro", readable.name, "-o", str(target)),
        "record": ("record", "1", "-o", str(target)),
        "run": ("run", "--no-ui", "--record", str(target), "--", "true"),
    }[command]
    try:
        done = _run_as_nobody(argv, shared)
    finally:
        locked.chmod(0o755)
    assert_one_line_error(done, f"{target}: permission denied: this user may not enter locked")
    assert list((locked / "inside").iterdir()) == []


# FIFOs


def test_run_refuses_a_fifo_that_nobody_reads_before_starting_the_program(tmp_path: Path) -> None:
    fifo = tmp_path / "run.msgpack"
    os.mkfifo(fifo)
    started = tmp_path / "started"
    began = time.monotonic()
    result = run_iket("run", "--no-ui", "--record", str(fifo), "--", "touch", str(started), timeout=60)
    assert_one_line_error(result, f"{fifo}: a FIFO that nobody reads: start its reader first")
    assert not started.exists(), "the program was started"
    assert time.monotonic() - began < 10


def test_an_export_whose_fifo_reader_leaves_says_broken_pipe(tmp_path: Path) -> None:
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["head", "-c", "100", str(fifo)], stdout=subprocess.PIPE)
    try:
        wait_until_opened = time.monotonic() + 30
        result = None
        while time.monotonic() < wait_until_opened:  # head opens the FIFO for reading in its own time
            result = run_iket("export", str(SAMPLE), "-o", str(fifo), timeout=60)
            if "nobody reads" not in result.stderr:
                break
            time.sleep(0.05)
        assert result is not None
        assert_one_line_error(result, f"{fifo}: broken pipe: its reader left before the export was written")
        assert reader.communicate(timeout=30)[0].startswith(b'{"traceEvents":[')
    finally:
        reader.kill()
        reader.wait()
