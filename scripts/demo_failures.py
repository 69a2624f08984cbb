"""Add to the demo's H200 recordings (``examples/h200-demo.msgpack`` and the bundled
``h200-demo-waiting.msgpack`` made from it) what ``iket-tui repro`` needs of their two failed
compiles, which the agent that made them did not capture yet: the
``compile_failure`` of ``layout_conflict`` (the module ``tl.LayoutInference`` was given, the
target, the pass-context configuration) and of ``nvcc_error`` (the CUDA source nvcc rejected,
nvcc's arguments and output).

    python scripts/demo_failures.py

It runs those two kernels of the demo program here under the agent (``iket-tui run --no-ui
--record``), the same compiles for the same target (sm_90a) with the same TileLang, and takes
the agent's captures from that recording. Each goes in just before its compile's
``compile_end`` in each recording, with that compile's number and time; the counts that
follow it (``produced`` of heartbeats and the ``bye``, ``messages`` of checkpoints and the
``end``) count it. Every other frame is kept byte for byte. Captures already there are replaced.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import msgpack

from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import encode_batch, encode_message
from iket_tui.protocol.frames import HEADER, HEADER_SIZE
from iket_tui.protocol.recording import MAGIC
from iket_tui.sources.reading import read_recording

ROOT = Path(__file__).resolve().parents[1]
TARGETS = (ROOT / "examples" / "h200-demo.msgpack", ROOT / "examples" / "h200-demo-waiting.msgpack")
FAILING = ("layout_conflict", "nvcc_error")
COUNTED = {m.HEARTBEAT: "produced", m.BYE: "produced", m.CHECKPOINT: "messages", m.END: "messages"}
"""The messages that count those before them, and their field that does."""


def split(data: bytes) -> list[tuple[bytes, dict[str, Any] | None]]:
    """Each frame's bytes and its message (None for a frame that holds no map)."""
    found = []
    at = len(MAGIC)
    while at < len(data):
        length, _ = HEADER.unpack_from(data, at)
        frame = data[at : at + HEADER_SIZE + length]
        msg = msgpack.unpackb(frame[HEADER_SIZE:], raw=False, strict_map_key=False)
        found.append((frame, msg if isinstance(msg, dict) else None))
        at += len(frame)
    return found


def flat(frames: list[tuple[bytes, dict[str, Any] | None]]) -> list[dict[str, Any]]:
    """Every message of the frames, those of batches in their place."""
    found: list[dict[str, Any]] = []
    for _, msg in frames:
        if msg is not None:
            inner = msg["messages"] if msg.get("type") == m.BATCH else [msg]
            found.extend(one for one in inner if isinstance(one, dict))  # not the pass rows
    return found


def captured_here() -> dict[str, dict[str, Any]]:
    """The agent's ``compile_failure`` of each failing demo kernel, by kernel, from a run here."""
    with tempfile.TemporaryDirectory() as scratch:
        recording = Path(scratch) / "captures.msgpack"
        program = [sys.executable, "-m", "iket_tui.demo.program", "--kernels", ",".join(FAILING), "--pause", "0"]
        command = [sys.executable, "-m", "iket_tui", "run", "--no-ui", "--record", str(recording), "--", *program]
        subprocess.run(command, check=True, cwd=scratch)
        messages, _ = read_recording(recording)
    kernels = {msg["compile"]: msg["kernel"] for msg in messages if msg["type"] == m.COMPILE_BEGIN}
    return {kernels[msg["compile"]]: msg for msg in messages if msg["type"] == m.COMPILE_FAILURE}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    for target in TARGETS:
        if not target.read_bytes().startswith(MAGIC):
            print(f"{target}: not a recording", file=sys.stderr)
            return 2
    captures = captured_here()
    missing = [kernel for kernel in FAILING if kernel not in captures]
    if missing:
        print(f"no capture of {', '.join(missing)} in the run here", file=sys.stderr)
        return 1
    for target in TARGETS:
        data, added = with_captures(target.read_bytes(), captures)
        target.write_bytes(data)
        print(f"{target}: the captures of {added} failed compiles added")
    return 0


def with_captures(data: bytes, captures: dict[str, dict[str, Any]]) -> tuple[bytes, int]:
    """The recording ``data`` with ``captures`` in place of any it held; how many went in."""
    frames = split(data)
    kernels = {msg["compile"]: msg["kernel"] for msg in flat(frames) if msg["type"] == m.COMPILE_BEGIN}
    out = [data[: len(MAGIC)]]
    added = removed = 0
    for frame, msg in frames:
        if msg is None:
            out.append(frame)
            continue
        inner = msg["messages"] if msg.get("type") == m.BATCH else [msg]
        kept: list[Any] = []
        for one in inner:
            kind = one.get("type") if isinstance(one, dict) else None  # a pass row, kept as it is
            if kind == m.COMPILE_FAILURE:
                removed += 1  # a capture added before: replaced
                continue
            if kind == m.COMPILE_END and one.get("ok") is False and kernels.get(one["compile"]) in captures:
                kept.append({**captures[kernels[one["compile"]]], "compile": one["compile"], "t_ns": one["t_ns"]})
                added += 1
            if added != removed and kind in COUNTED:
                one = {**one, COUNTED[kind]: one[COUNTED[kind]] + added - removed}
            kept.append(one)
        if kept == inner:
            out.append(frame)
        elif msg.get("type") == m.BATCH:
            out.append(encode_batch(kept))
        else:
            out.extend(encode_message(one) for one in kept)
    return b"".join(out), added


if __name__ == "__main__":
    sys.exit(main())
