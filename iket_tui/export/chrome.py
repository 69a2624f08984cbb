"""A recording as a Chrome trace (Perfetto, ``chrome://tracing``): a ``compiles`` process with a
thread per compile holding its passes and codegen steps as nested complete events, and a
process per kernel launch with a thread per (block, warp) holding its ranges as complete
events and its marks as instant events.

A recording of several processes has a trace process per watched process instead, numbered
from 1 in the order they appeared, named by pid, rank and command line and sorted by rank:
its compiles' threads are under it, and its launches' (block, warp) threads too, each named
with its launch.

:class:`ChromeStream` writes the trace while the recording is read: a compile's events are
written when it ends (its end closes its children) and then forgotten, so memory stays bounded
by the compiles open at once; what is still open when the recording ends is written last, as
incomplete. A launch's kernel events leave the model for a temporary file once its warps have
all ended (or in pieces while it runs long), since where a launch goes on the time axis and
among the trace's threads is known only when every launch is: the launches are written at the
end, one at a time, in slices. The processes' names come with the launches, once every process
is known (a recording turns out to hold several only when a second one appears: the first
process's name written before is then renamed).

Kernel events are stamped by the GPU's ``%globaltimer`` and compiles by the host's monotonic
clock; nothing in a recording ties the two together, so each side is placed relative to its
own first moment and the trace says so in its metadata.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from typing import Any, Final

import numpy as np

from iket_tui import __version__
from iket_tui.export.common import (
    ExportError,
    compile_finish,
    launch_process,
    launches_of,
    micros,
    process_sort,
    process_title,
    sort_index,
)
from iket_tui.export.stream import CompileStream, forget, grid_of, lanes_of
from iket_tui.model.launches import SPAN_NO_END, SPAN_NO_START, Launch, Spans, pair_ranges
from iket_tui.model.nodes import CodegenNode, CompileNode, PassNode, ProcessNode
from iket_tui.model.session import Session
from iket_tui.ring.layout import PAYLOAD_FLOAT32, PAYLOAD_INT32, PAYLOAD_NAMES, PAYLOAD_UINT32

COMPILES_PID: Final = 1
"""The Chrome trace process that holds the compiles; launches follow it, one process each."""
NO_END: Final = "no end"
NO_START: Final = "no start"
ORPHAN_END_NAME: Final = "(range end without a start)"
CLOCKS_NOTE: Final = (
    "Kernel launches are timed by the GPU clock (%globaltimer), each placed at its own start "
    "relative to the first launch; compiles are timed by the host's monotonic clock, relative to "
    "the first compile. The two clocks are not aligned: a launch and a compile at the same place "
    "on the time axis did not necessarily run at the same time."
)
NOTHING: Final = "nothing to export: the recording holds no compile and no kernel launch"
_ENCODE: Final = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


def chrome_trace(session: Session, *, name: str = "") -> dict[str, Any]:
    """The Chrome trace of a whole session, as one document: the same events
    :class:`ChromeStream` writes, compiles in the order they began."""
    tree = session.tree
    launches = launches_of(session)
    if not tree.compiles and not launches:
        raise ExportError(NOTHING)
    events: list[dict[str, Any]] = []
    compile_origin = min((comp.begin_ns for comp in tree.compiles), default=0)
    if tree.compiles and not tree.several:
        events += _compiles_process()
    quoted: dict[str | None, str] = {}
    numbers = _numbers(tree.processes)
    for comp in tree.compiles:
        pid = _pid(numbers, comp.process)
        events += _compile_events(comp, pid, compile_origin, session.last_t_ns, quoted)
    kernel_origin = min((launch.first_ns for launch in launches), default=0)
    spans = [launch.spans() for launch in launches]
    placed = _placed(session, launches, [len(one.blocks) * one.max_warps for one in spans], numbers)
    if tree.several:
        events += _processes(session, launches)
    for launch, found, (pid, base) in zip(launches, spans, placed, strict=True):
        events += _launch_events(launch, found, launch.grid(), pid, launch.first_ns - kernel_origin, base)
    grids = [launch.grid() for launch in launches]
    other = _other_data(session, launches, grids, placed, compile_origin, kernel_origin, name)
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": other}


class ChromeStream(CompileStream):
    """A Chrome trace written while a recording is read: :meth:`feed` each chunk of messages,
    then :meth:`finish`. Nothing is written before the first event, so a recording with
    nothing to show is refused (:class:`ExportError`) with nothing written."""

    def __init__(self, write: Callable[[bytes], object], *, name: str = "") -> None:
        super().__init__()
        self.events = 0
        """Timed events written so far (metadata not counted)."""
        self._write = write
        self._name = name
        self._started = False
        self._origin: int | None = None
        self._quoted: dict[str | None, str] = {}
        self._numbers: dict[ProcessNode, int] = {}

    def _finish(self) -> int:
        """Write what is still open (as incomplete, to the last time seen), the kernel launches
        and the trace's metadata; the number of timed events written."""
        session = self.session
        launches = self._close()
        if not self._started and not launches:
            raise ExportError(NOTHING)
        kernel_origin = min((launch.first_ns for launch in launches), default=0)
        numbers = _numbers(session.tree.processes)
        several = session.tree.several
        lanes = [lanes_of(self.kernel_events.events(launch)) if several else 0 for launch in launches]
        placed = _placed(session, launches, lanes, numbers)
        if several:
            self._emit(_processes(session, launches))
        grids: list[tuple[int, int, int]] = []
        for launch, (pid, base) in zip(launches, placed, strict=True):
            events = self.kernel_events.events(launch)
            grid = grid_of(events)
            grids.append(grid)
            spans = pair_ranges(events, launch.first_ns)
            del events
            batch: list[dict[str, Any]] = []
            for event in _launch_events(launch, spans, grid, pid, launch.first_ns - kernel_origin, base):
                batch.append(event)
                if len(batch) == EMIT_BATCH:
                    self._emit(batch)
                    batch = []
            self._emit(batch)
        origin = self._origin if self._origin is not None else 0
        other = _other_data(session, launches, grids, placed, origin, kernel_origin, self._name)
        self._write(b'],"displayTimeUnit":"ns","otherData":' + _ENCODE(other).encode() + b"}")
        return self.events

    def _ended(self, comp: CompileNode) -> None:
        """Write a compile's events, then let go of its passes and steps."""
        tree = self.session.tree
        if self._origin is None:
            self._origin = min(other.begin_ns for other in tree.compiles)
            if not tree.several:
                self._emit(_compiles_process())
        if len(self._numbers) != len(tree.processes):
            self._numbers = _numbers(tree.processes)
        pid = _pid(self._numbers, comp.process)
        text = _compile_text(comp, pid, self._origin, self.session.last_t_ns, self._quoted)
        self.events += 1 + sum(len(ctx.passes) for ctx in comp.context_order) + len(comp.codegen_steps)
        self._text(text)
        forget(comp)

    def _emit(self, events: list[dict[str, Any]]) -> None:
        if not events:
            return
        self.events += sum(1 for event in events if event["ph"] != "M")
        self._text(_ENCODE(events)[1:-1])

    def _text(self, text: str) -> None:
        """Write events given as JSON text joined by commas (the trace's head before the first)."""
        if self._started:
            self._write(b"," + text.encode())
        else:
            self._started = True
            self._write(b'{"traceEvents":[' + text.encode())


