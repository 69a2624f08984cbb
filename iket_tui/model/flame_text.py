"""What the flame view says in words: the row the cursor is on, the bar or mark under it, and
the time axis, as plain text derived from a launch and its layout.

Kept apart from the widget so that what a user reads can be derived, and tested, without an app.
"""

from __future__ import annotations

import math
import struct

import numpy as np

from iket_tui.durations import duration
from iket_tui.model.flame_layout import BLOCK, SM, FlameLayout, FlameRow, SmLayout, Window
from iket_tui.model.launches import SPAN_NO_END, SPAN_NO_START, Launch
from iket_tui.model.unbalanced import row_words, unbalanced_of

NO_LAUNCH = "no kernel launch selected"
EVICTED = "this launch was summarised to keep memory bounded: its events are no longer held"
NO_START = "(end without a start)"
"""How an end whose start was never seen is named (its event id is 0)."""


def payload_text(payload_type: int, bits: int) -> str:
    """`` · payload …`` with the 32 payload bits read as their type says; empty without one."""
    if payload_type == 1:
        return f" · payload {bits - (1 << 32) if bits >= 1 << 31 else bits} (int32)"
    if payload_type == 2:
        return f" · payload {bits} (uint32)"
    if payload_type == 3:
        return f" · payload {struct.unpack('<f', bits.to_bytes(4, 'little'))[0]:g} (float32)"
    return ""


def event_label(launch: Launch, event: int) -> str:
    """The name of a range's event, or what an end without a start is called."""
    return launch.event_name(event) if event else NO_START


def row_place(layout: FlameLayout | SmLayout, row: FlameRow) -> str:
    """Where a row is: its SM, or its block and (on a lane row) its warp."""
    if row.kind == SM:
        return f"SM {row.block}"
    where = layout.block_title(row.block)
    return where if row.kind == BLOCK else f"{where} · warp {row.warp}"


def block_text(layout: FlameLayout | SmLayout, block: int) -> str:
    """A block's bar: its title, its warps and when it ran."""
    spans = layout.spans
    begin, end = int(spans.block_start_ns[block]), int(spans.block_end_ns[block])
    lasted = f"t+{duration(begin)} to t+{duration(end)} ({duration(end - begin)})"
    return f"{layout.block_title(block)}: {int(spans.warps[block])} warps, {lasted}"


def mark_text(launch: Launch, layout: FlameLayout | SmLayout, index: int) -> str:
    """A mark: its event, when, and its payload."""
    mark = layout.spans.marks[index]
    name = launch.event_name(int(mark["event"]))
    payload = payload_text(int(mark["payload_type"]), int(mark["payload"]))
    return f"mark {name} at t+{duration(int(mark['t_ns']))}{payload}"


def span_text(launch: Launch, layout: FlameLayout | SmLayout, index: int) -> str:
    """A range: its event, from when, how long (or which end tracing never saw), its payload."""
    span = layout.spans.spans[index]
    flags = int(span["flags"])
    start = "before tracing saw it" if flags & SPAN_NO_START else f"t+{duration(int(span['start_ns']))}"
    if flags & SPAN_NO_END:
        length = "no end recorded"
    elif flags & SPAN_NO_START:
        length = f"ended t+{duration(int(span['end_ns']))}"
    else:
        length = duration(int(span["end_ns"]) - int(span["start_ns"]))
    payload = payload_text(int(span["payload_type"]), int(span["payload"]))
    return f"range {event_label(launch, int(span['event']))} from {start}, {length}{payload}"


def describe_cursor(
    launch: Launch | None, layout: FlameLayout | SmLayout | None, row: int, window: Window, column: int
) -> str:
    """One line about the cursor at (``row``, ``column``): where it is, and the bar or mark
    under it with its payload."""
    if launch is not None and launch.evicted:
        return EVICTED
    if launch is None or layout is None or not layout.rows:
        return NO_LAUNCH
    at = layout.rows[row]
    t_ns = window.time_of(column)
    text = (
        f"{row_place(layout, at)} · t+{duration(t_ns, resolution_ns=window.ns_per_column)}"
        f" · {duration(window.ns_per_column)}/col"
    )
    found = layout.at(at, t_ns, window.ns_per_column)
    if found is None:
        return text
    kind, index = found
    if kind == "block":
        return f"{text} · {block_text(layout, index)}"
    if kind == "mark":
        return f"{text} · {mark_text(launch, layout, index)}"
    return f"{text} · {span_text(launch, layout, index)}"


