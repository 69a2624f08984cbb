"""The Chrome trace written while the recording is read: compiles written as they end, in
bounded memory, the same events as the whole-session document, gzip by the name's suffix."""

from __future__ import annotations

import gc
import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from export_helpers import EXAMPLE, SMALL_TABLE

from iket_tui.cli import main
from iket_tui.export import ChromeStream, ExportError, chrome_trace, recording_session
from iket_tui.export import stream as stream_module
from iket_tui.model import synthetic
from iket_tui.model.nodes import PassNode
from iket_tui.protocol import messages as m
from iket_tui.ring.buffer import MappedRing
from iket_tui.ring.cpu_producer import WarpWriter
from iket_tui.ring.drain import RingDrain
from iket_tui.ring.layout import RingGeometry
from iket_tui.ring.wire import kernel_module, kernel_records
from iket_tui.sources.reading import read_recording


def test_each_compile_is_written_when_it_ends_and_then_forgotten() -> None:
    stream_messages = synthetic.live_stream(compiles=3, fail=(), running="tl.LayoutInference", running_for_ns=10**9)
    ends = [index for index, msg in enumerate(stream_messages) if msg["type"] == m.COMPILE_END]
    assert len(ends) == 2  # the third compile is still running when the recording ends
    written: list[bytes] = []
    stream = ChromeStream(written.append)
    stream.feed(stream_messages[: ends[0]])
    assert written == []
    stream.feed(stream_messages[ends[0] : ends[0] + 1])
    assert b'"name":"thread_name"' in b"".join(written)
    first = stream.session.tree.compiles[0]
    assert (first.context_order, first.codegen_steps, stream.session.tree.passes) == ([], [], [])
    stream.feed(stream_messages[ends[0] + 1 :])
    count = stream.finish()
    doc = json.loads(b"".join(written))
    whole = json.loads(json.dumps(chrome_trace(recording_session(stream_messages))))
    assert doc == whole
    assert count == sum(1 for event in doc["traceEvents"] if event["ph"] != "M")
    incomplete = [event["name"] for event in doc["traceEvents"] if event.get("args", {}).get("status") == "incomplete"]
    assert incomplete[-1] == "tl.LayoutInference"


def test_a_written_compiles_passes_are_freed_without_the_cycle_collector() -> None:
    """A pass links to its parent and its context, which link back: the stream breaks those
    links when it writes a compile, so that its passes go at once, not at the cycle
    collector's next full sweep, whose cost grows with the recording."""
    stream_messages = synthetic.live_stream(compiles=4, fail=(), running="tl.LayoutInference", running_for_ns=10**9)
    stream = ChromeStream(lambda data: None)
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        stream.feed(stream_messages)
        open_passes = sum(
            len(ctx.passes)
            for comp in stream.session.tree.compiles
            if comp.end_ns is None
            for ctx in comp.context_order
        )
        alive = sum(1 for obj in gc.get_objects() if isinstance(obj, PassNode))
    finally:
        if was_enabled:
            gc.enable()
    assert open_passes > 0  # the running compile's passes, not yet written
    assert alive == open_passes


def test_nothing_is_written_for_a_recording_with_nothing_to_show() -> None:
    written: list[bytes] = []
    stream = ChromeStream(written.append)
    stream.feed([synthetic.agent_hello()])
    with pytest.raises(ExportError, match="no compile and no kernel launch"):
        stream.finish()
    assert written == []


def test_a_gz_name_gets_a_gzip_stream_of_the_same_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], example_chrome: Any
) -> None:
    out = tmp_path / "trace.json.gz"
    assert main(["export", str(EXAMPLE), "-o", str(out)]) == 0
    assert capsys.readouterr().err.startswith("iket-tui: wrote ")
    written = json.loads(gzip.decompress(out.read_bytes()))
    assert written["traceEvents"] == example_chrome["traceEvents"]
    assert [path.name for path in tmp_path.iterdir()] == ["trace.json.gz"]  # no private file left behind


def test_standard_output_gets_the_trace(capfd: pytest.CaptureFixture[str], example_chrome: Any) -> None:
    assert main(["export", str(EXAMPLE), "-o", "-"]) == 0
    captured = capfd.readouterr()
    assert json.loads(captured.out)["traceEvents"] == example_chrome["traceEvents"]
    assert captured.err.endswith("events to standard output\n")


def _never() -> int:
    raise AssertionError("every event time is given")


WAITING = EXAMPLE.with_name("h200-demo-waiting.msgpack")


def _streamed_kernels(messages: list[m.Message], chunk: int) -> tuple[list[bytes], ChromeStream, list[bool], list[int]]:
    """The Chrome trace of ``messages`` fed ``chunk`` at a time, and after each chunk whether the
    model held any event of a launch none of whose warps was running then, and the most events
    a running launch held in the model."""
    written: list[bytes] = []
    stream = ChromeStream(written.append)
    held_done: list[bool] = []
    held_running: list[int] = []
    for at in range(0, len(messages), chunk):
        stream.feed(messages[at : at + chunk])
        launches = [
            launch for t in stream.session.kernel_processes.timelines.values() for launch in t.launches.values()
        ]
        held_done.append(any(launch.parts for launch in launches if not launch.running))
        held_running.append(max((sum(map(len, launch.parts)) for launch in launches if launch.running), default=0))
    return written, stream, held_done, held_running


