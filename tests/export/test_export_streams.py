"""Speedscope and Perfetto written while the recording is read, as Chrome is: each compile drawn
when it ends and then forgotten by the model, the file the same as the whole session's (the
same bytes), and the bytes read shown on a terminal's stderr in every format."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from export_helpers import EXAMPLE
from perfetto_reader import decode
from process_recordings import interleaved, processes, write

from iket_tui.export import PerfettoStream, SpeedscopeStream, perfetto_trace, recording_session, speedscope
from iket_tui.model import synthetic
from iket_tui.protocol import messages as m
from iket_tui.sources.reading import read_recording

Stream = SpeedscopeStream | PerfettoStream


def _fed(make: Callable[[Callable[[bytes], object]], Stream], messages: list[Any], chunk: int) -> tuple[bytes, Stream]:
    """The file ``make``'s stream writes for ``messages`` fed ``chunk`` at a time; after each
    chunk, no compile that ended still holds a pass or a codegen step in the model."""
    written: list[bytes] = []
    stream = make(written.append)
    for at in range(0, len(messages), chunk):
        stream.feed(messages[at : at + chunk])
        compiles = stream.session.tree.compiles
        assert not any(comp.context_order or comp.codegen_steps for comp in compiles if comp.end_ns is not None)
        assert all(node.context.compile.end_ns is None for node in stream.session.tree.passes)
    stream.finish()
    return b"".join(written), stream


def _speedscope_text(messages: list[Any], name: str = "") -> bytes:
    """What the whole-session exporter writes: one ``json.dumps`` of the document."""
    document = speedscope(recording_session(messages), name=name)
    return json.dumps(document, separators=(",", ":"), allow_nan=False).encode("utf-8")


def _perfetto_bytes(messages: list[Any]) -> bytes:
    out = bytearray()
    perfetto_trace(recording_session(messages), out.extend)
    return bytes(out)


def _overlapping() -> list[m.Message]:
    """Compile 1 begins first and ends last; compile 2 begins and ends inside it (two threads)."""
    return [
        m.compile_begin(compile=1, label="kernel=a", kernel="a", target=None, t_ns=1000),
        m.compile_begin(compile=2, label="kernel=b", kernel="b", target=None, t_ns=1010),
        m.compile_end(compile=2, label="kernel=b", t_ns=1040, duration_ns=30, ok=True),
        m.compile_begin(compile=3, label="kernel=c", kernel="c", target=None, t_ns=1045),
        m.compile_end(compile=3, label="kernel=c", t_ns=1048, duration_ns=3, ok=True),
        m.compile_end(compile=1, label="kernel=a", t_ns=1050, duration_ns=50, ok=True),
    ]


@pytest.mark.parametrize("chunk", [1, 7, 1000])
def test_speedscope_written_while_read_is_the_whole_sessions_file_byte_for_byte(
    example_messages: list[m.Message], chunk: int
) -> None:
    text, _ = _fed(lambda w: SpeedscopeStream(w, name="h200-demo.msgpack"), example_messages, chunk)
    assert text == _speedscope_text(example_messages, name="h200-demo.msgpack")
    assert len(json.loads(text)["profiles"]) == 1


@pytest.mark.parametrize(
    "messages",
    [
        synthetic.live_stream(compiles=4, fail=(2,), running="tl.LayoutInference", running_for_ns=10**9),
        _overlapping(),
    ],
    ids=["a compile running at the end", "compiles of two threads that overlap"],
)
def test_speedscope_of_open_and_overlapping_compiles_is_unchanged(messages: list[Any]) -> None:
    """A compile still open at the end closes at the last time seen; a compile that ended while
    an earlier one ran waits for it, and is drawn after it, as the whole session draws it."""
    for chunk in (1, 3):
        text, _ = _fed(SpeedscopeStream, messages, chunk)
        assert text == _speedscope_text(messages)


def test_speedscope_and_perfetto_of_several_processes_are_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "three.msgpack"
    write(path, interleaved(processes(tmp_path)))
    messages, _ = read_recording(path)
    text, _ = _fed(SpeedscopeStream, messages, 5)
    assert text == _speedscope_text(messages)
    assert len(json.loads(text)["profiles"]) == 3
    streamed, _ = _fed(PerfettoStream, messages, 5)
    whole = decode(_perfetto_bytes(messages))
    found = decode(streamed)
    assert [(t.pid, t.name) for t in found.processes()] == [(t.pid, t.name) for t in whole.processes()]

    def shape(trace: Any) -> list[Any]:
        """Every track by its path of names from its process, with its events."""
        out = []
        for track in trace.tracks.values():
            path, at = [], track
            while at is not None:
                path.append(at.name)
                at = trace.tracks[at.parent] if at.parent is not None else None
            out.append((tuple(reversed(path)), track.events))
        return sorted(out)

    assert shape(found) == shape(whole)


@pytest.mark.parametrize("chunk", [1, 50])
def test_perfetto_written_while_read_is_the_whole_sessions_trace_byte_for_byte(
    example_messages: list[m.Message], chunk: int
) -> None:
    data, stream = _fed(PerfettoStream, example_messages, chunk)
    assert data == _perfetto_bytes(example_messages)
    named = [event for track in decode(data).tracks.values() for event in track.events if event[2] is not None]
    assert stream.events == len(named)  # every slice and instant written, counted once
    launches = [t for tl in stream.session.kernel_processes.timelines.values() for t in tl.launches.values()]
    assert [launch.parts for launch in launches] == [[]] * 3, "the kernel events left the model"


@pytest.mark.parametrize("fmt", ["chrome", "speedscope", "perfetto"])
def test_every_format_shows_the_bytes_read_on_a_terminal(tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"trace.{fmt}"
    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "iket_tui", "export", str(EXAMPLE), "--format", fmt, "-o", str(out)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=follower,
            timeout=120,
        )
        os.close(follower)
        follower = -1
        shown = b""
        while True:
            try:
                piece = os.read(leader, 1 << 16)
            except OSError:
                break
            if not piece:
                break
            shown += piece
    finally:
        if follower >= 0:
            os.close(follower)
        os.close(leader)
    assert done.returncode == 0
    text = shown.decode()
    assert f"reading {EXAMPLE.name}: " in text and " MB (" in text
    assert "\r\x1b[K" in text  # the line is cleared before the summary
    assert text.rstrip().endswith(f"events to {out}")
    assert out.stat().st_size > 0