def describe_row(launch: Launch | None, layout: FlameLayout | SmLayout | None, row: int) -> list[str]:
    """Lines about the block, warp or SM of ``row``: when it ran, its ranges and marks by event,
    and what the ring lost of it (an SM: the blocks that ran on it); none without a launch whose
    events are held."""
    if launch is None or layout is None or not layout.rows or launch.evicted:
        return []
    at = layout.rows[row]
    spans = layout.spans
    if at.kind == SM:
        blocks = np.flatnonzero(spans.block_sm == at.block)
        lines = [f"SM {at.block}", f"{len(blocks)} blocks of this launch ran here:"]
        for block in blocks[np.argsort(spans.block_start_ns[blocks])].tolist():
            begin, end = int(spans.block_start_ns[block]), int(spans.block_end_ns[block])
            lines.append(f"  {layout.block_title(block)}  t+{duration(begin)} .. t+{duration(end)}")
        return lines
    block = at.block
    begin, end = int(spans.block_start_ns[block]), int(spans.block_end_ns[block])
    lines = [
        layout.block_title(block),
        f"warps      {int(spans.warps[block])}",
        f"ran        t+{duration(begin)} .. t+{duration(end)} ({duration(end - begin)})",
    ]
    in_row = spans.spans["block"] == block
    marks_in_row = spans.marks["block"] == block
    if at.kind != BLOCK:
        in_row &= spans.spans["warp"] == at.warp
        marks_in_row &= spans.marks["warp"] == at.warp
        lines.append(f"warp       {at.warp}")
    ranges, marks = spans.spans[in_row], spans.marks[marks_in_row]
    unbalanced = int(np.count_nonzero(ranges["flags"]))
    lines.append(f"ranges     {len(ranges):,}" + (f" ({unbalanced:,} unbalanced)" if unbalanced else ""))
    if unbalanced:
        producers = unbalanced_of(launch).producers_in(block, None if at.kind == BLOCK else at.warp)
        others = ranges[~np.isin(ranges["warp"], producers)]
        why = row_words(
            producers,
            whole_block=at.kind == BLOCK,
            open_ranges=int(np.count_nonzero(others["flags"] & SPAN_NO_END)),
            no_start=int(np.count_nonzero(ranges["flags"] & SPAN_NO_START)),
        )
        lines.append(f"why        {why}")
    lines.append(f"marks      {len(marks):,}")
    x, y, z = (int(n) for n in spans.blocks[block])
    lost = launch.coverage.lost_of((x, y, z), None if at.kind == BLOCK else at.warp)
    if lost:
        lines.append(f"lost       {lost}")
    counts: dict[str, int] = {}
    for event in np.concatenate([ranges["event"], marks["event"]]).tolist():
        name = event_label(launch, int(event))
        counts[name] = counts.get(name, 0) + 1
    lines += [f"  {name:<16} {count:,}" for name, count in sorted(counts.items())]
    return lines


def ruler(start_ns: float, ns_per_column: float, columns: int, spacing: int = 14) -> str:
    """The time axis: tick marks with their times, one every round step of at least ``spacing``
    columns (10 at least, so that labels never overlap); a time with no room for it whole at the
    right edge is left out, its tick kept."""
    raw = ns_per_column * max(10, spacing)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    line = [" "] * columns
    tick = math.ceil(start_ns / step) * step
    while True:
        column = math.floor((tick - start_ns) / ns_per_column)
        if column >= columns:
            break
        text = "┊" + duration(tick, resolution_ns=step)
        if column + len(text) > columns:
            text = "┊"  # no room for the whole time at the right edge: the tick alone, never a number cut from its unit
        for offset, char in enumerate(text[: columns - column]):
            line[column + offset] = char
        tick += step
    return "".join(line)
