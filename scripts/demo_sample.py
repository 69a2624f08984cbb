"""Write the demo's bundled recording, ``examples/h200-demo-waiting.msgpack``: the H200 recording
of the demo program (``examples/h200-demo.msgpack``, kept as the GPU sent it) with one more
launch of its ``traced_gemm`` appended before the program's ``bye``, written by the CPU producer
and drained by the real drain, in which block (3,0) waits a few seconds before it is released.

    python scripts/demo_sample.py [--hold 4]

Every frame of the H200 recording up to its ``bye`` is copied byte for byte; the new launch's
records, a heartbeat a second while its block waits, then the ``bye`` and ``end`` (later by
that much, counting the new messages) follow. Run again, it writes the same file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import msgpack

from iket_tui.demo.waiting_launch import waiting_stream
from iket_tui.model.session import Session
from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import encode_message
from iket_tui.protocol.frames import HEADER, HEADER_SIZE
from iket_tui.protocol.recording import MAGIC
from iket_tui.sources.reading import read_recording

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "examples" / "h200-demo.msgpack"
TARGET = ROOT / "examples" / "h200-demo-waiting.msgpack"
START_AFTER_NS = 500_000_000
"""The launch begins this long (agent time) after the program's last compile ended."""
HEARTBEAT_NS = 1_000_000_000


def frames(data: bytes) -> list[tuple[int, dict[str, Any]]]:
    """Each frame's offset and message, after the magic header."""
    found = []
    at = len(MAGIC)
    while at < len(data):
        length, _ = HEADER.unpack_from(data, at)
        body = data[at + HEADER_SIZE : at + HEADER_SIZE + length]
        msg = msgpack.unpackb(body, raw=False, strict_map_key=False)
        found.append((at, msg if isinstance(msg, dict) else {"type": "rows"}))
        at += HEADER_SIZE + length
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hold", type=float, default=4.0, help="seconds block (3,0) waits (default 4)")
    args = parser.parse_args(argv)
    data = SOURCE.read_bytes()
    if not data.startswith(MAGIC):
        print(f"{SOURCE}: not a recording", file=sys.stderr)
        return 2
    messages, _ = read_recording(SOURCE)
    (bye_at,) = [at for at, msg in frames(data) if msg.get("type") == m.BYE]
    bye = next(msg for msg in messages if msg["type"] == m.BYE)
    end = next(msg for msg in messages if msg["type"] == m.END)
    compile_end = max(msg["t_ns"] for msg in messages if msg["type"] == m.COMPILE_END)
    heartbeat = [msg for msg in messages if msg["type"] == m.HEARTBEAT][-1]
    records = [msg for msg in messages if msg["type"] == m.KERNEL_RECORDS]
    (module,) = [msg for msg in messages if msg["type"] == m.KERNEL_MODULE]
    # The device clock, as the H200's last drain saw it: the new launch starts as long after the
    # last recorded launch as the agent's clock says.
    ring_id = module["ring_id"]
    session = Session()
    session.apply(messages)
    last_device_ns = max(launch.last_ns for launch in session.kernels.launches.values())
    agent_t = compile_end + START_AFTER_NS
    device_t = last_device_ns + (agent_t - records[-1]["t_ns"])
    stream = waiting_stream(agent_t_ns=agent_t, device_t_ns=device_t, hold_ns=int(args.hold * 1e9), ring_id=ring_id)
    before = records[-1]["counters"]  # the ring's counters go on from the recorded drains
    for msg in (stream.held, stream.released):
        msg["counters"] = {
            name: value + (before.get(name, 0) if name != "generation" else 0)
            for name, value in msg["counters"].items()
        }
    added: list[dict[str, Any]] = [stream.held]
    produced = heartbeat["produced"]
    beat = heartbeat["t_ns"] + HEARTBEAT_NS
    while beat < stream.released["t_ns"]:
        if beat > stream.held["t_ns"]:
            added.append({**heartbeat, "t_ns": beat, "produced": produced + len(added)})
        beat += HEARTBEAT_NS
    added.append(stream.released)
    shift = stream.released["t_ns"] - compile_end
    kept = data[:bye_at]
    tail = [
        {**bye, "t_ns": bye["t_ns"] + shift, "produced": bye["produced"] + len(added)},
        {**end, "t_ns": end["t_ns"] + shift, "messages": end["messages"] + len(added)},
    ]
    TARGET.write_bytes(kept + b"".join(encode_message(msg) for msg in [*added, *tail]))
    print(f"{TARGET}: {len(added)} messages added, the block released after {args.hold:g} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
