"""A replay starts with the first compile: the seconds a recorded program spent before it (its
imports, the wait for the UI) pass at once, as nothing in them would be shown; from the first
compile on, the replay keeps the recording's pace."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from iket_tui.protocol import messages as m
from iket_tui.sources.recorder import RecordingWriter
from iket_tui.sources.replay import RecordingSource

S = 1_000_000_000


def _record(path: Path) -> None:
    """A program that greets at 1 s, beats its heart for 8 s, then compiles at 9 s, a pass 0.4 s long."""
    writer = RecordingWriter(path, source="pid 42: python slow_imports.py")
    writer.write(m.hello(role="agent", pid=42, start_time=7, software_version="x", capabilities=[], t_ns=S))
    for second in range(2, 9):
        writer.write({"type": m.HEARTBEAT, "t_ns": second * S})
    writer.write({"type": m.COMPILE_BEGIN, "compile": 1, "t_ns": 9 * S, "kernel": "gemm"})
    common: dict[str, Any] = {"compile": 1, "context": 0, "seq": 0, "depth": 0, "parent": None, "phase": None}
    writer.write(m.pass_start(name="tl.Slow", t_ns=9 * S + S // 10, **common))
    writer.write(m.pass_end(name="tl.Slow", t_ns=9 * S + S // 2, duration_ns=4 * S // 10, **common))
    writer.close("done")


def _released_at(path: Path) -> dict[str, float]:
    """When each kind of message was handed out, in seconds after the replay began."""
    start = time.monotonic()
    first: dict[str, float] = {}
    for batch in RecordingSource(path, speed=1.0).batches():
        for item in batch.messages:
            kind = "pass_row" if isinstance(item, list) else str(item.get("type"))
            first.setdefault(kind, time.monotonic() - start)
            if kind == "pass_row" or item.get("type") == m.PASS_END:
                first["last"] = time.monotonic() - start
    return first


def test_the_first_compile_is_shown_at_once_and_the_pace_is_kept_after_it(tmp_path: Path) -> None:
    path = tmp_path / "slow-start.msgpack"
    _record(path)
    released = _released_at(path)
    assert released["compile_begin"] < 1.0  # not the 8 s the program took to get there
    assert released["last"] - released["compile_begin"] >= 0.45  # the pass still takes its 0.5 s


def test_a_cuts_context_passes_at_once_and_its_stretch_keeps_the_pace(tmp_path: Path) -> None:
    """A cut from 5 s holds a compile begun at 1 s as context: its replay shows the compile at
    once and plays its own stretch, from 5 s, at the recording's pace."""
    path = tmp_path / "cut.msgpack"
    writer = RecordingWriter(path, source="pid 42: python long.py", context_until_ns=5 * S)
    writer.write(m.hello(role="agent", pid=42, start_time=7, software_version="x", capabilities=[], t_ns=S))
    writer.write({"type": m.COMPILE_BEGIN, "compile": 1, "t_ns": S, "kernel": "gemm"})
    common: dict[str, Any] = {"compile": 1, "context": 0, "seq": 0, "depth": 0, "parent": None, "phase": None}
    writer.write(m.pass_start(name="tl.Slow", t_ns=2 * S, **common))
    writer.write({"type": m.HEARTBEAT, "t_ns": 5 * S})
    writer.write(m.pass_end(name="tl.Slow", t_ns=5 * S + S // 2, duration_ns=3 * S + S // 2, **common))
    writer.close("done")
    released = _released_at(path)
    assert released["heartbeat"] < 1.0  # not the 4 s between the compile's start and the stretch
    assert released["last"] - released["heartbeat"] >= 0.45  # the stretch's 0.5 s kept
