"""How a duration reads, wherever iket-tui prints one: the tree, the detail pane, the timing and
kernels screens, the flame view, dump, the hang messages and the agent's abort error.

One function, below every layer that prints, so that a pass that took ``85.1 ms`` in the tree
took ``85.1 ms`` in the detail pane and ``duration=85.1ms`` in ``dump`` (whose fields are
space-separated words, so the space goes). Two places format their own: ``dump``'s time column,
a clock offset in milliseconds to the microsecond so that it aligns and sorts, and the body of
a reproducer's ``repro.py``, which runs where iket-tui may not be installed
(``tests/durations`` holds that list).
"""

from __future__ import annotations

import math
from fractions import Fraction

_UNITS = ((1_000, "µs"), (1_000_000, "ms"), (1_000_000_000, "s"))


def duration(ns: float | None, *, resolution_ns: float | None = None) -> str:
    """``0 ns``, ``999 ns``, ``1.00 µs``, ``25.5 µs``, ``312 µs``, ``85.1 ms``, ``1.25 s``,
    ``59.9 s``, ``2m 03s``, ``1h 02m``; empty for an unknown duration.

    Three significant digits in the largest unit that keeps the number at 1 or more, rounded
    half up (a value that rounds up to 1000 of a unit reads in the next one); from a minute on,
    whole minutes and seconds, from an hour on, hours and minutes. A negative duration reads as
    the positive one with a minus sign. ``resolution_ns`` asks for enough decimals to tell
    apart two values that far apart (a time axis with ticks 5 µs apart at 12 ms reads
    ``12.345 ms``), in the same unit the value alone would take.
    """
    if ns is None:
        return ""
    if ns < 0:
        return "-" + duration(-ns, resolution_ns=resolution_ns)
    exact = ns if isinstance(ns, int) else int(ns) if float(ns).is_integer() else Fraction(ns)
    if _rounded(exact, 1, 0) < 1_000:
        return f"{_rounded(exact, 1, 0)} ns"
    step = resolution_ns if resolution_ns is not None and 0 < resolution_ns < 1_000_000_000 else None
    for scale, unit in _UNITS:
        digits = 2 if _rounded(exact, scale, 2) < 1_000 else 1 if _rounded(exact, scale, 1) < 1_000 else 0
        if step is not None:
            digits = max(digits, math.ceil(-math.log10(step / scale) - 1e-9))
        scaled = _rounded(exact, scale, digits)
        if unit == "s" and (step is not None or scaled < 60 * 10**digits):
            return f"{_decimal(scaled, digits)} s"
        if unit == "s":
            return _clock(exact)
        if scaled < 1000 * 10**digits:
            return f"{_decimal(scaled, digits)} {unit}"
    raise AssertionError("unreachable: seconds always return")


def _rounded(ns: int | Fraction, scale: int, digits: int) -> int:
    """``ns / scale`` in units of ``10**-digits``, a half rounded up (``format`` rounds a half to
    even, and a float's ``1.005`` is a little under it)."""
    return int((2 * ns * 10**digits + scale) // (2 * scale))


def _decimal(scaled: int, digits: int) -> str:
    """``scaled * 10**-digits`` written with ``digits`` decimals."""
    if not digits:
        return str(scaled)
    whole, part = divmod(scaled, 10**digits)
    return f"{whole}.{part:0{digits}d}"


def _clock(ns: int | Fraction) -> str:
    """A minute and over: ``2m 03s``, or from an hour ``1h 02m``, to the nearest second or minute."""
    seconds = _rounded(ns, 1_000_000_000, 0)
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    hours, minutes = divmod(_rounded(ns, 60_000_000_000, 0), 60)
    return f"{hours}h {minutes:02d}m"
