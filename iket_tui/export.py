"""Recordings as files that other viewers open: a Chrome trace (Perfetto, ``chrome://tracing``)
of every kernel launch and compile, and a speedscope profile of every compile's passes.

Pure conversion: a recording's messages go in, a JSON-ready dict comes out. Kernel events are
stamped by the GPU's ``%globaltimer`` and compiles by the host's monotonic clock; nothing in a
recording ties the two together, so each side is placed relative to its own first moment and
the trace says so in its metadata.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final

import numpy as np

from iket_tui import __version__
from iket_tui.model.launches import SPAN_NO_END, SPAN_NO_START, Launch
from iket_tui.model.nodes import CodegenNode, CompileNode, PassNode
from iket_tui.model.pass_tree import PassTree
from iket_tui.model.session import Session
from iket_tui.ring.layout import PAYLOAD_FLOAT32, PAYLOAD_INT32, PAYLOAD_NAMES, PAYLOAD_UINT32

FORMATS: Final = ("chrome", "speedscope")
SPEEDSCOPE_SCHEMA: Final = "https://www.speedscope.app/file-format-schema.json"
COMPILES_PID: Final = 1
"""The Chrome trace process that holds the compiles; launches follow it, one process each."""
STREAM_END: Final = "the recording ends here"
NO_END: Final = "no end"
NO_START: Final = "no start"
ORPHAN_END_NAME: Final = "(range end without a start)"
CLOCKS_NOTE: Final = (
    "Kernel launches are timed by the GPU clock (%globaltimer), each placed at its own start "
    "relative to the first launch; compiles are timed by the host's monotonic clock, relative to "
    "the first compile. The two clocks are not aligned: a launch and a compile at the same place "
    "on the time axis did not necessarily run at the same time."
)


class ExportError(ValueError):
    """A recording that holds nothing the chosen format can show; the message is one line."""


def recording_session(messages: Iterable[Any]) -> Session:
    """The session of a whole recording: its pass tree and kernel timeline; whatever was still
    open when the recording ends is closed as incomplete at the last time seen."""
    session = Session()
    session.apply(messages)
    session.end_stream(STREAM_END)
    return session


def session_notes(session: Session) -> tuple[str, ...]:
    """One-line remarks for the user about messages of the recording that the export left out."""
    malformed = session.counters.malformed
    if not malformed:
        return ()
    return (f"skipped {malformed} malformed messages (missing or impossible fields, e.g. a damaged kernel batch)",)


def export(session: Session, fmt: str, *, name: str = "") -> dict[str, Any]:
    """The document of format ``fmt`` (one of :data:`FORMATS`) for a recording's session."""
    if fmt == "chrome":
        return chrome_trace(session, name=name)
    if fmt == "speedscope":
        return speedscope(session, name=name)
    raise ExportError(f"unknown export format {fmt!r} (choose {' or '.join(FORMATS)})")


def events_in(document: dict[str, Any]) -> int:
    """How many timed events a document holds (metadata not counted)."""
    if "traceEvents" in document:
        return sum(1 for event in document["traceEvents"] if event["ph"] != "M")
    return sum(len(profile["events"]) for profile in document["profiles"])


# -- Chrome trace -------------------------------------------------------------------------------


def chrome_trace(session: Session, *, name: str = "") -> dict[str, Any]:
    """A Chrome trace: a ``compiles`` process with a thread per compile holding its passes and
    codegen steps as nested complete events, and a process per kernel launch with a thread per
    (block, warp) holding its ranges as complete events and its marks as instant events."""
    tree = session.tree
    launches = sorted(session.kernels.launches.values(), key=lambda launch: launch.order)
    if not tree.compiles and not launches:
        raise ExportError("nothing to export: the recording holds no compile and no kernel launch")
    events: list[dict[str, Any]] = []
    compile_origin = min((comp.begin_ns for comp in tree.compiles), default=0)
    if tree.compiles:
        events += _compile_events(tree, compile_origin, session.last_t_ns)
    kernel_origin = min((launch.first_ns for launch in launches), default=0)
    launch_info = []
    for index, launch in enumerate(launches):
        pid = COMPILES_PID + 1 + index
        events += _launch_events(launch, pid, launch.first_ns - kernel_origin)
        launch_info.append(
            {
                "pid": pid,
                "kernel": launch.kernel,
                "launch": launch.key[3],
                "compile": launch.compile,
                "grid": list(launch.grid()),
                "events": launch.records,
                "first_ns": launch.first_ns,
                "last_ns": launch.last_ns,
            }
        )
    other: dict[str, Any] = {
        "exporter": f"iket-tui {__version__}",
        "clocks": CLOCKS_NOTE,
        "compile_origin_ns": compile_origin,
        "kernel_origin_ns": kernel_origin,
        "launches": launch_info,
    }
    if name:
        other["recording"] = name
    if session.process.command:
        other["command"] = session.process.command
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": other}


