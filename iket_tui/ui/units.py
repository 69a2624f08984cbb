"""Durations, counts and rates as short, fixed-width text."""

from __future__ import annotations


def duration(ns: int | None) -> str:
    """``312 µs``, ``85.1 ms``, ``1.25 s``, ``2m 03s``; empty for an unknown duration."""
    if ns is None:
        return ""
    if ns < 1_000:
        return f"{ns} ns"
    if ns < 1_000_000:
        return f"{ns / 1_000:.0f} µs"
    if ns < 1_000_000_000:
        return f"{ns / 1_000_000:.1f} ms"
    if ns < 60_000_000_000:
        return f"{ns / 1_000_000_000:.2f} s"
    minutes, seconds = divmod(ns // 1_000_000_000, 60)
    if minutes < 60:
        return f"{minutes}m {seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def count(value: int) -> str:
    return f"{value:,}"


def rate(per_second: float) -> str:
    if per_second >= 10_000:
        return f"{per_second / 1000:,.0f}k"
    return f"{per_second:,.0f}"