def test_a_launch_s_events_leave_the_model_once_its_warps_ended_and_the_trace_is_unchanged() -> None:
    """The kernel events of a launch whose warps all ended are let go by the model (kept on disk
    until the launches are written), so that memory is bounded by the launches running, not by
    the recording; the trace is the whole session's, event for event."""
    messages, _ = read_recording(WAITING)
    written, stream, held_done, _ = _streamed_kernels(messages, 16)
    timelines = list(stream.session.kernel_processes.timelines.values())
    launches = [launch for timeline in timelines for launch in timeline.launches.values()]
    assert len(launches) == 4 and sum(launch.records for launch in launches) == 4 * 42_240
    assert not any(held_done)
    assert [launch.parts for launch in launches] == [[]] * 4
    assert sum(timeline.retained for timeline in timelines) == 0
    assert sum(timeline.evicted_launches for timeline in timelines) == 0
    count = stream.finish()
    doc = json.loads(b"".join(written))
    whole = json.loads(json.dumps(chrome_trace(recording_session(messages))))
    assert doc == whole
    assert count == sum(1 for event in doc["traceEvents"] if event["ph"] != "M")


def test_a_long_running_launch_moves_its_events_out_in_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """A launch that runs on (block (3,0) waits 4 s) keeps at most a bounded number of events in
    the model; the pieces are joined again, in arrival order, when the launch is written."""
    monkeypatch.setattr(stream_module, "LAUNCH_KEPT_MAX", 1000)
    messages, _ = read_recording(WAITING)
    written, stream, _, held_running = _streamed_kernels(messages, 1)
    assert max(held_running) < 1000
    waiting = max(
        (launch for t in stream.session.kernel_processes.timelines.values() for launch in t.launches.values()),
        key=lambda launch: launch.key[3],
    )
    assert waiting.key[3] == 6 and waiting.parts == [] and waiting.records == 42_240
    stream.finish()
    doc = json.loads(b"".join(written))
    whole = json.loads(json.dumps(chrome_trace(recording_session(messages))))
    assert doc == whole


def test_records_of_a_launch_that_come_after_its_warps_all_ended_join_it(tmp_path: Path) -> None:
    """A grid larger than the GPU runs in waves: between two drains every warp that began may have
    ended, so the launch looks done and its events leave the model; the next wave's records
    join them, and the launch is written whole, as the whole session writes it."""
    ring = MappedRing.create(tmp_path / "ring", RingGeometry(64, 256))
    try:
        common: dict[str, Any] = {"module": 1, "launch": 7, "clock": _never}
        with WarpWriter(ring.view, warp=0, start_ns=1000, block=(0, 0, 0), **common) as warp:
            warp.event(1, t_ns=1000)
            warp.end(t_ns=1100)
        drain = RingDrain(ring.view)
        first = drain.drain()
        with WarpWriter(ring.view, warp=0, start_ns=2000, block=(1, 0, 0), **common) as warp:
            warp.event(1, t_ns=2000)
            warp.event(2, 2.5, t_ns=2050)
            warp.end(t_ns=2100)
        second = drain.drain()
        messages = [
            kernel_module(SMALL_TABLE, ring_id=first.ring_id, layout=first.layout, t_ns=0),
            kernel_records(first, t_ns=1),
            kernel_records(second, t_ns=2),
        ]
    finally:
        ring.close()
    written: list[bytes] = []
    stream = ChromeStream(written.append)
    stream.feed(messages[:2])
    (launch,) = stream.session.kernels.launches.values()
    assert (launch.running, launch.parts, launch.records) == (False, [], 2)
    stream.feed(messages[2:])
    assert launch.parts == [] and launch.records == 5
    stream.finish()
    doc = json.loads(b"".join(written))
    assert doc == json.loads(json.dumps(chrome_trace(recording_session(messages))))
    assert doc["otherData"]["launches"][0]["grid"] == [2, 1, 1]
    ranges = [event for event in doc["traceEvents"] if event.get("cat") == "range"]
    assert [event["name"] for event in ranges] == ["outer", "outer"]
    assert len({event["tid"] for event in ranges}) == 2, "a thread per block's warp"
    assert [event["name"] for event in doc["traceEvents"] if event.get("cat") == "mark"] == ["tick"]


def test_events_moved_to_disk_leave_the_model_s_counts_true(monkeypatch: pytest.MonkeyPatch) -> None:
    """Events the export keeps on disk are taken out through the timeline, so that what each
    launch and timeline count as held is what they hold (a launch summarised later would
    otherwise take its spooled rows off the count again); the export's session summarises no
    launch, since a summarised launch drops the records that come after."""
    monkeypatch.setattr(stream_module, "LAUNCH_KEPT_MAX", 1000)
    messages, _ = read_recording(WAITING)
    stream = ChromeStream(lambda data: None)
    for at in range(0, len(messages), 4):
        stream.feed(messages[at : at + 4])
        for timeline in stream.session.kernel_processes.timelines.values():
            held = [sum(map(len, launch.parts)) for launch in timeline.launches.values()]
            assert [launch.rows for launch in timeline.launches.values()] == held
            assert timeline.retained == sum(held)
            assert timeline.max_events == stream_module.UNBOUNDED
    stream.finish()
