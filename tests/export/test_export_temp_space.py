"""Where an export keeps events while the recording is read: speedscope, which shows no kernel
event, keeps none (so it needs no room for them), and a temporary directory that fills up is
named as the cause in one line, never blamed on the output."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from export_helpers import EXAMPLE

from iket_tui.export import SpeedscopeStream
from iket_tui.sources.reading import read_recording

WAITING = EXAMPLE.with_name("h200-demo-waiting.msgpack")


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs (root only: skipped elsewhere), unmounted afterwards."""
    where = tmp_path / "small"
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


def _export(fmt: str, out: Path, tmpdir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "iket_tui", "export", str(EXAMPLE), "--format", fmt, "-o", str(out)],
        env={**os.environ, "TMPDIR": str(tmpdir)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_speedscope_lets_kernel_events_go_instead_of_keeping_them() -> None:
    messages, _ = read_recording(WAITING)
    stream = SpeedscopeStream(lambda data: None)
    for at in range(0, len(messages), 4):
        stream.feed(messages[at : at + 4])
        launches = [t for tl in stream.session.kernel_processes.timelines.values() for t in tl.launches.values()]
        assert all(not launch.parts and not launch.rows for launch in launches)
    assert sum(launch.records for launch in launches) == 4 * 42_240  # every record read, none kept
    assert stream.kernel_events._spool._file is None, "no temporary file for kernel events"
    stream.finish()


def test_speedscope_needs_no_room_for_kernel_events(small_tmpfs: Path, tmp_path: Path) -> None:
    out = tmp_path / "profile.json"
    done = _export("speedscope", out, small_tmpfs)
    assert done.returncode == 0, done.stderr
    assert out.stat().st_size > 0


@pytest.mark.parametrize("fmt", ["chrome", "perfetto"])
def test_a_full_temporary_directory_is_named_in_one_line(small_tmpfs: Path, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / "trace.out"
    done = _export(fmt, out, small_tmpfs)
    assert done.returncode == 2
    assert done.stderr == (
        f"iket-tui: {EXAMPLE}: temporary file in {small_tmpfs}: No space left on device;"
        " TMPDIR names another directory\n"
    )
    assert not out.exists() and sorted(tmp_path.iterdir()) == [small_tmpfs]  # nothing left beside it


def test_a_temporary_file_past_the_size_limit_is_named_in_one_line(tmp_path: Path) -> None:
    """The same without root: a file size limit (RLIMIT_FSIZE) stops the spool's writes."""
    script = textwrap.dedent(
        """
        import resource
        from iket_tui.export.stream import Spool, SpoolError
        resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
        spool = Spool()
        try:
            for key in range(100):
                spool.add(key, bytes(4096))
        except SpoolError as exc:
            print(exc)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout == f"temporary file in {tmp_path}: File too large; TMPDIR names another directory\n"
