"""One benchmark figure against its target, printed as a table row."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    """A measured value with the target it must meet (``value <= target``); without a target it
    is a reference (a floor, a baseline) printed beside the others and never missed."""

    name: str
    value: float
    unit: str
    target: float | None
    detail: str = ""

    @property
    def met(self) -> bool:
        return self.target is None or self.value <= self.target

    def row(self) -> str:
        measured = f"{self.value:.4f} {self.unit}" if self.unit == "x" else f"{self.value:.4g} {self.unit}"
        if self.target is None:
            return f"| {self.name} | {measured} | none | reference | {self.detail} |"
        verdict = "met" if self.met else "MISSED"
        return f"| {self.name} | {measured} | <= {self.target:g} {self.unit} | {verdict} | {self.detail} |"


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) by nearest rank."""
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))])
