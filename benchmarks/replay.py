"""Replay of a 1,000,000-event recording: into the model alone, and into the app until idle.

The recording holds back-to-back compiles shaped like a real TileLang GEMM lowering
(``iket_tui.model.synthetic``), batched as the agent batches them (pass events as pass rows)
and written by the same writer ``iket-tui record`` uses. It is read as replay reads it, pass
rows kept as rows. The baseline is reading and decoding the file without applying anything,
in the same run; each figure is a ratio to it. Two floors beside them: what any model that
keeps one Python object per pass costs at least (reading and decoding, plus one dispatch and
one ``PassNode`` per pass start kept in a dict, and two attributes set per pass end), and what
one that keeps none costs at least (each pass's start and end time appended to an array).
"""

from __future__ import annotations

import asyncio
import gc
import tempfile
import time
from array import array
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from benchmarks.results import Figure
from iket_tui.model import synthetic
from iket_tui.model.collector import tune_for_large_trees
from iket_tui.model.nodes import CompileNode, ContextNode, PassNode
from iket_tui.model.session import Session
from iket_tui.protocol.codec import encode_batch
from iket_tui.protocol.messages import Message
from iket_tui.sources.reading import RecordingReader
from iket_tui.sources.recorder import RecordingWriter

PASS_EVENTS = 1_000_000
FRAME = 16  # messages per frame: fewer than the agent sends for the demo's compiles (49 on average)


def write_recording(path: Path, pass_events: int = PASS_EVENTS, frame: int = FRAME) -> int:
    """Write the benchmark recording, ``frame`` messages to a frame as the agent batches them;
    returns the number of messages in it."""
    return write_messages(path, synthetic.bulk(pass_events), frame)


def write_messages(path: Path, messages: Iterable[Message], frame: int = FRAME) -> int:
    """``messages`` after an agent's hello, as ``iket-tui record`` writes them, ``frame`` to a
    frame; returns the number of messages written."""
    writer = RecordingWriter(path, source="benchmark")
    writer.write(synthetic.agent_hello())
    pending: list[Message] = []
    for msg in messages:
        pending.append(msg)
        if len(pending) == frame:
            writer.write_frames(encode_batch(pending), pending)
            pending = []
    if pending:
        writer.write_frames(encode_batch(pending), pending)
    writer.close("benchmark")
    return writer.messages


def _decode_only(path: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    count = sum(len(chunk) for chunk in RecordingReader(path, rows=True).chunks())
    return time.perf_counter() - t0, count


def _into_model(path: Path) -> tuple[float, Session]:
    t0 = time.perf_counter()
    session = Session()
    for chunk in RecordingReader(path, rows=True).chunks():
        session.apply(chunk)
    return time.perf_counter() - t0, session


def _floor(path: Path) -> float:
    """Seconds to read and decode ``path`` and keep one ``PassNode`` per pass, with nothing
    else a model does (no checks, no tree, no counters)."""
    context = ContextNode(CompileNode(0, 0, 0, 0), 0, 0, 0)
    passes: dict[tuple[int, int, int], PassNode] = {}

    def start(row: Any) -> None:
        _, compile_id, context_id, name, seq, depth, _, phase, t, _ = row
        passes[compile_id, context_id, seq] = PassNode(name, seq, depth, phase, t, None, context, 0)

    def end(row: Any) -> None:
        node = passes[row[1], row[2], row[4]]
        node.end_ns = row[8]
        node.duration_ns = row[9]

    return _read_applying(path, start, end)


def _packed_floor(path: Path) -> float:
    """Seconds to read and decode ``path`` and append each pass's start and end to an array,
    with nothing else (what a model that keeps no object per pass costs at least)."""
    packed = array("q")

    def start(row: Any) -> None:
        packed.append(row[8])

    def end(row: Any) -> None:
        packed.append(row[9])

    return _read_applying(path, start, end)


def _read_applying(path: Path, start: Callable[[Any], None], end: Callable[[Any], None]) -> float:
    t0 = time.perf_counter()
    collecting = gc.isenabled()
    gc.disable()  # as Session.apply does
    handlers = {"pass_start": start, "pass_end": end}
    for chunk in RecordingReader(path, rows=True).chunks():
        for msg in chunk:
            if type(msg) is list:
                handler = handlers.get(msg[0])
                if handler is not None:
                    handler(msg)
    if collecting:
        gc.enable()
    return time.perf_counter() - t0


async def _into_app(path: Path) -> float:
    from iket_tui.sources.base import SourceState
    from iket_tui.sources.replay import RecordingSource
    from iket_tui.ui.app import IketApp

    app = IketApp(RecordingSource(path, speed=0.0))
    t0 = time.perf_counter()
    async with app.run_test(size=(160, 48)) as pilot:
        while app.source_state is not SourceState.ENDED:
            await pilot.pause(0.01)
        await pilot.wait_for_scheduled_animations()
        await app.workers.wait_for_complete()
        await pilot.pause()
        elapsed = time.perf_counter() - t0
    return elapsed


def run() -> list[Figure]:
    tune_for_large_trees()  # as the app does before it reads anything
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.msgpack"
        messages = write_recording(path)
        size_mb = path.stat().st_size / 1e6
        decode_s, _ = _decode_only(path)
        floor_s = _floor(path)
        packed_floor_s = _packed_floor(path)
        model_s, session = _into_model(path)
        applied = session.counters.events
        del session  # the app builds its own; this one would only weigh on its collector
        app_s = asyncio.run(_into_app(path))
    detail = f"{messages} messages in frames of {FRAME}, {size_mb:.0f} MB; reading and decoding alone {decode_s:.2f} s"
    return [
        Figure(
            "replay 1M pass events into the model / reading and decoding",
            model_s / decode_s,
            "x",
            2.0,
            f"{model_s:.2f} s; {detail}",
        ),
        Figure(
            "replay 1M pass events: the floor of one object kept per pass / reading and decoding",
            floor_s / decode_s,
            "x",
            None,
            f"{floor_s:.2f} s",
        ),
        Figure(
            "replay 1M pass events: the floor of each pass appended to an array / reading and decoding",
            packed_floor_s / decode_s,
            "x",
            None,
            f"{packed_floor_s:.2f} s",
        ),
        Figure(
            "replay 1M pass events into the UI until idle / reading and decoding",
            app_s / decode_s,
            "x",
            4.0,
            f"{app_s:.2f} s; {applied} events applied",
        ),
    ]
