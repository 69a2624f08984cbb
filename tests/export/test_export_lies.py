"""``iket-tui export`` of a recording that lies (written by the recorder, then lying frames
among the honest ones): the lies are counted as malformed and said, and no file shows them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from iket_tui.protocol import messages as m
from iket_tui.sources.recorder import RecordingWriter


def _lying_recording(path: Path) -> Path:
    writer = RecordingWriter(path, source="pid 4242: python honest.py")
    writer.write(
        m.hello(role="agent", pid=4242, start_time=99, software_version="0.1", capabilities=["passes"], t_ns=1)
        | {"argv": ["python", "honest.py"]}
    )
    writer.write(m.compile_begin(compile=1, label="stage=jit-lower, kernel=k", kernel="k", target="cuda", t_ns=10))
    writer.write(m.heartbeat(t_ns=15, produced=2, dropped=2**63, open_passes=0))  # more than could ever be produced
    liar = m.hello(role="agent", pid=666, start_time=7, software_version="9.9", capabilities=["passes"], t_ns=16)
    writer.write(liar | {"proto": [2, 0], "argv": ["python", "liar.py"]})  # another process, another protocol
    writer.write(m.compile_end(compile=1, label="stage=jit-lower, kernel=k", t_ns=30, duration_ns=20, ok=True))
    writer.close("target exited")
    return path


def test_an_export_of_a_lying_recording_says_the_lies_and_shows_none(tmp_path: Path) -> None:
    recording = _lying_recording(tmp_path / "lies.msgpack")
    trace = tmp_path / "lies.perfetto-trace"
    done = subprocess.run(
        [sys.executable, "-m", "iket_tui", "export", str(recording), "--format", "perfetto", "-o", str(trace)],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == (
        f"iket-tui: {recording}: skipped 2 malformed messages"
        " (missing or impossible fields, e.g. a damaged kernel batch)"
    )
    data = trace.read_bytes()
    assert b"honest.py" in data  # the process as its own agent named it
    assert b"liar.py" not in data
