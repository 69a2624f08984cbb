"""``iket-tui diff`` of two recordings of 1,000,000 pass events each, run in a fresh subprocess.

Both recordings are the replay benchmark's (``benchmarks.replay.write_recording``): back-to-back
compiles shaped like a TileLang GEMM lowering, the second with every compile's
``tl.LayoutInference`` stretched, so that every compile is matched and every pair flags a pass.
The child imports what ``iket-tui diff`` imports, then runs the command (its output to
/dev/null) and reports its wall time (the command alone, not the interpreter's start), its CPU
time and peak resident memory and those of the process it forks to read the second recording;
the memory figure is what both hold above the interpreter's own (the baseline child imports the
same and does nothing), counted once for each. Reading both
recordings alone, decoding every frame and applying nothing, is the time baseline.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from benchmarks.replay import PASS_EVENTS, write_messages
from benchmarks.results import Figure
from iket_tui.model import synthetic
from iket_tui.protocol import messages as m

CHILD = """
import json, resource, sys, time
from pathlib import Path
from iket_tui.cli import main
from iket_tui.cli.diff import read_summaries
from iket_tui.export import READ_CHUNK
from iket_tui.sources.reading import RecordingReader
task, a, b, report = sys.argv[1:5]
t0, c0 = time.perf_counter(), time.process_time()
if task == "diff":
    code = main(["diff", a, b])
    assert code == 1, code
elif task == "read":
    for path in (a, b):
        sum(len(chunk) for chunk in RecordingReader(Path(path), rows=True, chunk_size=READ_CHUNK).chunks())
elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
children = resource.getrusage(resource.RUSAGE_CHILDREN)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
Path(report).write_text(json.dumps({
    "s": elapsed, "cpu": cpu + children.ru_utime + children.ru_stime, "peak": peak,
    "child_peak": children.ru_maxrss * 1024,
}))
"""
SLOWED = "tl.LayoutInference"


def _slowed(pass_events: int) -> Iterator[m.Message]:
    """The benchmark's compiles with ``SLOWED`` ending later by a quarter of a second in each:
    every later message of the compile moves with it, as a slower pass moves a real compile."""
    shift = 0
    for msg in synthetic.bulk(pass_events):
        if msg["type"] == m.COMPILE_BEGIN:
            shift = 0
        if msg["type"] in m.PASS_EVENTS and msg.get("name") == SLOWED and msg["type"] != m.PASS_START:
            shift = 250_000_000
            msg = {**msg, "duration_ns": int(msg["duration_ns"]) + shift}
        if shift and "t_ns" in msg:
            msg = {**msg, "t_ns": int(msg["t_ns"]) + shift}
            if msg["type"] == m.COMPILE_END:
                msg["duration_ns"] = int(msg["duration_ns"]) + shift
        yield msg


def _child(task: str, a: Path, b: Path, tmp: Path) -> tuple[float, float, int, int]:
    report = tmp / f"{task}.json"
    subprocess.run(
        [sys.executable, "-c", CHILD, task, str(a), str(b), str(report)],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    found = json.loads(report.read_text())
    return float(found["s"]), float(found["cpu"]), int(found["peak"]), int(found["child_peak"])


def run() -> list[Figure]:
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        a, b = tmp / "a.msgpack", tmp / "b.msgpack"
        write_messages(a, synthetic.bulk(PASS_EVENTS))
        write_messages(b, _slowed(PASS_EVENTS))
        size_mb = (a.stat().st_size + b.stat().st_size) / 1e6
        _, _, base_peak, _ = _child("baseline", a, b, tmp)
        read_s, read_cpu, _, _ = _child("read", a, b, tmp)
        diff_s, diff_cpu, diff_peak, reader_peak = _child("diff", a, b, tmp)
    above = (diff_peak - base_peak) + max(0, reader_peak - base_peak)
    return [
        Figure(
            "diff of two recordings of 1M pass events each",
            diff_s,
            "s",
            3.0,
            f"recordings {size_mb:.0f} MB together, the second read in a forked process; reading both alone, "
            f"one after the other, {read_s:.2f} s (CPU {read_cpu:.2f} s); the diff's CPU {diff_cpu:.2f} s, "
            f"the forked reader's included",
        ),
        Figure(
            "diff of two recordings of 1M pass events each: peak memory above the interpreter's",
            above / 1e6,
            "MB",
            150.0,
            f"peak {diff_peak / 1e6:.0f} MB, the forked reader's {reader_peak / 1e6:.0f} MB, "
            f"baseline {base_peak / 1e6:.0f} MB",
        ),
    ]
