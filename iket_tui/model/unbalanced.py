"""Why a launch has unbalanced ranges, in words a user can act on.

A range is unbalanced when its warp opened it and no end was recorded, or an end came whose
start was not seen. Real data has them for a reason that is not a fault: under TileLang's Hopper
warp specialisation a kernel gets added producer warps that run the IKET events before the
pipelined loop and none inside or after it, so a range around the whole block opens in those
warps and never closes (docs/ring.md, "Unbalanced ranges"). Such warps are told apart here by
their shape: they open ranges and close none, in a block whose other warps do close theirs.
What is left (ranges that a warp had not closed yet, or whose end was lost, and ends without a
start) is said as such.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from iket_tui.model.launches import SPAN_NO_END, SPAN_NO_START, Launch
from iket_tui.model.running_kernels import warp_ranges

PRODUCER_WHY = "Hopper producer warps (they stop before the pipelined loop)"
"""What those warps are, and why they leave their ranges open."""


@dataclass(frozen=True)
class Unbalanced:
    """A launch's unbalanced ranges, split by why."""

    total: int
    """Ranges without an end plus ends without a start: the launch table's ``unbalanced``."""
    producer_ranges: int
    """Ranges left open by producer warps (they open ranges and close none, beside warps that do)."""
    producer_lanes: frozenset[tuple[int, int]]
    """(block index, warp) of those producer warps."""
    producer_warps: tuple[int, ...]
    """The warp numbers that are producer warps in some block."""
    every_block: bool
    """The same warp numbers are producer warps in every block that has any."""
    producer_events: tuple[str, ...]
    """Names of the ranges the producer warps leave open."""
    other_open: int
    """Other ranges without an end: not closed yet, or their end was lost."""
    no_start: int
    """Ends whose start was not seen (lost, or before tracing began)."""

    def words(self, *, running: bool = False) -> str:
        """One line: how many, and why (empty where nothing is unbalanced)."""
        if not self.total:
            return ""
        parts: list[str] = []
        if self.producer_ranges:
            names = ", ".join(f"`{name}`" for name in self.producer_events)
            blocks = len({block for block, _ in self.producer_lanes})
            where = "of each block" if self.every_block else f"in {blocks} block{'s' if blocks != 1 else ''}"
            warps = warp_ranges(list(self.producer_warps))
            parts.append(f"{names} left open by warps {warps} {where}, {PRODUCER_WHY}")
        if self.other_open:
            why = "not closed yet" if running else "never closed (the warp did not reach its end, or the end was lost)"
            parts.append(f"{self.other_open:,} range{'s' if self.other_open != 1 else ''} {why}")
        if self.no_start:
            parts.append(
                f"{self.no_start:,} end{'s' if self.no_start != 1 else ''} without a start (lost, or before tracing)"
            )
        return f"unbalanced {self.total:,}: " + "; ".join(parts)

    def producers_in(self, block: int, warp: int | None = None) -> list[int]:
        """The producer warps of block number ``block`` (only ``warp``, where given)."""
        return sorted(w for b, w in self.producer_lanes if b == block and (warp is None or w == warp))


def row_words(producers: list[int], *, whole_block: bool, open_ranges: int, no_start: int) -> str:
    """Why the unbalanced ranges of one warp or block are so: its producer warps (``producers``),
    then its other ranges without an end (``open_ranges``) and its ends without a start."""
    parts: list[str] = []
    if producers and not whole_block:
        parts.append("a producer warp (Hopper warp specialisation): it opens ranges and closes none")
    elif producers:
        parts.append(f"producer warps {warp_ranges(producers)} (Hopper warp specialisation) close no range")
    if open_ranges:
        parts.append(
            f"{open_ranges:,} range{'s' if open_ranges != 1 else ''} not closed (not reached, or the end lost)"
        )
    if no_start:
        parts.append(f"{no_start:,} end{'s' if no_start != 1 else ''} without a start (lost, or before tracing)")
    return "; ".join(parts)


def unbalanced_of(launch: Launch) -> Unbalanced:
    """The unbalanced ranges of ``launch`` as paired now, by why."""
    spans = launch.spans()
    table = spans.spans
    max_warps = spans.max_warps
    lanes = len(spans.blocks) * max_warps
    lane = table["block"].astype(np.int64) * max_warps + table["warp"].astype(np.int64)
    flags = table["flags"]
    closed = np.bincount(lane[flags == 0], minlength=lanes)
    opened = np.bincount(lane[(flags & SPAN_NO_END) != 0], minlength=lanes)
    orphans = np.bincount(lane[(flags & SPAN_NO_START) != 0], minlength=lanes)
    block_closes = (closed.reshape(-1, max_warps) > 0).any(axis=1) if lanes else np.zeros(0, dtype=bool)
    producer = (opened > 0) & (closed == 0) & (orphans == 0) & np.repeat(block_closes, max_warps)
    producer_lanes = np.flatnonzero(producer)
    blocks, warps = producer_lanes // max_warps, producer_lanes % max_warps
    per_block = [frozenset(warps[blocks == b].tolist()) for b in np.unique(blocks).tolist()]
    producer_spans = producer[lane] & ((flags & SPAN_NO_END) != 0)
    events = sorted({int(e) for e in table["event"][producer_spans]})
    producer_ranges = int(np.count_nonzero(producer_spans))
    return Unbalanced(
        total=spans.unbalanced,
        producer_ranges=producer_ranges,
        producer_lanes=frozenset(zip(blocks.tolist(), warps.tolist(), strict=True)),
        producer_warps=tuple(sorted({int(w) for w in warps.tolist()})),
        every_block=len(set(per_block)) == 1 and len(per_block) == len(spans.blocks),
        producer_events=tuple(launch.event_name(event) for event in events),
        other_open=int(np.count_nonzero((flags & SPAN_NO_END) != 0)) - producer_ranges,
        no_start=int(np.count_nonzero((flags & SPAN_NO_START) != 0)),
    )
