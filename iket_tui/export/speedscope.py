"""A recording's pass timings as a speedscope file (its ``evented`` profile type)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from iket_tui import __version__
from iket_tui.export.common import ExportError, compile_finish
from iket_tui.model.nodes import CompileNode, PassNode
from iket_tui.model.session import Session

SPEEDSCOPE_SCHEMA: Final = "https://www.speedscope.app/file-format-schema.json"


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
    finish = compile_finish(comp, last_ns)
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
