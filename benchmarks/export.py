"""Export of a 1,000,000-event recording to a Chrome trace, each run in a fresh subprocess.

The recording is the replay benchmark's (``benchmarks.replay.write_recording``): back-to-back
compiles shaped like a TileLang GEMM lowering, written as ``iket-tui record`` writes them.
Each child imports what ``iket-tui export`` imports, then runs one task and reports its wall
time (the task alone, not the interpreter's start) and its peak resident memory. The baseline
child imports the same and does nothing; reading the recording alone (decoding every frame in
the export's chunks, applying nothing) is the time baseline.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.replay import write_recording
from benchmarks.results import Figure

CHILD = """
import json, resource, sys, time
from pathlib import Path
from iket_tui.cli import main
from iket_tui.export import READ_CHUNK, ChromeStream
from iket_tui.sources.reading import RecordingReader
task, recording, out, report = sys.argv[1:5]
t0, c0 = time.perf_counter(), time.process_time()
if task == "export":
    code = main(["export", recording, "-o", out])
    assert code == 0, code
elif task == "read":
    sum(len(chunk) for chunk in RecordingReader(Path(recording), rows=True, chunk_size=READ_CHUNK).chunks())
elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
Path(report).write_text(json.dumps({"s": elapsed, "cpu": cpu, "peak": peak}))
"""


def _child(task: str, recording: Path, out: Path, tmp: Path) -> tuple[float, float, int]:
    report = tmp / f"{task}.json"
    subprocess.run(
        [sys.executable, "-c", CHILD, task, str(recording), str(out), str(report)],
        check=True,
        stderr=subprocess.DEVNULL,
    )
    found = json.loads(report.read_text())
    return float(found["s"]), float(found["cpu"]), int(found["peak"])


def run() -> list[Figure]:
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        recording = tmp / "bench.msgpack"
        write_recording(recording)
        size_mb = recording.stat().st_size / 1e6
        _, _, base_peak = _child("baseline", recording, tmp / "none", tmp)
        read_s, read_cpu, _ = _child("read", recording, tmp / "none", tmp)
        trace = tmp / "trace.json"
        export_s, export_cpu, export_peak = _child("export", recording, trace, tmp)
        trace_mb = trace.stat().st_size / 1e6
        gz_s, _, gz_peak = _child("export", recording, tmp / "trace.json.gz", tmp)
        gz_mb = (tmp / "trace.json.gz").stat().st_size / 1e6
    grew_mb = (export_peak - base_peak) / 1e6
    detail = (
        f"recording {size_mb:.0f} MB, trace {trace_mb:.0f} MB; reading alone {read_s:.2f} s, so "
        f"{export_s / read_s:.1f} x reading (CPU {export_cpu:.2f} s, {export_cpu / read_cpu:.1f} x reading's); "
        f"to .json.gz {gz_s:.2f} s, {gz_mb:.0f} MB, {(gz_peak - base_peak) / 1e6:.0f} MB above baseline"
    )
    return [
        Figure("export 1M pass events to a Chrome trace", export_s, "s", 3.0, detail),
        Figure(
            "export 1M pass events: peak memory above the interpreter's",
            grew_mb,
            "MB",
            150.0,
            f"peak {export_peak / 1e6:.0f} MB, baseline {base_peak / 1e6:.0f} MB",
        ),
    ]