def _us(ns: int) -> float:
    """Nanoseconds as the microseconds a trace holds: the double nearest ``ns / 1000`` that is
    not below it, so that a reader that multiplies by 1000 and truncates (as Perfetto does)
    gets ``ns`` back exactly."""
    micros = ns / 1000
    return math.nextafter(micros, math.inf) if micros * 1000 < ns else micros


def _us_array(ns: np.ndarray[Any, np.dtype[np.int64]]) -> list[float]:
    """:func:`_us` of every element."""
    micros = ns / 1000
    exact: list[float] = np.where(micros * 1000 < ns, np.nextafter(micros, np.inf), micros).tolist()
    return exact


def _meta(kind: str, pid: int, tid: int | None, **args: Any) -> dict[str, Any]:
    event: dict[str, Any] = {"ph": "M", "name": kind, "pid": pid, "args": args}
    if tid is not None:
        event["tid"] = tid
    return event


def _complete(
    name: str, cat: str, pid: int, tid: int, begin_ns: int, end_ns: int, args: dict[str, Any]
) -> dict[str, Any]:
    return {
        "ph": "X",
        "name": name,
        "cat": cat,
        "pid": pid,
        "tid": tid,
        "ts": _us(begin_ns),
        "dur": _us(max(0, end_ns - begin_ns)),
        "args": args,
    }


def _compile_events(tree: PassTree, origin: int, last: int) -> list[dict[str, Any]]:
    pid = COMPILES_PID
    events = [
        _meta("process_name", pid, None, name="compiles (host clock)"),
        _meta("process_sort_index", pid, None, sort_index=0),
    ]
    for comp in tree.compiles:
        tid = comp.position + 1
        finish = _compile_finish(comp, last)
        events.append(_meta("thread_name", pid, tid, name=f"compile {comp.id}: {comp.title}"))
        events.append(_meta("thread_sort_index", pid, tid, sort_index=tid))
        events.append(
            _complete(comp.title, "compile", pid, tid, comp.begin_ns - origin, finish - origin, _compile_args(comp))
        )
        for node in _passes_in_order(comp):
            end = node.end_ns if node.end_ns is not None else finish
            events.append(
                _complete(node.name, "pass", pid, tid, node.start_ns - origin, end - origin, _pass_args(node))
            )
        for step in comp.codegen_steps:
            end = step.end_ns if step.end_ns is not None else finish
            events.append(
                _complete(step.title, "codegen", pid, tid, step.begin_ns - origin, end - origin, _step_args(step))
            )
    return events


def _compile_finish(comp: CompileNode, last_ns: int) -> int:
    """When a compile ended, or the last time seen for one that never did."""
    return comp.end_ns if comp.end_ns is not None else max(comp.begin_ns, last_ns)


def _compile_args(comp: CompileNode) -> dict[str, Any]:
    args: dict[str, Any] = {"compile": comp.id, "status": str(comp.status), "label": comp.label}
    if comp.target:
        args["target"] = comp.target
    for key, value in (("stage", comp.stage), ("error_type", comp.error_type), ("error", comp.error)):
        if value is not None:
            args[key] = value
    return args


def _pass_args(node: PassNode) -> dict[str, Any]:
    args: dict[str, Any] = {"phase": node.phase, "status": str(node.status), "seq": node.seq, "depth": node.depth}
    if node.error is not None:
        args["error"] = node.error
    return args


