"""The speedscope export: one evented profile per compile, checked against the pass events."""

from __future__ import annotations

from typing import Any

import pytest
from export_helpers import as_json

from iket_tui.export import SPEEDSCOPE_SCHEMA, ExportError, recording_session, speedscope
from iket_tui.model import synthetic
from iket_tui.protocol import messages as m

PROFILE_KEYS = {"type", "name", "unit", "startValue", "endValue", "events"}


def frames_of(profile: dict[str, Any], frames: list[dict[str, Any]]) -> list[tuple[str, int, int]]:
    """(frame name, open, close) of every frame of a profile, in the order they opened; fails
    unless every close matches the innermost open frame and times never go back."""
    stack: list[tuple[int, int]] = []
    out: list[list[Any]] = []
    last = profile["startValue"]
    for event in profile["events"]:
        assert set(event) == {"type", "at", "frame"}
        assert event["at"] >= last, event
        last = event["at"]
        if event["type"] == "O":
            stack.append((event["frame"], len(out)))
            out.append([frames[event["frame"]]["name"], event["at"], None])
        else:
            assert event["type"] == "C"
            frame, index = stack.pop()
            assert frame == event["frame"]
            out[index][2] = event["at"]
    assert stack == []
    assert last <= profile["endValue"]
    return [(name, opened, closed) for name, opened, closed in out]


def test_one_profile_per_compile_with_the_pass_names_as_frames(
    example_speedscope: Any, example_messages: list[m.Message]
) -> None:
    doc = example_speedscope
    assert doc["$schema"] == SPEEDSCOPE_SCHEMA
    assert all(set(frame) == {"name"} for frame in doc["shared"]["frames"])
    names = [frame["name"] for frame in doc["shared"]["frames"]]
    passes = [msg["name"] for msg in example_messages if msg["type"] == m.PASS_START]
    assert names == list(dict.fromkeys(passes))
    begins = [msg for msg in example_messages if msg["type"] == m.COMPILE_BEGIN]
    ends = {msg["compile"]: msg for msg in example_messages if msg["type"] == m.COMPILE_END}
    assert [profile["name"] for profile in doc["profiles"]] == [
        f"compile {msg['compile']}: {msg['kernel']} ({'done' if ends[msg['compile']]['ok'] else 'failed'})"
        for msg in begins
    ]
    for profile, begin in zip(doc["profiles"], begins, strict=True):
        assert set(profile) == PROFILE_KEYS
        assert (profile["type"], profile["unit"], profile["startValue"]) == ("evented", "nanoseconds", 0)
        assert profile["endValue"] == ends[begin["compile"]]["duration_ns"]


def test_open_and_close_events_are_the_passes_begins_and_ends(
    example_speedscope: Any, example_messages: list[m.Message]
) -> None:
    frames = example_speedscope["shared"]["frames"]
    begins = {msg["compile"]: msg["t_ns"] for msg in example_messages if msg["type"] == m.COMPILE_BEGIN}
    starts = {
        (msg["compile"], msg["context"], msg["seq"]): msg for msg in example_messages if msg["type"] == m.PASS_START
    }
    ends = {
        (msg["compile"], msg["context"], msg["seq"]): msg["t_ns"]
        for msg in example_messages
        if msg["type"] in (m.PASS_END, m.PASS_INCOMPLETE)
    }
    for profile, (compile_id, origin) in zip(example_speedscope["profiles"], begins.items(), strict=True):
        expected = sorted(
            (msg["name"], msg["t_ns"] - origin, ends[key] - origin)
            for key, msg in starts.items()
            if key[0] == compile_id
        )
        found = frames_of(profile, frames)
        assert sorted(found) == expected
        assert len(found) == [88, 91, 88, 91, 24, 82, 91, 91, 88][compile_id - 1]


def test_a_pass_that_never_ended_closes_at_the_last_time_seen() -> None:
    stream = synthetic.live_stream(compiles=2, fail=(), running="tl.LayoutInference", running_for_ns=1_200_000_000)
    doc = as_json(speedscope(recording_session(stream)))
    last = doc["profiles"][-1]
    begin = synthetic.lowerings(2, fail=())[1].start_ns
    found = frames_of(last, doc["shared"]["frames"])
    assert last["name"] == "compile 2: gemm_64x256 (incomplete)"
    assert last["endValue"] == stream[-1]["t_ns"] - begin
    assert found[-1] == ("tl.LayoutInference", found[-1][1], last["endValue"])


def test_recorded_times_that_do_not_nest_are_kept_balanced() -> None:
    common: dict[str, Any] = {"compile": 1, "context": 0, "phase": None}
    a: dict[str, Any] = {"name": "A", "seq": 0, "depth": 0, "parent": None, **common}
    b: dict[str, Any] = {"name": "B", "seq": 1, "depth": 1, "parent": 0, **common}
    c: dict[str, Any] = {"name": "C", "seq": 2, "depth": 0, "parent": None, **common}
    stream = [
        m.compile_begin(compile=1, label="kernel=k", kernel="k", target=None, t_ns=1000),
        m.pass_start(**a, t_ns=1010),
        m.pass_start(**b, t_ns=1020),
        m.pass_start(**c, t_ns=1045),  # before A ended
        m.pass_end(**a, t_ns=1050, duration_ns=40),
        m.pass_end(**b, t_ns=1060, duration_ns=40),  # after its parent ended
        m.pass_end(**c, t_ns=1070, duration_ns=25),
        m.compile_end(compile=1, label="kernel=k", t_ns=1080, duration_ns=80, ok=True),
    ]
    doc = as_json(speedscope(recording_session(stream)))
    [profile] = doc["profiles"]
    assert [frame["name"] for frame in doc["shared"]["frames"]] == ["A", "B", "C"]
    assert [(event["type"], event["at"], event["frame"]) for event in profile["events"]] == [
        ("O", 10, 0),
        ("O", 20, 1),
        ("C", 50, 1),
        ("C", 50, 0),
        ("O", 50, 2),
        ("C", 70, 2),
    ]
    assert profile["endValue"] == 80


def test_a_recording_without_compiles_is_refused(small_kernel_stream: list[m.Message]) -> None:
    with pytest.raises(ExportError, match="holds no compile"):
        speedscope(recording_session(small_kernel_stream))
