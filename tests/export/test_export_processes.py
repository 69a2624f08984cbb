"""A recording of several processes, written as ``attach PID PID`` writes it, exported in each
format and read back: each process is its own trace process (Chrome), profile (speedscope) or
process track (Perfetto), named by pid, rank and command line and ordered by rank, holding
exactly its own compiles, passes, codegen steps and kernel events. Recordings whose ``process``
messages are missing or lie export without a traceback."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from perfetto_reader import Trace, decode
from process_recordings import Watched, interleaved, processes, write, write_frames

from iket_tui.cli import main
from iket_tui.export import ChromeStream, chrome_trace, recording_session
from iket_tui.export.common import RANKLESS_SORT
from iket_tui.protocol import messages as m
from iket_tui.sources.reading import read_recording

NAMES = {
    5001: "pid 5001 rank 1: python train.py --rank 1",
    5002: "pid 5002 rank 0: python train.py --rank 0",
    5003: "pid 5003: python tune.py",
}


@pytest.fixture
def watched(tmp_path: Path) -> list[Watched]:
    return processes(tmp_path)


@pytest.fixture
def recording(tmp_path: Path, watched: list[Watched]) -> Path:
    path = tmp_path / "three.msgpack"
    write(path, interleaved(watched))
    return path


def export(path: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> Path:
    out = path.with_suffix(f".{fmt}")
    code = main(["export", str(path), "--format", fmt, "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "Traceback" not in err
    return out


def resolved(events: list[dict[str, Any]], kind: str) -> dict[tuple[int, int | None], Any]:
    """The value a viewer shows for each metadata event of ``kind``: the last one written for
    its process (and thread)."""
    out: dict[tuple[int, int | None], Any] = {}
    for event in events:
        if event["ph"] == "M" and event["name"] == kind:
            out[(event["pid"], event.get("tid"))] = next(iter(event["args"].values()))
    return out


def timed(events: list[dict[str, Any]], pid: int, cat: str) -> list[dict[str, Any]]:
    return [event for event in events if event["ph"] != "M" and event["pid"] == pid and event["cat"] == cat]


def test_the_recording_names_each_run_of_frames_by_its_process(recording: Path) -> None:
    msgs, info = read_recording(recording)
    assert info.ended
    named = [msg["pid"] for msg in msgs if msg["type"] == m.PROCESS]
    assert set(named) == {5001, 5002, 5003} and len(named) > 6, "runs of the three processes interleave"


def test_chrome_each_process_is_a_pid_holding_its_compiles_and_its_launches(
    recording: Path, watched: list[Watched], capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(export(recording, "chrome", capsys).read_text())
    events = doc["traceEvents"]
    by_pid = {number: one for number, one in enumerate(watched, start=1)}
    assert resolved(events, "process_name") == {(n, None): NAMES[one.pid] for n, one in by_pid.items()}
    assert resolved(events, "process_sort_index") == {(1, None): 1, (2, None): 0, (3, None): RANKLESS_SORT + 3}
    assert {event["pid"] for event in events} == {1, 2, 3}
    for number, one in by_pid.items():
        compiles = timed(events, number, "compile")
        assert [(c["args"]["compile"], c["name"]) for c in compiles] == list(enumerate(one.kernels, start=1))
        assert len(timed(events, number, "pass")) == one.pass_events
        assert len(timed(events, number, "codegen")) == one.codegen_steps
        assert len(timed(events, number, "range")) == one.ranges
        assert len(timed(events, number, "mark")) == one.marks
    failed = [c["name"] for c in timed(events, 2, "compile") if c["args"]["status"] == "failed"]
    assert failed == [watched[1].kernels[1]]

    threads = resolved(events, "thread_name")
    assert len(threads) == len(set(threads)), "one name per thread"
    timed_threads = {(event["pid"], event["tid"]) for event in events if event["ph"] != "M"}
    assert timed_threads == set(threads), "every timed event is on a named thread"
    launch_threads = {key: name for key, name in threads.items() if name.startswith("small_kernel launch 7 (2x1x1)")}
    assert sorted(launch_threads.values()) == sorted(
        [f"small_kernel launch 7 (2x1x1) block (1,0,0) warp {warp}" for warp in (0, 1)]
        + ["small_kernel launch 7 (2x1x1) block (1,0,0) warp 0"]
    )
    assert sorted(pid for pid, _ in launch_threads) == [1, 1, 2]
    compile_tids = {tid for (_, tid), name in threads.items() if name.startswith("compile ")}
    assert not compile_tids & {tid for _, tid in launch_threads}, "launch threads never share a compile's tid"

    expected = sum(len(one.compiles) + one.pass_events + one.codegen_steps + one.ranges + one.marks for one in watched)
    assert sum(1 for event in events if event["ph"] != "M") == expected
    assert [(p["pid"], p["process"], p["rank"]) for p in doc["otherData"]["processes"]] == [
        (1, 5001, 1),
        (2, 5002, 0),
        (3, 5003, None),
    ]
    assert sorted((launch["pid"], launch["process"]) for launch in doc["otherData"]["launches"]) == [
        (1, 5001),
        (2, 5002),
    ]


def test_chrome_written_while_read_shows_what_the_whole_session_shows(recording: Path, watched: list[Watched]) -> None:
    """Also when the second process appears only after the first one's first compile was
    written: the name written for trace process 1 then is replaced by the process's own."""
    msgs, _ = read_recording(recording)
    first_end = next(i for i, msg in enumerate(msgs) if msg["type"] == m.COMPILE_END)
    assert any(msg["type"] == m.PROCESS for msg in msgs[:first_end]), "the second process came before"
    late = recording.with_name("late.msgpack")
    rest = watched[0].messages
    cut = next(i for i, msg in enumerate(rest) if msg["type"] == m.COMPILE_END) + 1
    runs = [(watched[0], rest[:cut])]
    runs += interleaved([Watched(watched[0].pid, watched[0].argv, watched[0].rank, rest[cut:]), *watched[1:]])
    write(late, [(watched[0] if one.pid == watched[0].pid else one, chunk) for one, chunk in runs])
    for path, renamed, chunk in ((recording, False, 7), (late, True, 1)):
        msgs, _ = read_recording(path)
        written: list[bytes] = []
        stream = ChromeStream(written.append)
        for at in range(0, len(msgs), chunk):
            stream.feed(msgs[at : at + chunk])
        count = stream.finish()
        streamed = json.loads(b"".join(written))["traceEvents"]
        whole = json.loads(json.dumps(chrome_trace(recording_session(msgs))))["traceEvents"]
        for kind in ("process_name", "process_sort_index", "thread_name", "thread_sort_index"):
            assert resolved(streamed, kind) == resolved(whole, kind), kind
        assert sorted(map(json.dumps, _timed(streamed))) == sorted(map(json.dumps, _timed(whole)))
        assert count == len(_timed(whole))
        first_names = [e["args"]["name"] for e in streamed if e["name"] == "process_name" and e["pid"] == 1]
        assert first_names == (["compiles (host clock)", NAMES[5001]] if renamed else [NAMES[5001]])


