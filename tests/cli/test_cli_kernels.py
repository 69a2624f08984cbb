"""Kernel tracing from the command line: ``run --kernels`` records a real TileLang program's
event table before any launch, and ``dump`` shows kernel batches summarised or event by event."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from cli_helpers import Terminal, assert_one_line_error, run_iket

from iket_tui.demo.sample import sample_recording
from iket_tui.demo.waiting_launch import WaitingStream, waiting_stream
from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import encode_message
from iket_tui.protocol.recording import MAGIC
from iket_tui.sources.reading import read_recording

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"
TRACED_TARGET = Path(__file__).resolve().parents[1] / "agent" / "targets" / "traced.py"
S = 1_000_000_000
DEVICE_T = 1_795_976_916_032_000_000


@pytest.mark.tilelang
def test_run_with_kernels_records_the_event_table_of_a_real_compile(tmp_path: Path) -> None:
    pytest.importorskip("tilelang")
    out = tmp_path / "traced.msgpack"
    result = run_iket("run", "--kernels", "--no-ui", "--record", str(out), "--", sys.executable, str(TRACED_TARGET))
    assert result.returncode == 0, result.stderr
    messages, info = read_recording(out)
    assert info.ended
    kinds = [msg["type"] for msg in messages]
    (tracing,) = [msg for msg in messages if msg["type"] == m.KERNEL_TRACING]
    assert tracing["device"] is None and tracing["reason"]  # no GPU here: said, not failed
    (module,) = [msg for msg in messages if msg["type"] == m.KERNEL_MODULE]
    assert [event["name"] for event in module["events"]] == ["tile", "first_a", "k_step", "load", "mma"]
    begin = next(msg for msg in messages if msg["type"] == m.COMPILE_BEGIN)
    assert module["compile"] == begin["compile"]
    assert kinds.index(m.COMPILE_BEGIN) < kinds.index(m.KERNEL_MODULE) < kinds.index(m.COMPILE_END)


def test_dump_summarises_kernel_batches_and_expands_them_on_request() -> None:
    plain = run_iket("dump", str(EXAMPLE), "--format", "jsonl")
    assert plain.returncode == 0, plain.stderr
    objects = [json.loads(line) for line in plain.stdout.splitlines()]
    (records,) = [obj for obj in objects if obj["type"] == m.KERNEL_RECORDS]
    assert "chunks" not in records and records["events"] == 126_720 and records["count"] == 3_840
    assert records["counters"]["events_lost"] == 0
    (module,) = [obj for obj in objects if obj["type"] == m.KERNEL_MODULE]
    assert module["kernels"] == ["traced_gemm_kernel"]

    expanded = run_iket("dump", str(EXAMPLE), "--format", "jsonl", "--records")
    assert expanded.returncode == 0, expanded.stderr
    events = [json.loads(line) for line in expanded.stdout.splitlines() if '"kernel_event"' in line]
    assert len(events) == 126_720
    k_steps = [event for event in events if event["name"] == "k_step"]
    assert {event["payload"] for event in k_steps} == set(range(32))
    assert {event["payload_type"] for event in k_steps} == {"uint32"}
    tiles = [event for event in events if event["name"] == "tile"]
    assert all(event["payload"] == event["block"][0] for event in tiles)
    assert {event["kind"] for event in events} == {"start", "end", "mark"}
    assert {event["kernel"] for event in events} == {"traced_gemm_kernel"}


def test_dump_records_as_text_give_each_device_time_as_an_offset_to_the_nanosecond() -> None:
    """The device clock is absolute: as a duration it would read ``498882h29m`` for every event;
    as an offset from the first event shown, in milliseconds to the nanosecond as the time
    column reads the host's, it tells two events 32 ns apart apart."""
    jsonl = run_iket("dump", str(EXAMPLE), "--format", "jsonl", "--records")
    text = run_iket("dump", str(EXAMPLE), "--records")
    assert jsonl.returncode == text.returncode == 0, text.stderr
    times = [json.loads(line)["gpu_t_ns"] for line in jsonl.stdout.splitlines() if '"kernel_event"' in line]
    shown = [line.split(" gpu_t=", 1)[1].split(" ", 1)[0] for line in text.stdout.splitlines() if " gpu_t=" in line]
    assert len(shown) == len(times) == 126_720
    assert shown[0] == "+0.000000ms"
    assert [offset_ns(word) for word in shown] == [t - times[0] for t in times]


def offset_ns(word: str) -> int:
    """``+0.001568ms`` as 1568."""
    assert word.endswith("ms") and word[0] in "+-"
    ms, ns = word[1:-2].split(".")
    return (1 if word[0] == "+" else -1) * (int(ms) * 1_000_000 + int(ns))


def _killed_while_a_block_waits(path: Path) -> tuple[Path, WaitingStream]:
    """A recording cut off (no ``end``) 6.05 s after a launch began, its block waiting, as one
    of a process killed then is: its records, then a heartbeat. Returns it and what was
    written."""
    stream = waiting_stream(agent_t_ns=5 * S, device_t_ns=DEVICE_T, hold_ns=60 * S, ring_id=11)
    hello = {"type": "hello", "proto": [1, 1], "role": "agent", "pid": 4242, "argv": ["python", "hang.py"], "t_ns": S}
    tracing = {"type": "kernel_tracing", "enabled": True, "device": "NVIDIA H200", "reason": None, "t_ns": 5 * S}
    beat = {"type": "heartbeat", "t_ns": 11 * S + 50_000_000, "produced": 4, "dropped": 0, "open_passes": 0}
    header = m.recording(created_unix=0.0, software_version="test", source="pid 4242: python hang.py")
    frames = [encode_message(msg) for msg in (header, hello, tracing, stream.table, stream.held, beat)]
    path.write_bytes(MAGIC + b"".join(frames))
    return path, stream


