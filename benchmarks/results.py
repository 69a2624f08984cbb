"""One benchmark figure against its target, printed as a table row."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    """A measured value with the target it must meet (``value <= target``)."""

    name: str
    value: float
    unit: str
    target: float
    detail: str = ""

    @property
    def met(self) -> bool:
        return self.value <= self.target

    def row(self) -> str:
        verdict = "met" if self.met else "MISSED"
        measured = f"{self.value:.4f} {self.unit}" if self.unit == "x" else f"{self.value:.4g} {self.unit}"
        return f"| {self.name} | {measured} | <= {self.target:g} {self.unit} | {verdict} | {self.detail} |"


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) by nearest rank."""
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))])
