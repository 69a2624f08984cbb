"""How long each pass usually takes, from the runs of it seen so far."""

from __future__ import annotations

from collections import deque

SAMPLES_PER_NAME = 512


class TypicalDurations:
    """The recent finished durations of each pass name; their median is what "usual" means
    when deciding that a running pass is stuck. Bounded per name, so a long session keeps
    a recent picture in bounded memory."""

    __slots__ = ("samples",)

    def __init__(self) -> None:
        self.samples: dict[str, deque[int]] = {}  # by name; the tree appends to these directly

    def record(self, name: str, duration_ns: int) -> None:
        samples = self.samples.get(name)
        if samples is None:
            samples = self.samples[name] = deque(maxlen=SAMPLES_PER_NAME)
        samples.append(duration_ns)

    def count(self, name: str) -> int:
        samples = self.samples.get(name)
        return 0 if samples is None else len(samples)

    def median(self, name: str) -> int | None:
        """The median of the recent durations of ``name``, or ``None`` if it never finished."""
        samples = self.samples.get(name)
        if not samples:
            return None
        ordered = sorted(samples)
        mid = len(ordered) // 2
        if len(ordered) % 2:
            return ordered[mid]
        return (ordered[mid - 1] + ordered[mid]) // 2