def test_dump_ends_with_the_launches_a_killed_process_left_unfinished(tmp_path: Path) -> None:
    recording, stream = _killed_while_a_block_waits(tmp_path / "killed.msgpack")
    end = DEVICE_T + 6 * S + 50_000_000  # the stream ended 6.05 s after the launch began
    ago = end - stream.held_since_ns
    assert ago == 6_049_988_512

    text = run_iket("dump", str(recording))
    assert text.returncode == 0, text.stderr
    last = text.stdout.splitlines()[-1]
    assert last.split("kernel_unfinished")[0].strip() == "10050.000 ms"
    assert last.split("kernel_unfinished")[1].strip() == (
        "kernel=traced_gemm_kernel ring_id=11 module=1 launch=6 blocks=64 unfinished_blocks=1 unfinished_warps=4"
        " quiet=6.05s"
        ' summary="1 of 64 blocks not finished: block (3,0), warps 4-7 last at `mma` (k_step 17), 6.05 s ago"'
    )
    assert "recording has no end frame" in text.stderr  # what the reader noticed goes to stderr

    lines = run_iket("dump", str(recording), "--format", "jsonl")
    (unfinished,) = [obj for obj in map(json.loads, lines.stdout.splitlines()) if obj["type"] == "kernel_unfinished"]
    assert unfinished == {
        "type": "kernel_unfinished",
        "t_ns": 11 * S + 50_000_000,
        "kernel": "traced_gemm_kernel",
        "ring_id": 11,
        "module": 1,
        "launch": 6,
        "blocks": 64,
        "unfinished_blocks": 1,
        "unfinished_warps": 4,
        "quiet_ns": ago,  # since its waiting warps' last event, not the launch's newest (another block's)
        "summary": "1 of 64 blocks not finished: block (3,0), warps 4-7 last at `mma` (k_step 17), 6.05 s ago",
    }


def test_dump_of_the_demo_recording_shows_the_waiting_launch_finished() -> None:
    sample = sample_recording()
    assert sample is not None
    result = run_iket("dump", str(sample), "--format", "jsonl")
    assert result.returncode == 0, result.stderr
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    assert not [obj for obj in objects if obj["type"] == "kernel_unfinished"]  # released before the end
    records = [obj for obj in objects if obj["type"] == m.KERNEL_RECORDS]
    assert records[-1]["counters"]["events_read"] == 4 * 42_240 and records[-1]["counters"]["events_lost"] == 0


@pytest.mark.parametrize(("after", "shown"), [("5", b"running 6.05 s, warp quiet 6.05 s"), ("7", b"running 6.05 s ")])
def test_replay_marks_a_launch_quiet_past_kernel_stuck_after(tmp_path: Path, after: str, shown: bytes) -> None:
    recording, _ = _killed_while_a_block_waits(tmp_path / "killed.msgpack")
    terminal = Terminal("replay", str(recording), "--speed", "max", "--kernel-stuck-after", after, columns=160)
    terminal.wait_for(b"pid 4242")
    terminal.press(b"K")
    # The stream ended 6.05 s after the launch began (its events span 20.8 µs): quiet past 5 s, not 7.
    terminal.wait_for(shown)
    terminal.press(b"q")
    assert terminal.wait_exit() == 0


def test_a_kernel_stuck_after_that_is_no_positive_number_is_a_one_line_error() -> None:
    assert_one_line_error(
        run_iket("replay", str(EXAMPLE), "--kernel-stuck-after", "0"), "must be a positive number of seconds: '0'"
    )


def test_the_demo_recording_replayed_shows_the_waiting_block_then_its_release() -> None:
    sample = sample_recording()
    assert sample is not None
    # At 4x, the launch comes about 7.5 s in and its block waits 1 s; quiet after 0.5 s of the recording's time.
    terminal = Terminal("replay", str(sample), "--speed", "4", "--kernel-stuck-after", "0.5", columns=160, rows=48)
    terminal.wait_for(b"pid 471")
    terminal.press(b"K")
    terminal.wait_for(b"4-7 last at `mma` (k_step 17)")  # the pane lists the waiting warps
    terminal.wait_for(b"warp quiet")
    shown = len(terminal.output)
    deadline = time.monotonic() + 60
    while b"4.00 s" not in terminal.output[shown:]:  # released: the launch's duration, no longer running
        assert time.monotonic() < deadline, "the waiting launch was never shown released"
        terminal.read_for(0.1)
    terminal.press(b"q")
    assert terminal.wait_exit() == 0


H200_STUCK = Path(__file__).resolve().parents[2] / "benchmarks" / "data"


def test_dump_of_an_h200_run_killed_while_a_block_waits_ends_with_its_stuck_state() -> None:
    """Recordings of a real kernel on an H200 whose block (3,0) spins on a flag (the ring's
    benchmarks/data): killed while it waits, and released."""
    killed = run_iket("dump", str(H200_STUCK / "h200-stuck-killed.msgpack"), "--format", "jsonl")
    assert killed.returncode == 0, killed.stderr
    (unfinished,) = [obj for obj in map(json.loads, killed.stdout.splitlines()) if obj["type"] == "kernel_unfinished"]
    assert (unfinished["kernel"], unfinished["blocks"], unfinished["unfinished_warps"]) == (
        "waiting_steps_kernel",
        64,
        4,
    )
    assert unfinished["summary"] == (
        "1 of 64 blocks not finished: block (3,0), warps 0-3 last at `wait` (k_step 17), 3.04 s ago"
    )
    released = run_iket("dump", str(H200_STUCK / "h200-stuck-released.msgpack"), "--format", "jsonl")
    assert released.returncode == 0, released.stderr
    assert '"kernel_unfinished"' not in released.stdout