EMIT_BATCH: Final = 20_000
"""Kernel events encoded and written at a time, so that a large launch is never held as objects
whole."""


def _numbers(processes: list[ProcessNode]) -> dict[ProcessNode, int]:
    """Each process's trace pid: its place among the processes that appeared, from 1."""
    return {process: number for number, process in enumerate(processes, start=1)}


def _pid(numbers: dict[ProcessNode, int], process: ProcessNode | None) -> int:
    return numbers.get(process, COMPILES_PID) if process is not None else COMPILES_PID


Placed = tuple[int, int | None]
"""Where a launch's threads go: the trace pid, and the tid its (block, warp) threads count
from in a process of several (None: the launch is a trace process of its own)."""


def _placed(
    session: Session, launches: list[Launch], lanes: list[int], numbers: dict[ProcessNode, int]
) -> list[Placed]:
    """Each launch's place: a trace process of its own after the compiles' in a recording of one
    process; in one of several, its process's pid and threads numbered after every compile's
    and every earlier launch's (``lanes``: each launch's blocks times its widest block's warps)."""
    if not session.tree.several:
        return [(COMPILES_PID + 1 + index, None) for index in range(len(launches))]
    placed: list[Placed] = []
    base = len(session.tree.compiles)
    for launch, count in zip(launches, lanes, strict=True):
        placed.append((_pid(numbers, launch_process(session, launch)), base))
        base += count
    return placed


