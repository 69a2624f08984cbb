"""A recording's compile timings as a speedscope file (its ``evented`` profile type): one
profile per watched process, each compile a top frame holding its passes (nested as they
ran) and its codegen steps (the device build that runs nvcc, then the host build). A recording
of several processes has a profile for each process with a compile, named by its pid, rank and
command line and ordered by rank; all of them count from the recording's first compile, so
that a time means the same moment in each."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from iket_tui import __version__
from iket_tui.export.common import ExportError, compile_finish, process_sort, process_title
from iket_tui.model.nodes import CodegenNode, CompileNode, PassNode, ProcessNode
from iket_tui.model.session import Session

SPEEDSCOPE_SCHEMA: Final = "https://www.speedscope.app/file-format-schema.json"

Item = CompileNode | PassNode | CodegenNode
"""What a frame stands for."""


def speedscope(session: Session, *, name: str = "") -> dict[str, Any]:
    """A speedscope file: an evented profile per process, in nanoseconds from the recording's
    first compile's begin; a frame per compile (by its kernel), pass name and codegen step,
    opened and closed at their begin and end."""
    tree = session.tree
    if not tree.compiles:
        raise ExportError("nothing to export: the recording holds no compile (speedscope shows pass timings)")
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
