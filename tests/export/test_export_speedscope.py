"""The speedscope export: one evented profile of the process, compiles as its top frames with
their passes and codegen steps inside, checked against the recorded events as speedscope reads it."""

from __future__ import annotations

from typing import Any

import pytest
from export_helpers import as_json

from iket_tui.export import SPEEDSCOPE_SCHEMA, ExportError, recording_session, speedscope
from iket_tui.model import synthetic
from iket_tui.protocol import messages as m

PROFILE_KEYS = {"type", "name", "unit", "startValue", "endValue", "events"}


def frames_of(profile: dict[str, Any], frames: list[dict[str, Any]]) -> list[tuple[str, int, int, int]]:
    """(frame name, open, close, depth) of every frame of a profile, in the order they opened,
    read as speedscope reads an evented profile: fails unless every event names a shared
    frame, every close matches the innermost open frame, times never go back and stay within
    the profile's start and end values, and every frame opened is closed."""
    stack: list[tuple[int, int]] = []
    out: list[list[Any]] = []
    last = profile["startValue"]
    for event in profile["events"]:
        assert set(event) == {"type", "at", "frame"}
        assert 0 <= event["frame"] < len(frames)
        assert event["at"] >= last, event
        last = event["at"]
        if event["type"] == "O":
            stack.append((event["frame"], len(out)))
            out.append([frames[event["frame"]]["name"], event["at"], None, len(stack) - 1])
        else:
            assert event["type"] == "C"
            frame, index = stack.pop()
            assert frame == event["frame"]
            out[index][2] = event["at"]
    assert stack == []
    assert last <= profile["endValue"]
    return [(name, opened, closed, depth) for name, opened, closed, depth in out]


def test_one_profile_of_the_process_with_its_compiles_as_top_frames(
    example_speedscope: Any, example_messages: list[m.Message]
) -> None:
    doc = example_speedscope
    assert doc["$schema"] == SPEEDSCOPE_SCHEMA
    assert all(set(frame) == {"name"} for frame in doc["shared"]["frames"])
    [profile] = doc["profiles"]
    assert set(profile) == PROFILE_KEYS
    assert (profile["type"], profile["unit"], profile["startValue"]) == ("evented", "nanoseconds", 0)
    hello = next(msg for msg in example_messages if msg["type"] == m.HELLO)
    assert profile["name"] == f"pid {hello['pid']}: {' '.join(hello['argv'])} (9 compiles)"
    begins = [msg for msg in example_messages if msg["type"] == m.COMPILE_BEGIN]
    ends = {msg["compile"]: msg for msg in example_messages if msg["type"] == m.COMPILE_END}
    origin = begins[0]["t_ns"]
    tops = [frame[:3] for frame in frames_of(profile, doc["shared"]["frames"]) if frame[3] == 0]
    assert tops == [(msg["kernel"], msg["t_ns"] - origin, ends[msg["compile"]]["t_ns"] - origin) for msg in begins]
    assert profile["endValue"] == max(end["t_ns"] for end in ends.values()) - origin


def test_passes_and_codegen_steps_open_and_close_at_their_begins_and_ends(
    example_speedscope: Any, example_messages: list[m.Message]
) -> None:
    [profile] = example_speedscope["profiles"]
    origin = next(msg["t_ns"] for msg in example_messages if msg["type"] == m.COMPILE_BEGIN)
    starts = {
        (msg["compile"], msg["context"], msg["seq"]): msg for msg in example_messages if msg["type"] == m.PASS_START
    }
    ends = {
        (msg["compile"], msg["context"], msg["seq"]): msg["t_ns"]
        for msg in example_messages
        if msg["type"] in (m.PASS_END, m.PASS_INCOMPLETE)
    }
    steps = [
        (
            f"codegen {msg['name'].removeprefix('target.build.')}",
            msg["t_ns"] - msg["duration_ns"] - origin,
            msg["t_ns"] - origin,
        )
        for msg in example_messages
        if msg["type"] == m.CODEGEN_END
    ]
    expected = sorted([(msg["name"], msg["t_ns"] - origin, ends[key] - origin) for key, msg in starts.items()] + steps)
    found = [frame[:3] for frame in frames_of(profile, example_speedscope["shared"]["frames"]) if frame[3] > 0]
    assert sorted(found) == expected
    assert len(steps) == 15 and {name for name, _, _ in steps} == {"codegen tilelang_cuda", "codegen tilelang_c_host"}


def test_a_pass_that_never_ended_closes_at_the_last_time_seen() -> None:
    stream = synthetic.live_stream(compiles=2, fail=(), running="tl.LayoutInference", running_for_ns=1_200_000_000)
    doc = as_json(speedscope(recording_session(stream)))
    [profile] = doc["profiles"]
    origin = synthetic.lowerings(2, fail=())[0].start_ns
    found = frames_of(profile, doc["shared"]["frames"])
    assert [frame[0] for frame in found if frame[3] == 0] == [low.kernel for low in synthetic.lowerings(2, fail=())]
    assert profile["endValue"] == stream[-1]["t_ns"] - origin
    assert found[-1][:3] == ("tl.LayoutInference", found[-1][1], profile["endValue"])


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
    assert [frame["name"] for frame in doc["shared"]["frames"]] == ["k", "A", "B", "C"]
    assert [(event["type"], event["at"], event["frame"]) for event in profile["events"]] == [
        ("O", 0, 0),
        ("O", 10, 1),
        ("O", 20, 2),
        ("C", 50, 2),
        ("C", 50, 1),
        ("O", 50, 3),
        ("C", 70, 3),
        ("C", 80, 0),
    ]
    assert profile["endValue"] == 80


def test_compiles_of_two_threads_that_overlap_are_drawn_one_after_the_other() -> None:
    stream = [
        m.compile_begin(compile=1, label="kernel=a", kernel="a", target=None, t_ns=1000),
        m.compile_begin(compile=2, label="kernel=b", kernel="b", target=None, t_ns=1010),
        m.compile_end(compile=1, label="kernel=a", t_ns=1050, duration_ns=50, ok=True),
        m.compile_end(compile=2, label="kernel=b", t_ns=1060, duration_ns=50, ok=True),
    ]
    doc = as_json(speedscope(recording_session(stream)))
    [profile] = doc["profiles"]
    assert frames_of(profile, doc["shared"]["frames"]) == [("a", 0, 50, 0), ("b", 50, 60, 0)]


def test_a_recording_without_compiles_is_refused(small_kernel_stream: list[m.Message]) -> None:
    with pytest.raises(ExportError, match="holds no compile"):
        speedscope(recording_session(small_kernel_stream))
