"""Recordings of several processes for the export tests, written as ``iket-tui attach PID PID``
writes them: each process's frames go through the merged stream's
:class:`~iket_tui.sources.merged.SharedRecording` (runs of one process's frames, each after a
``process`` frame naming it), its compiles as the agent reports them and its kernel launches
drained from a ring of its own, written by the CPU producer."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from export_helpers import SMALL_TABLE

from iket_tui.model import synthetic
from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import encode_batch
from iket_tui.ring.buffer import MappedRing
from iket_tui.ring.cpu_producer import WarpWriter
from iket_tui.ring.drain import RingDrain
from iket_tui.ring.layout import RingGeometry
from iket_tui.ring.wire import kernel_module, kernel_records
from iket_tui.sources.merged import SharedRecording
from iket_tui.sources.recorder import RecordingWriter


@dataclass
class Watched:
    """One process of the recording and what its agent sent."""

    pid: int
    argv: list[str]
    rank: int | None
    messages: list[m.Message] = field(default_factory=list)
    compiles: list[synthetic.Lowering] = field(default_factory=list)
    ranges: int = 0  # kernel ranges its launch holds
    marks: int = 0  # kernel marks its launch holds

    @property
    def pass_events(self) -> int:
        return sum(1 for msg in self.messages if msg["type"] == m.PASS_START)

    @property
    def codegen_steps(self) -> int:
        return sum(1 for msg in self.messages if msg["type"] == m.CODEGEN_BEGIN)

    @property
    def kernels(self) -> list[str]:
        return [spec.kernel for spec in self.compiles]


def _never() -> int:
    raise AssertionError("every event time is given")


def launch_messages(tmp: Path, name: str, *, warps: int, t_ns: int) -> tuple[list[m.Message], int, int]:
    """Launch 7 of ``small_kernel`` (module 1) in a ring of its own (its own random id), block
    (1,0,0): each of ``warps`` warps with a ``tick`` mark, then ``outer`` holding ``inner``;
    the messages, and how many ranges and marks they hold."""
    ring = MappedRing.create(tmp / f"ring-{name}", RingGeometry(64, 256))
    try:
        for warp in range(warps):
            start = 3200 + 1000 * warp
            with WarpWriter(
                ring.view, warp=warp, start_ns=start, module=1, launch=7, block=(1, 0, 0), clock=_never
            ) as writer:
                writer.event(2, 1.5, t_ns=start)
                writer.event(1, t_ns=start + 32)
                writer.event(3, -5, t_ns=start + 64)
                writer.end(t_ns=start + 96)
                writer.end(t_ns=start + 128)
        batch = RingDrain(ring.view).drain()
        messages = [
            kernel_module(SMALL_TABLE, ring_id=batch.ring_id, layout=batch.layout, t_ns=t_ns, compile=1),
            kernel_records(batch, t_ns=t_ns + 1),
        ]
    finally:
        ring.close()
    return messages, 2 * warps, warps


def processes(tmp: Path) -> list[Watched]:
    """Three processes compiling at overlapping times: pid 5001 (rank 1, two compiles and a launch
    of two warps), pid 5002 (rank 0, three compiles, the second failing, and a launch of one
    warp) and pid 5003 (no rank, one compile, no launch). Agents number compiles each from 1."""
    shapes: list[tuple[int, list[str], int | None, int, tuple[int, ...], int]] = [
        (5001, ["python", "train.py", "--rank", "1"], 1, 2, (), 2),
        (5002, ["python", "train.py", "--rank", "0"], 0, 3, (1,), 1),
        (5003, ["python", "tune.py"], None, 1, (), 0),
    ]
    out: list[Watched] = []
    for index, (pid, argv, rank, count, fail, warps) in enumerate(shapes):
        start = 1_000_000_000 + 7_000_000 * index
        hello = m.hello(
            role="agent",
            pid=pid,
            start_time=100 + index,
            software_version="0.1.0",
            capabilities=[m.CAP_PASSES],
            argv=argv,
            t_ns=start - 1_000_000,
            ppid=4000,
            rank=rank,
        )
        watched = Watched(pid, argv, rank, [hello], synthetic.lowerings(count, start_ns=start, fail=fail))
        for spec in watched.compiles:
            watched.messages += spec.messages()
        if warps:
            launch, watched.ranges, watched.marks = launch_messages(tmp, str(pid), warps=warps, t_ns=start + 1)
            watched.messages += launch
        out.append(watched)
    return out


def interleaved(watched: Sequence[Watched], run: int = 5) -> list[tuple[Watched, list[m.Message]]]:
    """The processes' messages as runs of at most ``run`` messages of one process, in the order
    their runs' first messages were sent (as the merged stream hands out its readers' batches)."""
    runs: list[tuple[int, int, Watched, list[m.Message]]] = []
    for order, one in enumerate(watched):
        msgs = one.messages
        for at in range(0, len(msgs), run):
            chunk = msgs[at : at + run]
            runs.append((int(chunk[0]["t_ns"]), order, one, chunk))
    runs.sort(key=lambda item: (item[0], item[1]))
    return [(one, chunk) for _, _, one, chunk in runs]


def _hello(one: Watched) -> m.Message:
    return one.messages[0]


def write(path: Path, runs: Sequence[tuple[Watched, list[m.Message]]]) -> None:
    """A recording of ``runs`` through the merged stream's writer, as ``attach`` makes it."""
    writer = RecordingWriter(path, source="pids 5001, 5002, 5003")
    shared = SharedRecording(writer)
    for one, chunk in runs:
        shared.frames_of(functools.partial(_hello, one))(encode_batch(chunk), chunk)
    writer.close("end")


def write_frames(path: Path, frames: Sequence[Any]) -> None:
    """A recording of exactly these messages, each written as it is (a lying one included)."""
    writer = RecordingWriter(path, source="test")
    for msg in frames:
        writer.write(msg)
    writer.close("end")
