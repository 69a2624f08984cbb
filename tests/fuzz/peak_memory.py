"""The peak memory of one stretch of work, whatever peaks came before it in the process.

The process's all-time peak (``ru_maxrss``) cannot bound one fuzz input: once any input raised
it, a later one that stays under it is not measured at all. Python's traced allocations
(``tracemalloc``, numpy's arrays among them) have a peak that can be reset, so each stretch gets a
peak of its own. They miss memory a C library takes without telling Python, and they slow what
they trace (about three times, measured on the fuzz targets: :data:`TRACED_SLOWDOWN`).

The resident set's high-water mark, reset by writing ``5`` to ``/proc/self/clear_refs`` and read
back as ``VmHWM``, would see everything, but it is not exact: the kernel keeps the resident
set's counts per CPU and folds them in lazily, so on a machine of many CPUs it lags by tens of
megabytes, and where the reset is taken and ignored (a sandboxed kernel) it does not move at all.
Both were seen failing the tests of this measure (a 40 MB allocation that did not raise the mark),
so it is not used.
"""

from __future__ import annotations

import tracemalloc
from typing import Final

TRACED_SLOWDOWN: Final = 4
"""How much more CPU time a stretch may take while its allocations are traced: the fuzz targets
measured about three times their untraced time."""


class PeakMemory:
    """Bytes the traced memory rose to above where it stood at :meth:`start`, read by
    :meth:`grew`. One stretch at a time in a process: a start resets the peak for everyone."""

    way: Final = "tracemalloc"

    def __init__(self) -> None:
        self._base = 0
        self._tracing = False  # tracemalloc started here, so stopped here

    def start(self) -> None:
        if not tracemalloc.is_tracing():
            tracemalloc.start()
            self._tracing = True
        tracemalloc.reset_peak()
        self._base = tracemalloc.get_traced_memory()[0]

    def grew(self) -> int:
        peak = tracemalloc.get_traced_memory()[1]
        if self._tracing:
            tracemalloc.stop()
            self._tracing = False
        return peak - self._base