def _step_args(step: CodegenNode) -> dict[str, Any]:
    args: dict[str, Any] = {"step": step.name, "status": str(step.status)}
    if step.error is not None:
        args["error"] = step.error
    return args


def _passes_in_order(comp: CompileNode) -> Iterator[PassNode]:
    """Every pass of a compile, each before its children, contexts in the order they began."""
    for ctx in comp.context_order:
        stack = list(reversed(ctx.roots))
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))


def _launch_events(launch: Launch, pid: int, offset_ns: int) -> list[dict[str, Any]]:
    """A launch's process: a thread per (block, warp), a complete event per range (an unbalanced
    one drawn to the launch's last or from its first event, and flagged), an instant per mark."""
    spans = launch.spans()
    grid = "x".join(str(size) for size in launch.grid())
    events = [
        _meta("process_name", pid, None, name=f"{launch.kernel} launch {launch.key[3]} ({grid})"),
        _meta("process_sort_index", pid, None, sort_index=pid),
    ]
    names = _event_names(launch)
    max_warps = spans.max_warps
    ranges, marks = spans.spans, spans.marks
    range_lanes = ranges["block"].astype(np.int64) * max_warps + ranges["warp"]
    mark_lanes = marks["block"].astype(np.int64) * max_warps + marks["warp"]
    blocks = spans.blocks.tolist()
    for lane in np.unique(np.concatenate([range_lanes, mark_lanes])).tolist():
        block, warp = divmod(lane, max_warps)
        x, y, z = blocks[block]
        events.append(_meta("thread_name", pid, lane + 1, name=f"block ({x},{y},{z}) warp {warp}"))
        events.append(_meta("thread_sort_index", pid, lane + 1, sort_index=lane + 1))

    flags = ranges["flags"]
    begin = np.where(flags & SPAN_NO_START, 0, ranges["start_ns"].astype(np.int64))
    end = np.where(flags & SPAN_NO_END, launch.duration_ns, ranges["end_ns"].astype(np.int64))
    order = np.lexsort((begin - end, begin, range_lanes))  # per thread, by start, outer ranges first
    for lane, ts, dur, event, flag, sm, depth, payload in zip(
        range_lanes[order].tolist(),
        _us_array(offset_ns + begin[order]),
        _us_array(end[order] - begin[order]),
        ranges["event"][order].tolist(),
        flags[order].tolist(),
        ranges["sm"][order].tolist(),
        ranges["depth"][order].tolist(),
        _payloads(ranges["payload"][order], ranges["payload_type"][order]),
        strict=True,
    ):
        args: dict[str, Any] = {"sm": sm, "depth": depth}
        if payload is not None:
            args.update(payload)
        if flag & SPAN_NO_START:
            args["unbalanced"] = NO_START
            name = ORPHAN_END_NAME
        else:
            name = names(event)
            if flag & SPAN_NO_END:
                args["unbalanced"] = NO_END
        events.append(
            {"ph": "X", "name": name, "cat": "range", "pid": pid, "tid": lane + 1, "ts": ts, "dur": dur, "args": args}
        )

    for lane, ts, event, sm, payload in zip(
        mark_lanes.tolist(),
        _us_array(offset_ns + marks["t_ns"].astype(np.int64)),
        marks["event"].tolist(),
        marks["sm"].tolist(),
        _payloads(marks["payload"], marks["payload_type"]),
        strict=True,
    ):
        args = {"sm": sm}
        if payload is not None:
            args.update(payload)
        events.append(
            {
                "ph": "i",
                "s": "t",
                "name": names(event),
                "cat": "mark",
                "pid": pid,
                "tid": lane + 1,
                "ts": ts,
                "args": args,
            }
        )
    return events


def _event_names(launch: Launch) -> Callable[[int], str]:
    known: dict[int, str] = {}

    def name(event: int) -> str:
        found = known.get(event)
        if found is None:
            found = known[event] = launch.event_name(event)
        return found

    return name


