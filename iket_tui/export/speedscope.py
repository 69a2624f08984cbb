"""A recording's compile timings as a speedscope file (its ``evented`` profile type): one
profile per watched process, each compile a top frame holding its passes (nested as they
ran) and its codegen steps (the device build that runs nvcc, then the host build). A recording
of several processes has a profile for each process with a compile, named by its pid, rank and
command line and ordered by rank; all of them count from the recording's first compile, so
that a time means the same moment in each."""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from iket_tui import __version__
from iket_tui.export.common import ExportError, compile_finish, compile_process, process_sort, process_title
from iket_tui.export.stream import CompileStream, forget
from iket_tui.model.nodes import CodegenNode, CompileNode, PassNode, ProcessNode
from iket_tui.model.session import Session

SPEEDSCOPE_SCHEMA: Final = "https://www.speedscope.app/file-format-schema.json"
NO_COMPILE: Final = "nothing to export: the recording holds no compile (speedscope shows pass timings)"

Item = CompileNode | PassNode | CodegenNode
"""What a frame stands for."""


def speedscope(session: Session, *, name: str = "") -> dict[str, Any]:
    """A speedscope file: an evented profile per process, in nanoseconds from the recording's
    first compile's begin; a frame per compile (by its kernel), pass name and codegen step,
    opened and closed at their begin and end."""
    tree = session.tree
    if not tree.compiles:
        raise ExportError(NO_COMPILE)
    frames: dict[str, int] = {}
    origin = min(comp.begin_ns for comp in tree.compiles)
    if tree.several:
        profiles = [
            _profile(process.compiles, process_title(process), session.last_t_ns, origin, frames)
            for _, process in process_sort(tree.processes)
            if process.compiles
        ]
    else:
        process: ProcessNode = session.process
        title = f"pid {process.pid}: {process.command}" if process.pid is not None else "compiles"
        profiles = [_profile(tree.compiles, title, session.last_t_ns, origin, frames)]
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


def _profile(compiles: list[CompileNode], title: str, last: int, origin: int, frames: dict[str, int]) -> dict[str, Any]:
    """The evented profile of ``compiles`` (one process's), from its first compile's begin to its
    last one's end, counted from ``origin``; ``frames`` gains the frames it names."""
    ordered = sorted(compiles, key=lambda comp: (comp.begin_ns, comp.order))
    begin = ordered[0].begin_ns
    end = max(compile_finish(comp, last) for comp in ordered)
    events = []
    for kind, at, item in _balanced(ordered, begin, end, last):
        frame = frames.setdefault(_frame_name(item), len(frames))
        events.append({"type": kind, "at": at - origin, "frame": frame})
    return {
        "type": "evented",
        "name": f"{title} ({len(ordered)} compiles)",
        "unit": "nanoseconds",
        "startValue": begin - origin,
        "endValue": end - origin,
        "events": events,
    }


def _frame_name(item: Item) -> str:
    return item.name if isinstance(item, PassNode) else item.title


def _begin(item: Item) -> int:
    return item.start_ns if isinstance(item, PassNode) else item.begin_ns


def _children(item: Item) -> list[Item]:
    """What runs inside a frame, in the order it began: a compile's passes then its codegen
    steps, a pass's child passes."""
    if isinstance(item, CompileNode):
        inside: list[Item] = [node for ctx in item.context_order for node in ctx.roots]
        inside += item.codegen_steps
    elif isinstance(item, PassNode):
        inside = list(item.children)
    else:
        return []
    return sorted(inside, key=lambda child: (_begin(child), child.order))


def _end(item: Item, finish: int) -> int:
    """When ``item`` ended; ``finish`` (its compile's end) for one that never did."""
    return item.end_ns if item.end_ns is not None else finish


def _balanced(compiles: list[CompileNode], lo: int, hi: int, last: int) -> Iterator[tuple[str, int, Item]]:
    """Open and close events of the compiles and what ran inside them, balanced and in time
    order even where the recorded times are not: a frame is kept inside its parent and after
    its previous sibling (compiles of several threads that overlap are drawn one after the
    other), and one that never ended closes at its compile's end."""
    # Per open level: its children still to visit, its end, where the next child may begin,
    # its item, and the end of the compile it is in.
    stack: list[tuple[Iterator[Item], int, list[int], Item | None, int]] = [(iter(compiles), hi, [lo], None, hi)]
    while stack:
        children, bound, cursor, parent, finish = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            if parent is not None:
                yield ("C", bound, parent)
                stack[-1][2][0] = bound
            continue
        if isinstance(child, CompileNode):
            finish = compile_finish(child, last)
        begin = min(max(_begin(child), cursor[0]), bound)
        stop = min(max(_end(child, finish), begin), bound)
        yield ("O", begin, child)
        stack.append((iter(_children(child)), stop, [begin], child, finish))