def _processes(session: Session, launches: list[Launch]) -> list[dict[str, Any]]:
    """The names and order of the processes of a recording of several that have a compile or a
    launch to show."""
    shown = {comp.process for comp in session.tree.compiles}
    shown.update(launch_process(session, launch) for launch in launches)
    events: list[dict[str, Any]] = []
    for number, process in process_sort(session.tree.processes):
        if process in shown:
            events.append(_meta("process_name", number, None, name=process_title(process)))
            events.append(_meta("process_sort_index", number, None, sort_index=sort_index(process, number)))
    return events


def _other_data(
    session: Session,
    launches: list[Launch],
    grids: list[tuple[int, int, int]],
    placed: list[Placed],
    compile_origin: int,
    kernel_origin: int,
    name: str,
) -> dict[str, Any]:
    several = session.tree.several
    described: list[dict[str, Any]] = []
    for launch, grid, (pid, base) in zip(launches, grids, placed, strict=True):
        about: dict[str, Any] = {
            "pid": pid,
            "kernel": launch.kernel,
            "launch": launch.key[3],
            "compile": launch.compile,
            "grid": list(grid),
            "events": launch.records,
            "first_ns": launch.first_ns,
            "last_ns": launch.last_ns,
        }
        if several:
            about["process"] = launch_process(session, launch).pid
            about["first_tid"] = (base or 0) + 1
        described.append(about)
    other: dict[str, Any] = {
        "exporter": f"iket-tui {__version__}",
        "clocks": CLOCKS_NOTE,
        "compile_origin_ns": compile_origin,
        "kernel_origin_ns": kernel_origin,
        "launches": described,
    }
    if several:
        other["processes"] = [
            {"pid": number, "process": process.pid, "rank": process.rank, "command": process.command}
            for number, process in enumerate(session.tree.processes, start=1)
        ]
    if name:
        other["recording"] = name
    if session.process.command:
        other["command"] = session.process.command
    return other


def _us_array(ns: np.ndarray[Any, np.dtype[np.int64]]) -> list[float]:
    """:func:`~iket_tui.export.common.micros` of every element."""
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
        "ts": micros(begin_ns),
        "dur": micros(max(0, end_ns - begin_ns)),
        "args": args,
    }


def _compiles_process() -> list[dict[str, Any]]:
    return [
        _meta("process_name", COMPILES_PID, None, name="compiles (host clock)"),
        _meta("process_sort_index", COMPILES_PID, None, sort_index=0),
    ]


def _compile_events(
    comp: CompileNode, pid: int, origin: int, last: int, quoted: dict[str | None, str]
) -> list[dict[str, Any]]:
    """A compile's thread as event objects (see :func:`_compile_text`)."""
    events: list[dict[str, Any]] = json.loads("[" + _compile_text(comp, pid, origin, last, quoted) + "]")
    return events


def _compile_text(comp: CompileNode, pid: int, origin: int, last: int, quoted: dict[str | None, str]) -> str:
    """A compile's thread in trace process ``pid``, as the JSON text of its events joined by
    commas: its name, the compile as a complete event, then its passes (each before its
    children) and its codegen steps. Written as text rather than encoded from objects: a pass
    is most of a trace, and this is most of the cost of writing one. ``quoted`` keeps pass
    names and phases as JSON strings from one compile to the next."""
    tid = comp.position + 1
    finish = compile_finish(comp, last)
    head = [
        _meta("thread_name", pid, tid, name=f"compile {comp.id}: {comp.title}"),
        _meta("thread_sort_index", pid, tid, sort_index=tid),
        _complete(comp.title, "compile", pid, tid, comp.begin_ns - origin, finish - origin, _compile_args(comp)),
    ]
    parts = [_ENCODE(head)[1:-1]]
    prefix = '{"ph":"X","name":'
    middle = f',"cat":"pass","pid":{pid},"tid":{tid},"ts":'
    for ctx in comp.context_order:
        stack = list(reversed(ctx.roots))
        while stack:
            node = stack.pop()
            end = node.end_ns if node.end_ns is not None else finish
            start = node.start_ns - origin
            name = quoted.get(node.name) or _quote(node.name, quoted)
            phase = quoted.get(node.phase) or _quote(node.phase, quoted)
            error = "" if node.error is None else ',"error":' + _ENCODE(node.error)
            parts.append(
                f'{prefix}{name}{middle}{micros(start)!r},"dur":{micros(max(0, end - origin - start))!r},'
                f'"args":{{"phase":{phase},"status":"{node.status}","seq":{node.seq},"depth":{node.depth}{error}}}}}'
            )
            if node.children:
                stack.extend(reversed(node.children))
    steps = [
        _complete(
            step.title,
            "codegen",
            pid,
            tid,
            step.begin_ns - origin,
            (step.end_ns if step.end_ns is not None else finish) - origin,
            _step_args(step),
        )
        for step in comp.codegen_steps
    ]
    if steps:
        parts.append(_ENCODE(steps)[1:-1])
    return ",".join(parts)


