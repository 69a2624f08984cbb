"""A comparison as lines of text readable at 80 columns: what ``iket-tui diff`` prints and what
the UI's comparison pane shows, so that both say the same changes in the same order with the
same flags."""

from __future__ import annotations

import textwrap
from typing import Final

from iket_tui.durations import duration
from iket_tui.model.compare import Comparison, CompileSummary, PairChange, PassChange
from iket_tui.model.compare_kernels import EventChange, EventSummary, LaunchChange, LaunchSummary, block_words

NAME_WIDTH: Final = 34
"""The widest pass name shown whole: a row of a pass then fits in 80 columns."""
EVENT_WIDTH: Final = 20
"""The widest event name shown whole: a row of an event then fits in 80 columns."""
BLOCKS_SHOWN: Final = 3
"""The blocks whose time changed most that the text lists (JSON has more)."""
FLAG_MARK: Final = "! "
"""What begins the row of a flagged pass or range, after its indent."""


def comparison_lines(
    comparison: Comparison, names: tuple[str, str], shown: int, flags: tuple[str, ...], failing: list[str]
) -> list[str]:
    """The whole comparison: each pair of compiles, with its flagged passes and ``shown`` of its
    largest changes, each pair of launches, then what found no match and a summary line."""
    lines = [f"A: {names[0]}", f"B: {names[1]}"]
    for pair in comparison.pairs:
        lines.append("")
        lines.extend(pair_lines(pair, shown))
    launches = comparison.launches
    for change in launches.pairs:
        lines.append("")
        lines.extend(launch_lines(change))
    if comparison.only_a or comparison.only_b or launches.only_a or launches.only_b:
        lines.append("")
        lines.append("without a match:")
        lines.extend(f"  only in A: {_compile_words(s)}" for s in comparison.only_a)
        lines.extend(f"  only in B: {_compile_words(s)}" for s in comparison.only_b)
        lines.extend(f"  only in A: {_launch_words(s)}" for s in launches.only_a)
        lines.extend(f"  only in B: {_launch_words(s)}" for s in launches.only_b)
    if comparison.incomplete:
        lines.append("")
        lines.extend(f"not compared (never ended): {_compile_words(s)}" for s in comparison.incomplete)
    lines.append("")
    has_launches = bool(launches.pairs or launches.only_a or launches.only_b)
    has_compiles = bool(comparison.pairs or comparison.only_a or comparison.only_b or comparison.incomplete)
    said = []
    if has_compiles or not has_launches:
        said.append(f"{len(comparison.pairs)} compile{'s' if len(comparison.pairs) != 1 else ''} matched")
    if has_launches:
        said.append(f"{len(launches.pairs)} launch{'es' if len(launches.pairs) != 1 else ''} matched")
    matched = ", ".join(said)
    if not flags:
        lines.append(f"{matched}; nothing flagged")
    else:
        gate = f" (exit 1: {', '.join(failing)})" if failing else ""
        lines.append(f"{matched}; flagged: {', '.join(flags)}{gate}")
    return lines


def _signed(ns: int) -> str:
    return ("+" if ns >= 0 else "") + duration(ns)


def _pct(change: PassChange) -> str:
    pct = change.change_pct
    return "" if pct is None else f"{pct:+.0f}%"


def _compile_words(summary: CompileSummary) -> str:
    label = f" [{summary.label}]" if summary.label else ""
    return f"{summary.title}{label}"


def _launch_words(summary: LaunchSummary) -> str:
    status = "" if summary.complete else f" ({summary.status})"
    return f"{summary.title}{status}"


