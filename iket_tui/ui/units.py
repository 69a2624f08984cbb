"""Durations, counts and rates as short, fixed-width text (a duration as it reads everywhere,
from :mod:`iket_tui.durations`)."""

from __future__ import annotations

from iket_tui.durations import duration as duration

__all__ = ["count", "duration", "rate"]


def count(value: int) -> str:
    return f"{value:,}"


def rate(per_second: float) -> str:
    if per_second >= 10_000:
        return f"{per_second / 1000:,.0f}k"
    return f"{per_second:,.0f}"