EVENT_DTYPE: Final = np.dtype([("at", "<i8"), ("frame", "<i4"), ("close", "u1")])
"""A profile's event as the spool keeps it: its time (ns, not yet from the origin), its frame
(numbered as names first appeared while reading), and whether it closes the frame."""
TEXT_SLICE: Final = 20_000
"""A profile's events turned into text at a time."""
_NEVER: Final = 1 << 62


@dataclass
class _Profile:
    """What the stream knows of one process's profile while the recording is read."""

    key: int
    compiles: int = 0
    begin: int = _NEVER
    end: int = -_NEVER
    cursor: int | None = None  # where the next compile may begin: the last drawn one's drawn end
    runs: list[tuple[object, int | None]] = field(default_factory=list)
    """The spool keys of its events in the order they are written, each with the time its
    events are clipped to at least (None for events kept already clipped)."""
    waiting: list[tuple[int, int, object, int]] = field(default_factory=list)
    """A heap of the compiles that ended while one of the process that began before them was
    still open: (begin, order, spool key, drawn end), their events kept unclipped, each under a
    key of its own, until every compile that began before them ended."""


class SpeedscopeStream(CompileStream):
    """The speedscope file of a recording, read chunk by chunk: :meth:`feed` each chunk of
    messages, then :meth:`finish`. A compile's events are kept in a temporary file (as times and
    frame numbers) once it ended, and the compile forgotten; one that ended while a compile of
    its process that began before it still runs is kept apart, and placed after that one once
    it ended, so that a compile that never ends holds nothing of those after it. :meth:`finish`
    writes the document, the same bytes :func:`speedscope` gives as JSON: the frames first
    (numbered in the order the profiles use them), then each profile. Nothing is written before :meth:`finish`, which
    refuses a recording without a compile (:class:`ExportError`) with nothing written."""

    def __init__(self, write: Callable[[bytes], object], *, name: str = "") -> None:
        super().__init__(keep_kernels=False)  # a profile of compiles: kernel events are let go
        self._write = write
        self._name = name
        self._spool = self.spool()
        self._frames: dict[str, int] = {}
        self._profiles: dict[ProcessNode, _Profile] = {}

    def _ended(self, comp: CompileNode) -> None:
        process = compile_process(self.session, comp)
        profile = self._profiles.get(process)
        if profile is None:
            profile = self._profiles[process] = _Profile(len(self._profiles))
        session = self.session
        still_open = [_begin_order(other) for other in self._open if compile_process(session, other) is process]
        first_open = min(still_open, default=None)
        order = _begin_order(comp)
        if not profile.waiting and (first_open is None or order < first_open):
            self._draw(profile, comp)
            return
        # Drawn once every compile that began before it ended: kept now, unclipped, under a key
        # of its own, and clipped to the drawn end of the compile before it when written.
        key = (profile.key, comp.order)
        end = self._keep(profile, comp, key, comp.begin_ns)
        heapq.heappush(profile.waiting, (*order, key, end))
        while profile.waiting and (first_open is None or profile.waiting[0][:2] < first_open):
            _, _, waited, drawn_end = heapq.heappop(profile.waiting)
            clip = profile.cursor
            profile.runs.append((waited, clip))
            profile.cursor = drawn_end if clip is None else max(drawn_end, clip)

    def _draw(self, profile: _Profile, comp: CompileNode) -> None:
        """Keep the events of ``comp`` and what ran inside it, after the compile drawn before it."""
        if not profile.runs or profile.runs[-1][1] is not None:
            profile.runs.append(((profile.key, -len(profile.runs) - 1), None))
        lo = comp.begin_ns if profile.cursor is None else profile.cursor
        profile.cursor = self._keep(profile, comp, profile.runs[-1][0], lo)

    def _keep(self, profile: _Profile, comp: CompileNode, key: object, lo: int) -> int:
        """Keep the events of ``comp`` under ``key``, none before ``lo``, and forget the
        compile; when it closes as drawn."""
        last = self.session.last_t_ns
        frames = self._frames
        ats: list[int] = []
        ids: list[int] = []
        closes: list[bool] = []
        for kind, at, item in _balanced([comp], lo, _NEVER, last):
            name = _frame_name(item)
            frame = frames.get(name)
            if frame is None:
                frame = frames[name] = len(frames)
            ats.append(at)
            ids.append(frame)
            closes.append(kind == "C")
        rows = np.empty(len(ats), dtype=EVENT_DTYPE)
        rows["at"], rows["frame"], rows["close"] = ats, ids, closes
        self._spool.add(key, rows.tobytes())
        profile.compiles += 1
        profile.begin = min(profile.begin, comp.begin_ns)
        profile.end = max(profile.end, compile_finish(comp, last))
        forget(comp)
        return ats[-1]

    def _finish(self) -> int:
        """Write the document; the number of events its profiles hold."""
        self._close()
        tree = self.session.tree
        if not tree.compiles:
            raise ExportError(NO_COMPILE)
        origin = min(comp.begin_ns for comp in tree.compiles)
        if tree.several:
            order = [
                (process, process_title(process)) for _, process in process_sort(tree.processes) if process.compiles
            ]
        else:
            process = tree.process
            title = f"pid {process.pid}: {process.command}" if process.pid is not None else "compiles"
            order = [(process, title)]
        profiles = [(self._profiles[process], title) for process, title in order if process in self._profiles]
        names = list(self._frames)
        final = np.full(len(names), -1, dtype=np.int64)
        shown: list[str] = []
        for profile, _ in profiles:  # the frames numbered as the profiles use them, in order
            for rows in self._rows(profile):
                found, first = np.unique(rows["frame"], return_index=True)
                for frame in found[np.argsort(first)].tolist():
                    if final[frame] < 0:
                        final[frame] = len(shown)
                        shown.append(names[frame])
        write = self._write
        write(
            b'{"$schema":'
            + _json(SPEEDSCOPE_SCHEMA)
            + b',"shared":{"frames":['
            + b",".join(b'{"name":' + _json(name) + b"}" for name in shown)
            + b']},"profiles":['
        )
        events = 0
        for index, (profile, title) in enumerate(profiles):
            head = {
                "type": "evented",
                "name": f"{title} ({profile.compiles} compiles)",
                "unit": "nanoseconds",
                "startValue": profile.begin - origin,
                "endValue": profile.end - origin,
            }
            write((b"," if index else b"") + _json(head)[:-1] + b',"events":[')
            comma = b""
            for rows in self._rows(profile):
                text = ",".join(
                    f'{{"type":"{"C" if close else "O"}","at":{when},"frame":{frame}}}'
                    for when, frame, close in zip(
                        (rows["at"] - origin).tolist(),
                        final[rows["frame"]].tolist(),
                        rows["close"].tolist(),
                        strict=True,
                    )
                )
                write(comma + text.encode())
                comma = b","
                events += len(rows)
            write(b"]}")
        tail = b'],"activeProfileIndex":0,"exporter":' + _json(f"iket-tui@{__version__}")
        if self._name:
            tail += b',"name":' + _json(self._name)
        write(tail + b"}")
        return events

    def _rows(self, profile: _Profile) -> Iterator[np.ndarray[Any, np.dtype[np.void]]]:
        """A profile's events as written, :data:`TEXT_SLICE` at most at a time: a compile drawn
        later than it ended begins no earlier than the drawn end of the compile before it, as
        every time inside it (drawing it from there would give the same times)."""
        for key, clip in profile.runs:
            for piece in self._spool.runs(key, TEXT_SLICE * EVENT_DTYPE.itemsize):
                rows = np.frombuffer(piece, dtype=EVENT_DTYPE)
                if clip is not None:
                    rows = rows.copy()
                    np.maximum(rows["at"], clip, out=rows["at"])
                yield rows


def _json(value: object) -> bytes:
    """``value`` as :func:`speedscope`'s document is written (``json.dumps``, compact)."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False).encode("utf-8")


def _begin_order(comp: CompileNode) -> tuple[int, int]:
    return (comp.begin_ns, comp.order)
