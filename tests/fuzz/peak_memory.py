"""The peak memory of one stretch of work, whatever peaks came before it in the process.

The process's all-time peak (``ru_maxrss``) cannot bound one fuzz input: once any input raised
it, a later one that stays under it is not measured at all. Linux resets the resident set's
high-water mark on request (``5`` written to ``/proc/self/clear_refs``), so each stretch gets a
peak of its own, read back as ``VmHWM`` from ``/proc/self/status``. Where that file cannot be
written, or a write to it leaves the mark where it was (an older or sandboxed kernel), Python's
traced allocations stand in (``tracemalloc``, its peak reset likewise): they miss memory a C
library takes without telling Python, and they slow what they trace.
"""

from __future__ import annotations

import functools
import tracemalloc
from pathlib import Path
from typing import Final, Literal

CLEAR_REFS: Final = Path("/proc/self/clear_refs")
STATUS: Final = Path("/proc/self/status")

Way = Literal["VmHWM", "tracemalloc"]


PROBE: Final = 48 << 20
"""Above glibc's largest mmap threshold (32 MiB): taken as fresh pages and given back on free,
so the high-water mark stands this far above the resident set until it is reset."""


@functools.cache
def best_way() -> Way:
    """``VmHWM`` where this process may reset its high-water mark, else ``tracemalloc``.

    The reset is tried, not assumed: some kernels (a sandboxed one among them) take the write to
    ``clear_refs`` and leave the mark where it was."""
    try:
        peak = b"\x01" * PROBE  # every page written, then freed: the mark stays up
        del peak
        _reset_high_water_mark()
        if _status_kib("VmHWM") - _status_kib("VmRSS") > (PROBE >> 10) // 2:
            return "tracemalloc"
    except (OSError, ValueError):
        return "tracemalloc"
    return "VmHWM"


class PeakMemory:
    """Bytes the memory in use rose to above where it stood at :meth:`start`, read by
    :meth:`grew`. One stretch at a time in a process: a start resets the peak for everyone."""

    def __init__(self, way: Way | None = None) -> None:
        self.way: Way = way or best_way()
        self._base = 0
        self._tracing = False  # tracemalloc started here, so stopped here

    def start(self) -> None:
        if self.way == "VmHWM":
            _reset_high_water_mark()
            self._base = _status_kib("VmHWM") * 1024  # the resident set now, after the reset
            return
        if not tracemalloc.is_tracing():
            tracemalloc.start()
            self._tracing = True
        tracemalloc.reset_peak()
        self._base = tracemalloc.get_traced_memory()[0]

    def grew(self) -> int:
        if self.way == "VmHWM":
            return _status_kib("VmHWM") * 1024 - self._base
        peak = tracemalloc.get_traced_memory()[1]
        if self._tracing:
            tracemalloc.stop()
            self._tracing = False
        return peak - self._base


def _reset_high_water_mark() -> None:
    with open(CLEAR_REFS, "w") as file:
        file.write("5")


def _status_kib(field: str) -> int:
    """A ``kB`` field of ``/proc/self/status``."""
    for line in STATUS.read_text().splitlines():
        name, _, value = line.partition(":")
        if name == field:
            return int(value.split()[0])
    raise ValueError(f"{STATUS} has no {field}")
