"""``--format perfetto``: Perfetto's native protobuf trace, decoded back by a small protobuf
reader against the field numbers and wire types of Perfetto's own protos (``perfetto_reader``)
and compared with the session it was made from and with the Chrome export."""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

import pytest
from export_helpers import EXAMPLE
from perfetto_reader import Trace, decode

from iket_tui.cli import main
from iket_tui.export import ExportError, chrome_trace, perfetto_trace, recording_session
from iket_tui.model.session import Session
from iket_tui.protocol import messages as m


@pytest.fixture(scope="module")
def example_session(example_messages: list[m.Message]) -> Session:
    return recording_session(example_messages)


@pytest.fixture(scope="module")
def example_bytes(example_session: Session) -> bytes:
    out = bytearray()
    perfetto_trace(example_session, out.extend)
    return bytes(out)


@pytest.fixture(scope="module")
def example_trace(example_bytes: bytes) -> Trace:
    return decode(example_bytes)


def test_one_process_track_for_the_watched_pid(example_trace: Trace, example_session: Session) -> None:
    processes = [track for track in example_trace.tracks.values() if track.process_name is not None]
    assert len(processes) == 1
    assert processes[0].pid == example_session.tree.process.pid
    assert processes[0].parent is None
    assert processes[0].process_name == example_session.tree.process.command
    assert processes[0].cmdline == list(example_session.tree.process.argv) != []


def test_a_track_per_compile_with_its_passes_nested_at_their_exact_times(
    example_trace: Trace, example_session: Session
) -> None:
    (process,) = [track for track in example_trace.tracks.values() if track.process_name is not None]
    compile_tracks = example_trace.children(process.uuid)
    compiles = example_session.tree.compiles
    assert [track.name for track in compile_tracks] == [f"compile {comp.id}: {comp.title}" for comp in compiles]
    last = example_session.last_t_ns
    passes = codegen_steps = 0
    for track, comp in zip(compile_tracks, compiles, strict=True):
        finish = comp.end_ns if comp.end_ns is not None else last
        expected = [(comp.title, comp.begin_ns, finish)]
        for ctx in comp.context_order:
            stack = list(ctx.roots)
            while stack:
                node = stack.pop()
                expected.append((node.name, node.start_ns, node.end_ns if node.end_ns is not None else finish))
                stack.extend(node.children)
        passes += len(expected) - 1
        assert sorted(example_trace.slices(track)) == sorted(expected)
        assert {category for *_, category in track.events if category is not None} == {"pass"}

        steps = [(step.title, step.begin_ns, step.end_ns) for step in comp.codegen_steps]
        codegen = example_trace.children(track.uuid)
        assert len(codegen) == (1 if steps else 0)
        if steps:
            assert sorted(example_trace.slices(codegen[0])) == sorted(steps)
            assert {category for *_, category in codegen[0].events if category is not None} == {"codegen"}
        codegen_steps += len(steps)
    assert (len(compiles), passes, codegen_steps) == (9, 734, 15)


def test_kernel_tracks_per_launch_block_and_warp_hold_the_chrome_ranges(
    example_trace: Trace, example_session: Session
) -> None:
    chrome = chrome_trace(example_session)["traceEvents"]
    launch_names = {
        event["pid"]: event["args"]["name"]
        for event in chrome
        if event["ph"] == "M" and event["name"] == "process_name" and event["pid"] > 1
    }
    ranges = Counter(event["pid"] for event in chrome if event["ph"] == "X" and event["cat"] == "range")
    marks = Counter(event["pid"] for event in chrome if event["ph"] == "i")
    lanes = Counter(event["pid"] for event in chrome if event["ph"] == "M" and event["name"] == "thread_name")
    launches = [track for track in example_trace.children(None) if track.process_name is None]
    assert [track.name for track in launches] == [launch_names[pid] for pid in sorted(launch_names)]
    assert len(launches) == 3
    for pid, launch in zip(sorted(launch_names), launches, strict=True):
        assert not launch.events
        warps = [warp for block in example_trace.children(launch.uuid) for warp in example_trace.children(block.uuid)]
        assert all(block.name.startswith("block (") for block in example_trace.children(launch.uuid))
        assert all(warp.name.startswith("warp ") and not example_trace.children(warp.uuid) for warp in warps)
        assert len(warps) == lanes[pid]
        assert sum(len(example_trace.slices(warp)) for warp in warps) == ranges[pid] > 0
        assert sum(len(example_trace.instants(warp)) for warp in warps) == marks[pid]


def test_a_small_kernel_keeps_its_unbalanced_ranges_and_marks(small_kernel_stream: list[m.Message]) -> None:
    out = bytearray()
    count = perfetto_trace(recording_session(small_kernel_stream), out.extend)
    trace = decode(bytes(out))
    (launch,) = [track for track in trace.children(None) if track.process_name is None]
    assert launch.name.startswith("small_kernel launch 7 (")
    (block,) = trace.children(launch.uuid)
    assert block.name == "block (1,0,0)"
    warp0, warp1 = trace.children(block.uuid)
    names0 = sorted(name for name, _, _ in trace.slices(warp0))
    assert names0 == ["(range end without a start)", "inner", "outer", "outer"]
    assert [name for name, _ in trace.instants(warp0)] == ["tick"]
    assert [name for name, _, _ in trace.slices(warp1)] == ["inner"]
    assert count == 6


def test_nothing_to_export_is_refused_with_nothing_written() -> None:
    out = bytearray()
    with pytest.raises(ExportError, match="nothing to export"):
        perfetto_trace(recording_session([]), out.extend)
    assert not out


def test_the_cli_writes_the_file_standard_output_and_gzip(
    tmp_path: Path, capfdbinary: pytest.CaptureFixture[bytes], example_bytes: bytes
) -> None:
    plain = tmp_path / "trace.perfetto-trace"
    assert main(["export", str(EXAMPLE), "--format", "perfetto", "-o", str(plain)]) == 0
    assert plain.read_bytes() == example_bytes
    err = capfdbinary.readouterr().err.decode()
    assert "wrote " in err and "Traceback" not in err

    packed = tmp_path / "trace.perfetto-trace.gz"
    assert main(["export", str(EXAMPLE), "--format", "perfetto", "-o", str(packed)]) == 0
    assert gzip.decompress(packed.read_bytes()) == example_bytes
    capfdbinary.readouterr()

    assert main(["export", str(EXAMPLE), "--format", "perfetto", "-o", "-"]) == 0
    captured = capfdbinary.readouterr()
    assert captured.out == example_bytes
    assert b"Traceback" not in captured.err