def _timed(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [event for event in events if event["ph"] != "M"]


def test_speedscope_has_a_profile_per_process_ordered_by_rank(
    recording: Path, watched: list[Watched], capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(export(recording, "speedscope", capsys).read_text())
    frames = [frame["name"] for frame in doc["shared"]["frames"]]
    order = [watched[1], watched[0], watched[2]]  # rank 0, rank 1, then the one without a rank
    assert [profile["name"] for profile in doc["profiles"]] == [
        f"{NAMES[one.pid]} ({len(one.compiles)} compiles)" for one in order
    ]
    origin = min(int(msg["t_ns"]) for one in watched for msg in one.messages if msg["type"] == m.COMPILE_BEGIN)
    for profile, one in zip(doc["profiles"], order, strict=True):
        opened = [event for event in profile["events"] if event["type"] == "O"]
        assert len(opened) == len(one.compiles) + one.pass_events + one.codegen_steps
        assert sum(1 for event in profile["events"] if event["type"] == "C") == len(opened)
        depth, tops = 0, []
        for event in profile["events"]:
            if event["type"] == "O":
                if depth == 0:
                    tops.append(frames[event["frame"]])
                depth += 1
            else:
                depth -= 1
        assert tops == one.kernels
        begin = min(int(msg["t_ns"]) for msg in one.messages if msg["type"] == m.COMPILE_BEGIN)
        assert profile["startValue"] == begin - origin == profile["events"][0]["at"]


def test_perfetto_has_a_process_track_per_process_holding_its_compile_and_launch_tracks(
    recording: Path, watched: list[Watched], capsys: pytest.CaptureFixture[str]
) -> None:
    trace: Trace = decode(export(recording, "perfetto", capsys).read_bytes())
    order = [watched[1], watched[0], watched[2]]
    tracks = trace.processes()
    assert [(track.pid, track.process_name, track.name, track.cmdline) for track in tracks] == [
        (one.pid, NAMES[one.pid], NAMES[one.pid], one.argv) for one in order
    ]
    assert all(track.parent is None for track in tracks)
    for track, one in zip(tracks, order, strict=True):
        children = trace.children(track.uuid)
        compile_tracks = [child for child in children if child.name.startswith("compile ")]
        assert [child.name for child in compile_tracks] == [
            f"compile {n}: {kernel}" for n, kernel in enumerate(one.kernels, start=1)
        ]
        slices = sum(len(trace.slices(child)) for child in compile_tracks)
        assert slices == len(one.compiles) + one.pass_events
        steps = [grand for child in compile_tracks for grand in trace.children(child.uuid)]
        assert sum(len(trace.slices(step)) for step in steps) == one.codegen_steps
        launches = [child for child in children if child.name.startswith("small_kernel")]
        assert [child.name for child in launches] == (["small_kernel launch 7 (2x1x1)"] if one.ranges else [])
        warps = [w for launch in launches for block in trace.children(launch.uuid) for w in trace.children(block.uuid)]
        assert sum(len(trace.slices(w)) for w in warps) == one.ranges
        assert sum(len(trace.instants(w)) for w in warps) == one.marks
    assert all(trace.process_of(track) is not None for track in trace.tracks.values()), "every track under a process"


def _lying(watched: list[Watched]) -> dict[str, list[Any]]:
    """Recordings whose ``process`` messages are missing or lie."""
    first, second, third = (one.messages for one in watched)
    hello_as_first = {**second[0], "pid": 5001}
    return {
        "pid not an int": [*first, {"type": m.PROCESS, "pid": "5002", "start_time": 1}, *second],
        "pid a float": [*first, {"type": m.PROCESS, "pid": 5002.0, "start_time": 1}, *second],
        "no messages after it": [*first, m.process(pid=5002, start_time=1)],
        "missing": [*first, *second],
        "same pid twice": [
            *first,
            m.process(pid=5002, start_time=1),
            hello_as_first,
            *second[1:],
        ],
        "ended then more": [
            m.process(pid=5001, start_time=1),
            *first,
            m.process(pid=5002, start_time=1),
            *second[:40],
            m.process(pid=5002, start_time=1, state=m.PROCESS_ENDED, reason="gone"),
            *second[40:],
            m.process(pid=5003, start_time=1, state="bogus"),
            *third,
        ],
    }


@pytest.mark.parametrize(
    "case", ["pid not an int", "pid a float", "no messages after it", "missing", "same pid twice", "ended then more"]
)
def test_lying_process_messages_export_in_every_format_without_a_traceback(
    case: str, tmp_path: Path, watched: list[Watched], capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "lying.msgpack"
    write_frames(path, _lying(watched)[case])
    msgs, _ = read_recording(path)
    session = recording_session(msgs)
    compiles = len(session.tree.compiles)
    chrome = json.loads(export(path, "chrome", capsys).read_text())
    assert len([event for event in chrome["traceEvents"] if event.get("cat") == "compile"]) == compiles
    speedscope = json.loads(export(path, "speedscope", capsys).read_text())
    top = Counter(len(profile["events"]) > 0 for profile in speedscope["profiles"])
    assert top[True] == len(speedscope["profiles"]) >= 1
    trace = decode(export(path, "perfetto", capsys).read_bytes())
    compile_tracks = [
        track for track in trace.tracks.values() if track.name.startswith("compile ") and "codegen" not in track.name
    ]
    assert len(compile_tracks) == compiles
    if case == "same pid twice":  # a hello naming another process than its stream's is not believed
        assert session.tree.several and [p.pid for p in session.tree.processes] == [5001, 5002]
        assert session.counters.malformed == 1
        assert [track.pid for track in trace.processes()] == [5001, 5002]
    if case == "no messages after it":
        assert [track.pid for track in trace.processes()] == [5001], "a process with nothing to show has no track"
        assert len(speedscope["profiles"]) == 1