def pair_lines(pair: PairChange, shown: int) -> list[str]:
    """One pair of compiles: a head line with its flags, its flagged passes and ``shown`` of its
    largest changes of time, passes added, removed or moved, a failure new or fixed, codegen."""
    a, b = pair.a, pair.b
    total = ""
    if a.duration_ns is not None and b.duration_ns is not None:
        total = f": {duration(a.duration_ns)} -> {duration(b.duration_ns)} ({_signed(b.duration_ns - a.duration_ns)})"
    # "slower" said as the passes it counts: the compile as a whole may have got faster.
    slower = int(pair.flagged.sum())
    said = [f"{slower} pass{'es' if slower > 1 else ''} slower" if flag == "slower" else flag for flag in pair.flags()]
    mark = f"  [{', '.join(said)}]" if said else ""
    numbers = f"compile {a.compile}" if a.compile == b.compile else f"compile {a.compile} -> {b.compile}"
    kernel = a.kernel or "-" if a.kernel == b.kernel else f"{a.kernel or '-'} -> {b.kernel or '-'}"
    lines = [f"{a.process} {numbers} {kernel}{total}{mark}"]
    if a.label:
        lines.append(f"  label: {a.label}")
    listed = pair.top(shown)
    if listed:
        width = min(NAME_WIDTH, max(len(change.name) for change in listed))
        lines.append(f"  {'':2}{'pass':<{width}} {'before':>9} {'after':>9} {'change':>10}")
        for change in listed:
            name = _cut(change.name, width)
            flag = FLAG_MARK if change.slower else "  "
            before = duration(change.before_ns) if change.before_ns is not None else "-"
            after = duration(change.after_ns) if change.after_ns is not None else "-"
            lines.append(
                f"  {flag}{name:<{width}} {before:>9} {after:>9} {_signed(change.change_ns):>10} {_pct(change):>6}"
            )
        more = len(pair.names) - len(listed)
        if more:
            lines.append(f"    and {more} more passes, each changed less")
    for word, names in (("added", pair.added), ("removed", pair.removed), ("moved", pair.moved)):
        if names:
            lines.extend(textwrap.wrap(", ".join(names), 78, initial_indent=f"  {word}: ", subsequent_indent="    "))
    if pair.failure == "new":
        lines.append(shortened(f"  failed (new): {b.error or 'no error given'}"))
    elif pair.failure == "fixed":
        lines.append(shortened(f"  fixed: failed before with {a.error or 'no error given'}"))
    if a.codegen_ns or b.codegen_ns:
        lines.append(
            f"  codegen: {duration(a.codegen_ns)} -> {duration(b.codegen_ns)} ({_signed(b.codegen_ns - a.codegen_ns)})"
        )
    return lines


def launch_lines(change: LaunchChange) -> list[str]:
    """One pair of launches: a head line with its flags; its time; per event name the count per
    launch and the own time of its ranges at p50 and p99 in each, the largest change of the time
    spent in it first; counts and payload ranges that changed; the blocks that changed most."""
    a, b = change.a, change.b
    flags = change.flags()
    mark = f"  [{', '.join(flags)}]" if flags else ""
    numbers = f"launch {a.launch}" if a.launch == b.launch else f"launch {a.launch} -> {b.launch}"
    kernel = a.kernel if a.kernel == b.kernel else f"{a.kernel} -> {b.kernel}"
    lines = [f"{a.process} {numbers} {kernel}{mark}"]
    grid = a.grid_words if a.grid == b.grid else f"{a.grid_words} -> {b.grid_words}"
    lines.append(
        f"  grid {grid}: {duration(a.duration_ns)} -> {duration(b.duration_ns)} "
        f"({_signed(b.duration_ns - a.duration_ns)})"
    )
    if not (a.complete and b.complete):
        lines.append(f"  status: {a.status} -> {b.status}")
    if change.events:
        width = min(EVENT_WIDTH, max(len(event.name) for event in change.events))
        lines.append(
            f"  {'':2}{'event':<{width}} {'count':>7} {'p50 A':>8} {'p50 B':>8} {'p99 A':>8} {'p99 B':>8} {'total':>10}"
        )
        lines.extend(_event_line(event, width) for event in change.events)
    counts = [
        f"{event.name} {event.before.count if event.before else 0:,} -> {event.after.count if event.after else 0:,}"
        for event in change.counts
    ]
    if counts:
        lines.extend(textwrap.wrap("; ".join(counts), 78, initial_indent="  count: ", subsequent_indent="    "))
    payloads = [f"{event.name} {_payload(event.before)} -> {_payload(event.after)}" for event in change.payloads]
    if payloads:
        lines.extend(textwrap.wrap("; ".join(payloads), 78, initial_indent="  payload: ", subsequent_indent="    "))
    blocks = change.blocks[:BLOCKS_SHOWN]
    if blocks:
        lines.append("  blocks changed most:")
        lines.extend(
            f"    {block_words(block.block):<10} {duration(block.before_ns):>9} -> {duration(block.after_ns):>9} "
            f"({_signed(block.change_ns)})"
            for block in blocks
        )
    return lines


def _event_line(event: EventChange, width: int) -> str:
    flag = FLAG_MARK if event.slower else "  "
    count = event.after.count if event.after is not None else 0
    times = [
        duration(value) if value is not None else "-"
        for value in (
            event.before.p50_ns if event.before else None,
            event.after.p50_ns if event.after else None,
            event.before.p99_ns if event.before else None,
            event.after.p99_ns if event.after else None,
        )
    ]
    total = _signed(event.change_ns) if event.kind == "range" else ""
    return (
        f"  {flag}{_cut(event.name, width):<{width}} {count:>7,} "
        + " ".join(f"{time:>8}" for time in times)
        + f" {total:>10}"
    ).rstrip()


def _payload(summary: EventSummary | None) -> str:
    if summary is None or summary.payload is None:
        return "none"
    low, high = summary.payload
    return f"{low:g}..{high:g}"


def _cut(name: str, width: int) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def shortened(line: str, width: int = 80) -> str:
    """The first line of ``line``, cut to ``width`` columns with an ellipsis."""
    first = line.splitlines()[0] if line else line
    return first if len(first) <= width else first[: width - 1] + "…"
