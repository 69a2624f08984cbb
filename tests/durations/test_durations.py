"""How a duration reads: one table, from nanoseconds to hours, with the rounding edges where a
unit hands over to the next, since the tree, the panes, the flame view, dump and the hang
messages all print through it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from iket_tui.durations import duration

TABLE = [
    (None, ""),
    (0, "0 ns"),
    (1, "1 ns"),
    (2.5, "3 ns"),  # a half rounds up, never to even
    (999, "999 ns"),
    (999.4, "999 ns"),
    (999.5, "1.00 µs"),  # rounds to 1000 ns, which reads in the next unit
    (1_000, "1.00 µs"),
    (1_005, "1.01 µs"),  # exactly, where a float's 1.005 is a little under
    (9_994, "9.99 µs"),
    (9_995, "10.0 µs"),  # three significant digits after rounding too
    (25_500, "25.5 µs"),
    (99_950, "100 µs"),
    (312_000, "312 µs"),
    (999_499, "999 µs"),
    (999_500, "1.00 ms"),
    (1_234_567, "1.23 ms"),
    (85_149_999, "85.1 ms"),
    (300_000_000, "300 ms"),
    (999_500_000, "1.00 s"),
    (1_250_000_000, "1.25 s"),
    (42_000_000_000, "42.0 s"),
    (59_949_999_999, "59.9 s"),
    (59_950_000_000, "1m 00s"),  # 60.0 s is a minute
    (123_000_000_000, "2m 03s"),
    (3_599_400_000_000, "59m 59s"),
    (3_599_500_000_000, "1h 00m"),
    (3_720_000_000_000, "1h 02m"),
    (24_000_000_000_000, "6h 40m"),
    (360_000_000_000_000, "100h 00m"),
    (-1_500, "-1.50 µs"),
    (-1, "-1 ns"),
    (-123_000_000_000, "-2m 03s"),
    (85_149_999.0, "85.1 ms"),  # a float reads as the int it equals
]


@pytest.mark.parametrize(("ns", "text"), TABLE, ids=[text or "unknown" for _, text in TABLE])
def test_a_duration_reads_in_the_unit_that_keeps_it_short(ns: float | None, text: str) -> None:
    assert duration(ns) == text


@pytest.mark.parametrize(
    ("ns", "resolution_ns", "text"),
    [
        (12_345_000, 5_000, "12.345 ms"),  # ticks 5 µs apart at 12 ms stay apart
        (12_350_000, 5_000, "12.350 ms"),
        (1_005_000, 5_000, "1.005 ms"),
        (2_000, 4, "2.000 µs"),
        (2_000, 100, "2.00 µs"),  # never fewer digits than the value alone
        (20_000_000_000, 500_000_000, "20.0 s"),
        (75_000_000_000, 100_000_000, "75.0 s"),  # a fine axis past a minute stays in seconds
        (75_000_000_000, 10_000_000_000, "1m 15s"),
        (4, 0.5, "4 ns"),
        (-2_500, 10, "-2.50 µs"),
    ],
)
def test_a_resolution_adds_the_decimals_that_tell_values_that_far_apart(
    ns: float, resolution_ns: float, text: str
) -> None:
    assert duration(ns, resolution_ns=resolution_ns) == text


def test_the_ui_and_the_model_print_through_the_same_function() -> None:
    from iket_tui.ui import units

    assert units.duration is duration


AD_HOC = re.compile(r"\{[^}]*:[0-9]*\.[0-9]+f\}\s?(s|ms|µs|us|ns)\b")
"""A duration formatted on the spot (``f"{took:.1f} s"``) instead of through :func:`duration`."""
OWN_FORMAT = {
    # dump's time column: a clock offset, in milliseconds to the microsecond so that the
    # column aligns and sorts; durations in its fields go through duration().
    ("iket_tui/sources/lines.py", 'return f"{(t_ns - self._t0) / 1e6:12.3f} ms"'),
    # A place in a recording, in seconds from its start, as --from and --to take it (cut, dump
    # --from/--to, the replay's timeline bar and its jumps): a position to type back, not a duration.
    ("iket_tui/sources/span.py", 'return f"it lasts {(self.last_t_ns - self.t0_ns) / 1e9:.3f} s"'),
    ("iket_tui/ui/timeline_bar.py", 'return f" {max(0.0, at):.1f} / {timeline.seconds(timeline.end_ns):.1f} s{tail}"'),
    ("iket_tui/ui/app.py", 'at = f" at {timeline.seconds(t_ns):.3f} s" if timeline is not None else ""'),
    (
        "iket_tui/ui/app.py",
        'self.notify(f"back to {timeline.seconds(back):.3f} s" if timeline is not None else "back", timeout=3)',
    ),
    # The body of a reproducer's repro.py, which runs where iket-tui may not be installed.
    (
        "iket_tui/repro/hang_script.py",
        'print(f"repro: {PASS} raised after {took:.1f} s instead of running on:", file=sys.stderr)',
    ),
    ("iket_tui/repro/hang_script.py", 'print(f"{PASS} returned after {took:.1f} s: the hang did not reproduce here")'),
}


def test_no_duration_is_formatted_on_the_spot_but_where_it_must_be() -> None:
    root = Path(__file__).resolve().parents[2]
    found = {
        (str(path.relative_to(root)), line.strip())
        for path in sorted((root / "iket_tui").rglob("*.py"))
        for line in path.read_text().splitlines()
        if AD_HOC.search(line)
    }
    assert found == OWN_FORMAT
