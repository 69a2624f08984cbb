"""The Chrome trace export, checked event by event against the recording it came from."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Any

import numpy as np
import pytest
from export_helpers import as_json

from iket_tui.export import CLOCKS_NOTE, ExportError, chrome_trace, recording_session
from iket_tui.model import synthetic
from iket_tui.model.kernels import KernelTimeline
from iket_tui.model.launches import SPAN_NO_END, SPAN_NO_START, Launch
from iket_tui.protocol import messages as m
from iket_tui.ring.layout import PAYLOAD_NAMES

COMPILES = "compiles (host clock)"
GRID_LAUNCHES = [f"traced_gemm_kernel launch {number} (8x8x1)" for number in (3, 4, 5)]
THREAD_NAME = re.compile(r"block \((\d+),(\d+),(\d+)\) warp (\d+)")


def ns(micros: float) -> int:
    """A trace time back in nanoseconds, truncated as Perfetto reads it."""
    return int(micros * 1000)


def process_ids(doc: Any) -> dict[str, int]:
    return {
        event["args"]["name"]: event["pid"]
        for event in doc["traceEvents"]
        if event["ph"] == "M" and event["name"] == "process_name"
    }


def thread_names(doc: Any) -> dict[tuple[int, int], str]:
    return {
        (event["pid"], event["tid"]): event["args"]["name"]
        for event in doc["traceEvents"]
        if event["ph"] == "M" and event["name"] == "thread_name"
    }


def timed(doc: Any, pid: int, ph: str) -> list[dict[str, Any]]:
    return [event for event in doc["traceEvents"] if event["pid"] == pid and event["ph"] == ph]


def example_launches(messages: list[m.Message]) -> list[Launch]:
    timeline = KernelTimeline()
    for msg in messages:
        if msg["type"] in (m.KERNEL_MODULE, m.KERNEL_RECORDS):
            timeline.apply(msg)
    return sorted(timeline.launches.values(), key=lambda launch: launch.order)


def payload_bits(args: dict[str, Any]) -> tuple[int, str] | None:
    """The 32 bits a payload arg stands for, and its dtype."""
    if "payload" not in args:
        return None
    value, dtype = args["payload"], args["payload_type"]
    if dtype == "float32":
        return int(np.array(value, dtype=np.float32).view(np.uint32)), dtype
    return value & 0xFFFFFFFF, dtype


def recorded_payload(payload_type: int, payload: int) -> tuple[int, str] | None:
    return None if payload_type == 0 else (payload, PAYLOAD_NAMES[payload_type])


def test_a_process_per_launch_and_one_for_the_compiles(example_chrome: Any) -> None:
    assert example_chrome["displayTimeUnit"] == "ns"
    assert list(process_ids(example_chrome)) == [COMPILES, *GRID_LAUNCHES]
    sort = {
        event["pid"]: event["args"]["sort_index"]
        for event in example_chrome["traceEvents"]
        if event["name"] == "process_sort_index"
    }
    pids = list(process_ids(example_chrome).values())
    assert [sort[pid] for pid in pids] == sorted(sort[pid] for pid in pids)
    other = example_chrome["otherData"]
    assert other["clocks"] == CLOCKS_NOTE
    assert [
        (launch["kernel"], launch["launch"], launch["grid"], launch["events"], launch["compile"])
        for launch in other["launches"]
    ] == [("traced_gemm_kernel", number, [8, 8, 1], 42_240, 8) for number in (3, 4, 5)]


def test_every_range_of_every_launch_is_a_complete_event_on_its_warps_thread(
    example_chrome: Any, example_messages: list[m.Message]
) -> None:
    pids = process_ids(example_chrome)
    names = thread_names(example_chrome)
    launches = example_launches(example_messages)
    origin = min(launch.first_ns for launch in launches)
    for launch, process in zip(launches, GRID_LAUNCHES, strict=True):
        spans = launch.spans()
        offset = launch.first_ns - origin
        expected: Counter[tuple[Any, ...]] = Counter()
        for span in spans.spans:
            x, y, z = spans.blocks[int(span["block"])].tolist()
            flags = int(span["flags"])
            assert not flags & SPAN_NO_START
            start = int(span["start_ns"])
            end = launch.duration_ns if flags & SPAN_NO_END else int(span["end_ns"])
            expected[
                (
                    f"block ({x},{y},{z}) warp {int(span['warp'])}",
                    launch.event_name(int(span["event"])),
                    offset + start,
                    end - start,
                    "no end" if flags & SPAN_NO_END else None,
                    recorded_payload(int(span["payload_type"]), int(span["payload"])),
                    int(span["sm"]),
                )
            ] += 1
        pid = pids[process]
        found = Counter(
            (
                names[(pid, event["tid"])],
                event["name"],
                ns(event["ts"]),
                ns(event["dur"]),
                event["args"].get("unbalanced"),
                payload_bits(event["args"]),
                event["args"]["sm"],
            )
            for event in timed(example_chrome, pid, "X")
        )
        assert sum(found.values()) == len(spans.spans) == 64 * 4 * (1 + 2 * 32) + 64 * 4
        assert found == expected


def test_the_open_tile_ranges_of_the_loader_warps_run_to_the_launchs_end_flagged(
    example_chrome: Any, example_messages: list[m.Message]
) -> None:
    pids = process_ids(example_chrome)
    names = thread_names(example_chrome)
    launches = example_launches(example_messages)
    origin = min(launch.first_ns for launch in launches)
    for launch, process in zip(launches, GRID_LAUNCHES, strict=True):
        pid = pids[process]
        unbalanced = [event for event in timed(example_chrome, pid, "X") if "unbalanced" in event["args"]]
        assert len(unbalanced) == 256
        assert {(event["name"], event["args"]["unbalanced"]) for event in unbalanced} == {("tile", "no end")}
        assert {ns(event["ts"]) + ns(event["dur"]) for event in unbalanced} == {launch.last_ns - origin}
        assert {names[(pid, event["tid"])] for event in unbalanced} == {
            f"block ({x},{y},0) warp {warp}" for x in range(8) for y in range(8) for warp in range(4)
        }


def test_every_mark_is_an_instant_event_with_its_payload(
    example_chrome: Any, example_messages: list[m.Message]
) -> None:
    pids = process_ids(example_chrome)
    names = thread_names(example_chrome)
    launches = example_launches(example_messages)
    origin = min(launch.first_ns for launch in launches)
    for launch, process in zip(launches, GRID_LAUNCHES, strict=True):
        spans = launch.spans()
        expected = Counter(
            (
                "block ({},{},{}) warp {}".format(*spans.blocks[int(mark["block"])].tolist(), int(mark["warp"])),
                launch.event_name(int(mark["event"])),
                launch.first_ns - origin + int(mark["t_ns"]),
                recorded_payload(int(mark["payload_type"]), int(mark["payload"])),
            )
            for mark in spans.marks
        )
        pid = pids[process]
        instants = timed(example_chrome, pid, "i")
        assert {event["s"] for event in instants} == {"t"}
        found = Counter(
            (names[(pid, event["tid"])], event["name"], ns(event["ts"]), payload_bits(event["args"]))
            for event in instants
        )
        assert sum(found.values()) == 8704
        assert found == expected


def test_known_payloads_step_numbers_and_block_columns(example_chrome: Any) -> None:
    names = thread_names(example_chrome)
    for process in GRID_LAUNCHES:
        pid = process_ids(example_chrome)[process]
        steps: defaultdict[str, list[int]] = defaultdict(list)
        for event in timed(example_chrome, pid, "i"):
            if event["name"] == "k_step":
                assert event["args"]["payload_type"] == "uint32"
                steps[names[(pid, event["tid"])]].append(event["args"]["payload"])
            else:
                assert (event["name"], event["args"]["payload_type"]) == ("first_a", "float32")
        assert len(steps) == 64 * 4  # the compute warps
        assert all(sorted(values) == list(range(32)) for values in steps.values())
        tiles = [event for event in timed(example_chrome, pid, "X") if event["name"] == "tile"]
        assert len(tiles) == 512
        for event in tiles:
            match = THREAD_NAME.fullmatch(names[(pid, event["tid"])])
            assert match is not None
            assert (event["args"]["payload"], event["args"]["payload_type"]) == (int(match[1]), "int32")
        assert all(
            "payload" not in event["args"] for event in timed(example_chrome, pid, "X") if event["name"] != "tile"
        )


def test_the_ranges_of_a_compute_warp_nest_inside_its_tile(example_chrome: Any) -> None:
    pid = process_ids(example_chrome)[GRID_LAUNCHES[0]]
    by_thread: defaultdict[int, list[dict[str, Any]]] = defaultdict(list)
    for event in timed(example_chrome, pid, "X"):
        by_thread[event["tid"]].append(event)
    closed_tiles = 0
    for events in by_thread.values():
        tile = next(event for event in events if event["name"] == "tile")
        inner = [event for event in events if event is not tile]
        if "unbalanced" in tile["args"]:
            assert inner == []
            continue
        closed_tiles += 1
        assert len(inner) == 64 and {event["args"]["depth"] for event in inner} == {1}
        begin, end = ns(tile["ts"]), ns(tile["ts"]) + ns(tile["dur"])
        assert all(begin <= ns(event["ts"]) and ns(event["ts"]) + ns(event["dur"]) <= end for event in inner)
    assert closed_tiles == 256


def _passes_by_compile(messages: list[m.Message]) -> dict[int, list[tuple[str, int, int, str | None]]]:
    """Per compile, from the raw pass events: (name, start, end, parent name), in start order."""
    starts = {(msg["compile"], msg["context"], msg["seq"]): msg for msg in messages if msg["type"] == m.PASS_START}
    ends = {
        (msg["compile"], msg["context"], msg["seq"]): msg["t_ns"]
        for msg in messages
        if msg["type"] in (m.PASS_END, m.PASS_INCOMPLETE)
    }
    out: defaultdict[int, list[tuple[str, int, int, str | None]]] = defaultdict(list)
    for key, msg in starts.items():
        parent = None if msg["parent"] is None else starts[(key[0], key[1], msg["parent"])]["name"]
        out[key[0]].append((msg["name"], msg["t_ns"], ends[key], parent))
    return {compile_id: sorted(passes, key=lambda item: item[1]) for compile_id, passes in out.items()}


def _enclosing(events: list[dict[str, Any]]) -> dict[int, str | None]:
    """For each complete event of one thread (by ``id``), the name of the innermost event that
    holds it (None at the top)."""
    stack: list[tuple[int, str]] = []
    parents: dict[int, str | None] = {}
    for event in sorted(events, key=lambda event: (ns(event["ts"]), -ns(event["dur"]))):
        end = ns(event["ts"]) + ns(event["dur"])
        while stack and stack[-1][0] < end:
            stack.pop()
        parents[id(event)] = stack[-1][1] if stack else None
        stack.append((end, event["name"]))
    return parents


def test_the_passes_of_every_compile_nest_on_its_own_thread(
    example_chrome: Any, example_messages: list[m.Message]
) -> None:
    begins = {msg["compile"]: msg for msg in example_messages if msg["type"] == m.COMPILE_BEGIN}
    ends = {msg["compile"]: msg for msg in example_messages if msg["type"] == m.COMPILE_END}
    origin = min(msg["t_ns"] for msg in begins.values())
    pid = process_ids(example_chrome)[COMPILES]
    tids = {name: tid for (owner, tid), name in thread_names(example_chrome).items() if owner == pid}
    assert list(tids) == [f"compile {cid}: {msg['kernel']}" for cid, msg in begins.items()]
    expected_passes = _passes_by_compile(example_messages)
    assert [len(expected_passes[cid]) for cid in begins] == [88, 91, 88, 91, 24, 82, 91, 91, 88]
    for cid, begin in begins.items():
        tid = tids[f"compile {cid}: {begin['kernel']}"]
        events = [event for event in timed(example_chrome, pid, "X") if event["tid"] == tid]
        [whole] = [event for event in events if event["cat"] == "compile"]
        assert (whole["name"], ns(whole["ts"]), ns(whole["dur"])) == (
            begin["kernel"],
            begin["t_ns"] - origin,
            ends[cid]["duration_ns"],
        )
        passes = [event for event in events if event["cat"] == "pass"]
        assert [(event["name"], ns(event["ts"]), ns(event["dur"])) for event in passes] == [
            (name, start - origin, end - start) for name, start, end, _ in expected_passes[cid]
        ]
        parents = _enclosing(events)
        assert [parents[id(event)] for event in passes] == [
            parent or begin["kernel"] for _, _, _, parent in expected_passes[cid]
        ]
        assert {event["args"]["status"] for event in passes} <= {"done", "failed"}


def test_a_failed_compile_carries_its_error_on_the_pass_and_the_codegen_step(example_chrome: Any) -> None:
    pid = process_ids(example_chrome)[COMPILES]
    tids = {name: tid for (owner, tid), name in thread_names(example_chrome).items() if owner == pid}
    layout = [event for event in timed(example_chrome, pid, "X") if event["tid"] == tids["compile 5: layout_conflict"]]
    [failed] = [event for event in layout if event["args"]["status"] == "failed" and event["cat"] == "pass"]
    assert failed["name"] == "tl.LayoutInference"
    assert failed["args"]["error"].startswith("InternalError: Layout infer conflict between D_local and C_local")
    whole = next(event for event in layout if event["cat"] == "compile")
    assert (whole["args"]["status"], whole["args"]["stage"]) == ("failed", "pass")
    nvcc = [event for event in timed(example_chrome, pid, "X") if event["tid"] == tids["compile 6: nvcc_error"]]
    [step] = [event for event in nvcc if event["cat"] == "codegen"]
    assert (step["name"], step["args"]["status"]) == ("codegen tilelang_cuda", "failed")
    assert 'identifier "iket_demo_missing_device_function" is undefined' in step["args"]["error"]
    good = [event for event in timed(example_chrome, pid, "X") if event["tid"] == tids["compile 1: vector_add"]]
    assert [event["name"] for event in good if event["cat"] == "codegen"] == [
        "codegen tilelang_cuda",
        "codegen tilelang_c_host",
    ]


def test_unbalanced_ranges_payloads_and_marks_of_a_small_launch(small_kernel_stream: list[m.Message]) -> None:
    doc = as_json(chrome_trace(recording_session(small_kernel_stream)))
    assert list(process_ids(doc)) == ["small_kernel launch 7 (2x1x1)"]
    pid = process_ids(doc)["small_kernel launch 7 (2x1x1)"]
    names = thread_names(doc)
    ranges = [
        (names[(pid, event["tid"])], event["name"], ns(event["ts"]), ns(event["dur"]), event["args"])
        for event in timed(doc, pid, "X")
    ]
    assert ranges == [
        ("block (1,0,0) warp 0", "(range end without a start)", 0, 32, {"sm": 0, "depth": 0, "unbalanced": "no start"}),
        ("block (1,0,0) warp 0", "outer", 64, 96, {"sm": 0, "depth": 0}),
        ("block (1,0,0) warp 0", "inner", 96, 32, {"sm": 0, "depth": 1, "payload": -5, "payload_type": "int32"}),
        ("block (1,0,0) warp 0", "outer", 192, 64, {"sm": 0, "depth": 0, "unbalanced": "no end"}),
        ("block (1,0,0) warp 1", "inner", 224, 32, {"sm": 0, "depth": 0, "payload": 7, "payload_type": "int32"}),
    ]
    [tick] = timed(doc, pid, "i")
    assert (names[(pid, tick["tid"])], tick["name"], tick["ts"], tick["s"], tick["args"]) == (
        "block (1,0,0) warp 0",
        "tick",
        0,
        "t",
        {"sm": 0, "payload": 1.5, "payload_type": "float32"},
    )


def test_a_pass_still_running_when_the_recording_ends_is_drawn_to_the_last_time_seen() -> None:
    stream = synthetic.live_stream(compiles=2, fail=(), running="tl.LayoutInference", running_for_ns=1_200_000_000)
    doc = as_json(chrome_trace(recording_session(stream)))
    pid = process_ids(doc)[COMPILES]
    last = stream[-1]["t_ns"]
    origin = synthetic.lowerings(2, fail=())[0].start_ns
    running = [event for event in timed(doc, pid, "X") if event["args"]["status"] == "incomplete"]
    names = [event["name"] for event in running]
    assert names == ["gemm_64x256", "tl.LayoutInference"]  # the compile and its open pass
    assert {ns(event["ts"]) + ns(event["dur"]) for event in running} == {last - origin}
    assert running[1]["args"]["error"] == "never finished: the recording ends here"


def test_a_recording_with_nothing_to_draw_is_refused() -> None:
    with pytest.raises(ExportError, match="no compile and no kernel launch"):
        chrome_trace(recording_session([synthetic.agent_hello()]))