QUOTED_MAX: Final = 100_000
"""How many pass names and phases a trace keeps as JSON text (a few hundred make a real one)."""


def _quote(text: str | None, quoted: dict[str | None, str]) -> str:
    found = _ENCODE(text)
    if len(quoted) < QUOTED_MAX:
        quoted[text] = found
    return found


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


def _launch_events(
    launch: Launch, spans: Spans, grid: tuple[int, int, int], pid: int, offset_ns: int, base: int | None = None
) -> Iterator[dict[str, Any]]:
    """A launch's process: a thread per (block, warp), a complete event per range (an unbalanced
    one drawn to the launch's last or from its first event, and flagged), an instant per mark.
    ``spans`` are its ranges and marks paired, ``grid`` its shape. With ``base``, the launch's
    threads go in the process ``pid`` of its watched process, numbered from ``base + 1`` and
    named with the launch."""
    title = f"{launch.kernel} launch {launch.key[3]} ({'x'.join(str(size) for size in grid)})"
    if base is None:
        yield _meta("process_name", pid, None, name=title)
        yield _meta("process_sort_index", pid, None, sort_index=pid)
        first, prefix = 1, ""
    else:
        first, prefix = base + 1, f"{title} "
    names = _event_names(launch)
    max_warps = spans.max_warps
    ranges, marks = spans.spans, spans.marks
    range_lanes = ranges["block"].astype(np.int64) * max_warps + ranges["warp"]
    mark_lanes = marks["block"].astype(np.int64) * max_warps + marks["warp"]
    blocks = spans.blocks.tolist()
    for lane in np.unique(np.concatenate([range_lanes, mark_lanes])).tolist():
        block, warp = divmod(lane, max_warps)
        x, y, z = blocks[block]
        yield _meta("thread_name", pid, lane + first, name=f"{prefix}block ({x},{y},{z}) warp {warp}")
        yield _meta("thread_sort_index", pid, lane + first, sort_index=lane + first)

    flags = ranges["flags"]
    begin = np.where(flags & SPAN_NO_START, 0, ranges["start_ns"].astype(np.int64))
    end = np.where(flags & SPAN_NO_END, launch.duration_ns, ranges["end_ns"].astype(np.int64))
    order = np.lexsort((begin - end, begin, range_lanes))  # per thread, by start, outer ranges first
    for at in range(0, len(order), LAUNCH_SLICE):  # a slice at a time: a launch's lists never whole
        part = order[at : at + LAUNCH_SLICE]
        for lane, ts, dur, event, flag, sm, depth, payload in zip(
            range_lanes[part].tolist(),
            _us_array(offset_ns + begin[part]),
            _us_array(end[part] - begin[part]),
            ranges["event"][part].tolist(),
            flags[part].tolist(),
            ranges["sm"][part].tolist(),
            ranges["depth"][part].tolist(),
            _payloads(ranges["payload"][part], ranges["payload_type"][part]),
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
            yield {
                "ph": "X",
                "name": name,
                "cat": "range",
                "pid": pid,
                "tid": lane + first,
                "ts": ts,
                "dur": dur,
                "args": args,
            }

    for at in range(0, len(marks), LAUNCH_SLICE):
        some = marks[at : at + LAUNCH_SLICE]
        for lane, ts, event, sm, payload in zip(
            mark_lanes[at : at + LAUNCH_SLICE].tolist(),
            _us_array(offset_ns + some["t_ns"].astype(np.int64)),
            some["event"].tolist(),
            some["sm"].tolist(),
            _payloads(some["payload"], some["payload_type"]),
            strict=True,
        ):
            args = {"sm": sm}
            if payload is not None:
                args.update(payload)
            yield {
                "ph": "i",
                "s": "t",
                "name": names(event),
                "cat": "mark",
                "pid": pid,
                "tid": lane + first,
                "ts": ts,
                "args": args,
            }


LAUNCH_SLICE: Final = 20_000
"""Ranges or marks of a launch turned into trace events at a time."""


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
