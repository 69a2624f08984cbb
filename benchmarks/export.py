"""Export of a 1,000,000-event recording to a Chrome trace, a speedscope profile and a Perfetto
trace, each run in a fresh subprocess.

The recording is the replay benchmark's (``benchmarks.replay.write_recording``): back-to-back
compiles shaped like a TileLang GEMM lowering, written as ``iket-tui record`` writes them. The
same compiles are also exported as the recording of :data:`PROCESSES` ranks that ``attach``
writes (:func:`write_processes_recording`), each process a trace process of its own.
Each child imports what ``iket-tui export`` imports, then runs one task and reports its wall
time (the task alone, not the interpreter's start) and its peak resident memory. The baseline
child imports the same and does nothing; reading the recording alone (decoding every frame in
the export's chunks, applying nothing) is the time baseline.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.replay import FRAME, PASS_EVENTS, write_recording
from benchmarks.results import Figure
from iket_tui.model import synthetic
from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import encode_batch
from iket_tui.sources.merged import SharedRecording
from iket_tui.sources.recorder import RecordingWriter

PROCESSES = 8
"""Ranks of the recording of several processes."""
FORMAT_NAMES = {"speedscope": "speedscope profile", "perfetto": "Perfetto trace"}

CHILD = """
import json, resource, sys, time
from pathlib import Path
from iket_tui.cli import main
from iket_tui.export import READ_CHUNK, ChromeStream
from iket_tui.sources.reading import RecordingReader
task, recording, out, report, fmt = sys.argv[1:6]
t0, c0 = time.perf_counter(), time.process_time()
if task == "export":
    code = main(["export", recording, "-o", out, "--format", fmt])
    assert code == 0, code
elif task == "read":
    sum(len(chunk) for chunk in RecordingReader(Path(recording), rows=True, chunk_size=READ_CHUNK).chunks())
elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
Path(report).write_text(json.dumps({"s": elapsed, "cpu": cpu, "peak": peak}))
"""


def _child(task: str, recording: Path, out: Path, tmp: Path, fmt: str = "chrome") -> tuple[float, float, int]:
    report = tmp / f"{task}.json"
    subprocess.run(
        [sys.executable, "-c", CHILD, task, str(recording), str(out), str(report), fmt],
        check=True,
        stderr=subprocess.DEVNULL,
    )
    found = json.loads(report.read_text())
    return float(found["s"]), float(found["cpu"]), int(found["peak"])


def write_processes_recording(path: Path, processes: int = PROCESSES) -> None:
    """The benchmark's compiles as the recording of ``processes`` ranks (compile N in rank
    N mod ``processes``), written as ``attach`` writes several processes: each process's frames
    of ``FRAME`` messages, each run of them after a ``process`` frame naming it."""
    writer = RecordingWriter(path, source="benchmark")
    shared = SharedRecording(writer)
    hellos = [
        m.hello(
            role="agent",
            pid=5000 + rank,
            start_time=rank,
            software_version="0.1.0",
            capabilities=[m.CAP_PASSES],
            argv=["python", "train.py"],
            rank=rank,
        )
        for rank in range(processes)
    ]
    sinks = [shared.frames_of(functools.partial(_same, hello)) for hello in hellos]
    pending: list[list[m.Message]] = [[hello] for hello in hellos]
    for msg in synthetic.bulk(PASS_EVENTS):
        rank = int(msg["compile"]) % processes
        pending[rank].append(msg)
        if len(pending[rank]) == FRAME:
            sinks[rank](encode_batch(pending[rank]), pending[rank])
            pending[rank] = []
    for sink, rest in zip(sinks, pending, strict=True):
        if rest:
            sink(encode_batch(rest), rest)
    writer.close("benchmark")


def _same(hello: m.Message) -> m.Message:
    return hello


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
        ranks = tmp / "ranks.msgpack"
        write_processes_recording(ranks)
        ranks_read_s, ranks_read_cpu, _ = _child("read", ranks, tmp / "none", tmp)
        ranks_s, ranks_cpu, ranks_peak = _child("export", ranks, tmp / "ranks.json", tmp)
        others = {
            fmt: (*_child("export", recording, tmp / f"trace.{fmt}", tmp, fmt), (tmp / f"trace.{fmt}").stat().st_size)
            for fmt in ("speedscope", "perfetto")
        }
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
        Figure(
            f"export 1M pass events of {PROCESSES} processes to a Chrome trace",
            ranks_s,
            "s",
            3.0,
            f"reading alone {ranks_read_s:.2f} s, so {ranks_s / ranks_read_s:.1f} x reading (CPU {ranks_cpu:.2f} s, "
            f"{ranks_cpu / ranks_read_cpu:.1f} x reading's); {(ranks_peak - base_peak) / 1e6:.0f} MB above baseline",
        ),
    ] + [
        figure
        for fmt, (seconds, cpu, peak, size) in others.items()
        for figure in (
            Figure(
                f"export 1M pass events to a {FORMAT_NAMES[fmt]}",
                seconds,
                "s",
                None,
                f"file {size / 1e6:.0f} MB; {seconds / read_s:.1f} x reading alone (CPU {cpu:.2f} s, "
                f"{cpu / read_cpu:.1f} x reading's)",
            ),
            Figure(
                f"export 1M pass events to a {FORMAT_NAMES[fmt]}: peak memory above the interpreter's",
                (peak - base_peak) / 1e6,
                "MB",
                150.0,
                f"peak {peak / 1e6:.0f} MB, baseline {base_peak / 1e6:.0f} MB",
            ),
        )
    ]
