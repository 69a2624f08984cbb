"""What the fuzz targets are fed: recordings grown from real ones, damaged in every way a disk, a
transfer or a hostile writer can.

Two seeds, built once per process: the H200 demo recording (``examples/h200-demo.msgpack``, its
1 MB ``kernel_records`` cut to its first 64 chunks so that one input stays small) and a small
synthetic one written by the recorder (GEMM-shaped compiles as the agent batches them, pass rows
included, the H200 kernel module and a few chunks, a failed compile, an answer to a stacks
request, drops and a goodbye). An input is a window of a seed's frames behind its header, with
messages rewritten (fields replaced by hostile values, kernel chunks bent, real messages with
one field wrong, made-up messages of known types) and re-framed with a valid checksum, so that
they reach the model and the exports, then bytes damaged (bits flipped, stretches overwritten,
inserted, deleted, duplicated, the file cut).
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
from hypothesis import strategies as st

from iket_tui.model import synthetic
from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import encode_batch, encode_message
from iket_tui.protocol.frames import FrameDecoder, FrameError, encode_frame
from iket_tui.protocol.recording import MAGIC
from iket_tui.ring.layout import layout_by_id
from iket_tui.sources.reading import read_recording
from iket_tui.sources.recorder import RecordingWriter

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"
KERNEL_CHUNKS = 64
"""Chunks kept of the H200 ``kernel_records`` (of 3,840): real device output, small enough to
decode many times a second."""


def frames_of(data: bytes) -> list[bytes]:
    """The frames (header and body) of an intact recording, its header frame first."""
    decoder = FrameDecoder()
    decoder.feed(data[len(MAGIC) :])
    return [encode_frame(body) for body in decoder]


def _small_records(records: m.Message, chunks: int = KERNEL_CHUNKS) -> m.Message:
    size = layout_by_id(records["layout"]).chunk_bytes
    return {**records, "count": chunks, "chunks": records["chunks"][: chunks * size]}


@functools.cache
def seeds() -> dict[str, tuple[bytes, ...]]:
    """Every seed recording as its frames, the ``recording`` header first."""
    h200 = EXAMPLE.read_bytes()
    messages, _ = read_recording(EXAMPLE)
    module = next(msg for msg in messages if msg["type"] == m.KERNEL_MODULE)
    records = next(msg for msg in messages if msg["type"] == m.KERNEL_RECORDS)
    small = encode_message(_small_records(records))
    h200_frames = [small if frame == encode_message(records) else frame for frame in frames_of(h200)]

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "synthetic.msgpack"
        writer = RecordingWriter(path, source="pid 4242: python kernels/demo.py", checkpoint_every=100)
        writer.write(synthetic.agent_hello())
        writer.write(m.sync(t_ns=1, backlog=0, backlog_lost=0))
        writer.write(module)
        stream = list(synthetic.bulk(400))
        for start in range(0, len(stream), 16):
            batch = stream[start : start + 16]
            writer.write_frames(encode_batch(batch), batch)
            if start % 160 == 0:
                writer.write(m.heartbeat(t_ns=stream[start]["t_ns"], produced=start, dropped=0, open_passes=1))
        writer.write(_small_records(records, 8))
        last = stream[-1]["t_ns"]
        writer.write(m.callback_mismatch(compile=3, context=0, expected="tl.Simplify", got="tl.LowerTileOp", t_ns=last))
        writer.write(
            m.compile_failure(
                compile=3,
                stage="pass",
                seq=5,
                name="tl.LayoutInference",
                error="InternalError: Layout infer conflict",
                error_type="tvm.error.InternalError",
                t_ns=last,
                ir_script="# from tvm.script import tir as T",
            )
        )
        frames = [{"file": "gemm.py", "line": 12, "function": "main", "code": "kernel()"}]
        thread = {"id": 1, "name": "MainThread", "main": True, "daemon": False, "agent": False, "cut": 0}
        writer.write(m.response(id=1, what=m.WHAT_STACKS, t_ns=last, ok=True, threads=[{**thread, "frames": frames}]))
        writer.write(m.dropped(t_ns=last, count=3, total=3))
        writer.write(m.bye(t_ns=last + 1, produced=len(stream), dropped=3, reason="exit"))
        writer.close("target exited")
        synthetic_frames = frames_of(path.read_bytes())
    return {"h200": tuple(h200_frames), "synthetic": tuple(synthetic_frames)}


@functools.cache
def templates() -> dict[str, m.Message]:
    """One real message of every type the seeds hold, by type."""
    found: dict[str, m.Message] = {}
    for frames in seeds().values():
        for frame in frames:
            body = msgpack.unpackb(frame[8:], raw=False)
            for item in body["messages"] if body["type"] == m.BATCH else [body]:
                msg = m.as_message(item)
                found.setdefault(msg["type"], msg)
    return found


@functools.cache
def field_names() -> tuple[str, ...]:
    """Every key of every message in the seeds, and the counters of a kernel batch."""
    names: set[str] = set()
    for frames in seeds().values():
        for frame in frames:
            body = msgpack.unpackb(frame[8:], raw=False)
            for msg in body["messages"] if body["type"] == m.BATCH else [body]:
                if isinstance(msg, dict):
                    names.update(msg)
                    if isinstance(msg.get("counters"), dict):
                        names.update(msg["counters"])
    return tuple(sorted(names))


_EDGE_INTS = (0, -1, 1, 5, 8, 31, 64, 255, 256, 2**16, 2**31, 2**32, 2**63 - 1, 2**63, 2**64 - 1, -(2**63))


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


def _scalars() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.sampled_from(_EDGE_INTS),
        st.integers(min_value=-(2**63), max_value=2**64 - 1),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=24),
        st.binary(max_size=48),
        st.sampled_from(sorted(m.KNOWN_TYPES)),
    )


def _keys() -> st.SearchStrategy[Any]:
    return st.one_of(st.sampled_from(field_names()), st.text(max_size=8), st.binary(max_size=4), st.integers())


def hostile_values() -> st.SearchStrategy[Any]:
    """Values for a field: right or wrong types, extreme numbers, nested or big containers."""
    nested = st.recursive(
        _scalars(),
        lambda inner: st.lists(inner, max_size=6) | st.dictionaries(_keys(), inner, max_size=4),
        max_leaves=24,
    )
    return st.one_of(
        nested,
        st.integers(min_value=1, max_value=1100).map(_nested),
        st.sampled_from([[0] * 50_000, "x" * 300_000, b"\x00" * 300_000, [{} for _ in range(20_000)]]),
    )


def _pack(value: Any) -> bytes | None:
    """A message as a frame with a valid checksum; None for one msgpack or a frame cannot hold."""
    try:
        return encode_frame(msgpack.packb(value, use_bin_type=True))
    except (OverflowError, ValueError, TypeError, FrameError):
        return None


@st.composite
def _rewritten(draw: st.DrawFn, frame: bytes) -> bytes:
    """A frame whose message (or one message of its batch) has a field replaced, removed or added."""
    body = msgpack.unpackb(frame[8:], raw=False, strict_map_key=False)
    target = body
    if isinstance(body, dict) and isinstance(body.get("messages"), list) and body["messages"]:
        target = draw(st.sampled_from(body["messages"]))
    if isinstance(target, list) and target:
        target[draw(st.integers(0, len(target) - 1))] = draw(hostile_values())
    elif isinstance(target, dict):
        inner = target.get("counters")
        if isinstance(inner, dict) and draw(st.booleans()):
            target = inner
        action = draw(st.sampled_from(["replace", "remove", "add"]))
        if action == "replace" and target:
            target[draw(st.sampled_from(sorted(target, key=repr)))] = draw(hostile_values())
        elif action == "remove" and target:
            del target[draw(st.sampled_from(sorted(target, key=repr)))]
        else:
            target[draw(_keys())] = draw(hostile_values())
    return _pack(body) or frame


@st.composite
def _bent_chunks(draw: st.DrawFn, frame: bytes) -> bytes:
    """A ``kernel_records`` frame whose chunks hold odd headers or flipped bits, the count kept."""
    msg = msgpack.unpackb(frame[8:], raw=False, strict_map_key=False)
    try:
        chunks = np.frombuffer(msg["chunks"], dtype=layout_by_id(msg["layout"]).drained_dtype).copy()
    except (KeyError, TypeError, ValueError):  # not an intact kernel_records
        return frame
    if not len(chunks):
        return frame
    raw = chunks.view(np.uint8)
    for _ in range(draw(st.integers(1, 8))):
        if draw(st.booleans()):
            field = draw(st.sampled_from([name for name in chunks.dtype.names or () if name != "words"]))
            kind = chunks.dtype[field]
            top = int(np.iinfo(kind.base).max) if kind.base.kind in "ui" else 0
            chunks[field][draw(st.integers(0, len(chunks) - 1))] = draw(st.integers(0, top))
        else:
            raw[draw(st.integers(0, len(raw) - 1))] ^= 1 << draw(st.integers(0, 7))
    return _pack({**msg, "chunks": chunks.tobytes()}) or frame


@st.composite
def _new_message(draw: st.DrawFn) -> bytes:
    """A message of a known type: a real one with one field wrong or missing, or made up."""
    if draw(st.booleans()):
        msg = dict(draw(st.sampled_from(sorted(templates().values(), key=lambda msg: msg["type"]))))
        key = draw(st.sampled_from(sorted(msg)))
        if draw(st.integers(0, 3)):
            msg[key] = draw(hostile_values())
        else:
            del msg[key]
    else:
        fields = draw(st.dictionaries(st.sampled_from(field_names()), hostile_values(), max_size=8))
        msg = {"type": draw(st.sampled_from(sorted(m.KNOWN_TYPES))), **fields}
    if draw(st.booleans()):
        row = [msg.get("type"), *range(9)]
        msg = {"type": m.BATCH, "messages": [msg, draw(st.sampled_from([msg, row, []]))]}
    return _pack(msg) or encode_message(m.sync(t_ns=1, backlog=0, backlog_lost=0))


@st.composite
def recordings(draw: st.DrawFn) -> bytes:
    """A recording file's bytes: a window of a seed, its messages rewritten, its bytes damaged."""
    frames = seeds()[draw(st.sampled_from(sorted(seeds())))]
    start = draw(st.integers(1, len(frames) - 1))
    window = list(frames[start : start + draw(st.integers(0, 48))])
    if draw(st.integers(0, 9)):
        window.insert(0, frames[0])
    for _ in range(draw(st.integers(0, 4))):
        if not window:
            break
        at = draw(st.integers(0, len(window) - 1))
        edit = draw(st.sampled_from(["rewrite", "rewrite", "chunks", "new", "duplicate"]))
        if edit == "rewrite":
            window[at] = draw(_rewritten(window[at]))
        elif edit == "chunks":
            window[at] = draw(_bent_chunks(window[at]))
        elif edit == "new":
            window.insert(at, draw(_new_message()))
        else:
            window.insert(at, window[at])
    data = bytearray(MAGIC + b"".join(window))
    for _ in range(draw(st.integers(0, 3))):
        _damage(draw, data)
    return bytes(data)


def _damage(draw: st.DrawFn, data: bytearray) -> None:
    if not data:
        return
    at = draw(st.integers(0, len(data) - 1))
    size = draw(st.integers(1, 4096))
    damage = draw(st.sampled_from(["flip", "flip", "overwrite", "insert", "delete", "duplicate", "cut"]))
    if damage == "flip":
        data[at] ^= 1 << draw(st.integers(0, 7))
    elif damage == "overwrite":
        pattern = draw(st.binary(min_size=1, max_size=64))
        data[at : at + size] = (pattern * (size // len(pattern) + 1))[: len(data[at : at + size])]
    elif damage == "insert":
        data[at:at] = draw(st.binary(min_size=1, max_size=256))
    elif damage == "delete":
        del data[at : at + size]
    elif damage == "duplicate":
        data[at:at] = data[at : at + size]
    else:
        del data[at:]