def _payloads(bits: np.ndarray[Any, Any], kinds: np.ndarray[Any, Any]) -> list[dict[str, Any] | None]:
    """Each event's payload as ``{"payload": value, "payload_type": dtype}``, None without one."""
    raw = np.ascontiguousarray(bits, dtype=np.uint32)
    as_int = raw.view(np.int32).tolist()
    as_float = raw.view(np.float32)
    out: list[dict[str, Any] | None] = []
    for index, (kind, value) in enumerate(zip(kinds.tolist(), raw.tolist(), strict=True)):
        if kind == PAYLOAD_UINT32:
            out.append({"payload": value, "payload_type": PAYLOAD_NAMES[kind]})
        elif kind == PAYLOAD_INT32:
            out.append({"payload": as_int[index], "payload_type": PAYLOAD_NAMES[kind]})
        elif kind == PAYLOAD_FLOAT32:
            out.append({"payload": _float32(as_float[index]), "payload_type": PAYLOAD_NAMES[kind]})
        else:
            out.append(None)
    return out


def _float32(value: np.float32) -> float | str:
    """The shortest decimal that reads back as the same float32; JSON has no NaN or infinity,
    so those stay text."""
    text = str(value)
    number = float(text)
    return number if math.isfinite(number) else text


# -- speedscope ---------------------------------------------------------------------------------


def speedscope(session: Session, *, name: str = "") -> dict[str, Any]:
    """A speedscope file (its ``evented`` profile type): one profile per compile, a frame per
    pass name, open and close events from each pass's begin and end, in nanoseconds from the
    compile's begin."""
    tree = session.tree
    if not tree.compiles:
        raise ExportError("nothing to export: the recording holds no compile (speedscope shows pass timings)")
    frames: dict[str, int] = {}
    profiles = [_profile(comp, frames, session.last_t_ns) for comp in tree.compiles]
    document: dict[str, Any] = {
        "$schema": SPEEDSCOPE_SCHEMA,
        "shared": {"frames": [{"name": frame} for frame in frames]},
        "profiles": profiles,
        "activeProfileIndex": 0,
        "exporter": f"iket-tui@{__version__}",
    }
    if name:
        document["name"] = name
    return document


def _profile(comp: CompileNode, frames: dict[str, int], last_ns: int) -> dict[str, Any]:
    roots = [node for ctx in comp.context_order for node in ctx.roots]
    finish = _compile_finish(comp, last_ns)
    origin = min([comp.begin_ns, *(node.start_ns for node in roots)])
    end = max([finish, *(node.end_ns for node in roots if node.end_ns is not None)])
    events = []
    for kind, at, node in _balanced(roots, origin, end, finish):
        frame = frames.setdefault(node.name, len(frames))
        events.append({"type": kind, "at": at - origin, "frame": frame})
    return {
        "type": "evented",
        "name": f"compile {comp.id}: {comp.title} ({comp.status})",
        "unit": "nanoseconds",
        "startValue": 0,
        "endValue": end - origin,
        "events": events,
    }


def _balanced(roots: list[PassNode], lo: int, hi: int, finish: int) -> Iterator[tuple[str, int, PassNode]]:
    """Open and close events of a pass forest, balanced and in time order even where the
    recorded times are not: a pass is kept inside its parent and after its previous sibling,
    and one that never ended closes at ``finish`` (the compile's end)."""
    # Per open level: its children still to visit, its end, where the next child may begin, its pass.
    stack: list[tuple[Iterator[PassNode], int, list[int], PassNode | None]] = [
        (iter(sorted(roots, key=_start_key)), hi, [lo], None)
    ]
    while stack:
        children, bound, cursor, parent = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            if parent is not None:
                yield ("C", bound, parent)
                stack[-1][2][0] = bound
            continue
        begin = min(max(child.start_ns, cursor[0]), bound)
        stop = child.end_ns if child.end_ns is not None else finish
        stop = min(max(stop, begin), bound)
        yield ("O", begin, child)
        stack.append((iter(sorted(child.children, key=_start_key)), stop, [begin], child))


def _start_key(node: PassNode) -> tuple[int, int]:
    return (node.start_ns, node.order)
