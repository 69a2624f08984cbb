"""The native pass's two steps spread over threads when a pass is big: a burst of a heavy kernel
puts millions of records in one pass, more than one core drains in a drain period.

A pass is split only when it holds more than :data:`RECORDS_PER_THREAD` records a thread, so a
ring that fills slower than one core drains it costs the traced program one core at most; the
threads are the pass's own (the native library's calls run without the GIL). Regions split by
row, pieces by the chunks they make, so each thread writes its own stretch of the output.
"""

from __future__ import annotations

import itertools
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

import numpy as np

from iket_tui.ring.layout import DRAINED_EVENTS_PER_CHUNK
from iket_tui.ring.native_drain import NativePass

RECORDS_PER_THREAD: Final = 1 << 21
"""Records a thread takes in a pass before a second one joins it (about 5 ms of one core's work
on the machines measured: docs/ring.md)."""
DEFAULT_THREADS: Final = 4
"""Threads a drain uses at most by default (``RingDrain(threads=...)``, ``IKET_TUI_DRAIN_THREADS``)."""
Array = np.ndarray[Any, Any]


def default_threads() -> int:
    """``IKET_TUI_DRAIN_THREADS`` where it is a whole number from 1 to 64, else the smaller of
    :data:`DEFAULT_THREADS` and the cores this process may run on."""
    raw = os.environ.get("IKET_TUI_DRAIN_THREADS", "").strip()
    if raw.isdigit() and 1 <= int(raw) <= 64:
        return int(raw)
    return max(1, min(DEFAULT_THREADS, len(os.sched_getaffinity(0))))


class NativeThreads:
    """A drain's native pass, run on up to ``threads`` threads per pass."""

    def __init__(self, native: NativePass, threads: int) -> None:
        if threads < 1:
            raise ValueError("a drain needs at least one thread")
        self.native = native
        self.threads = threads
        self.used = 1
        """Threads the last pass's steps ran on, at most."""
        self._pool: ThreadPoolExecutor | None = None

    def _split(self, records: int) -> int:
        return max(1, min(self.threads, records // RECORDS_PER_THREAD))

    def _map(self, calls: list[Any]) -> list[Any]:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="iket-tui-ring-drain")
        return [future.result() for future in [self._pool.submit(call) for call in calls]]

    def regions(
        self,
        records: Array,
        before: Array | None,
        after: Array | None,
        base: Array,
        read: Array,
        count: Array,
        begun: Array,
        rows: Array,
    ) -> tuple[Array, Array]:
        """As :meth:`NativePass.regions` (start and run), the regions split among threads."""
        n, cap = len(base), records.shape[1]
        k = self._split(n * cap)
        self.used = k
        if k == 1:
            start, run, _ = self.native.regions(records, before, after, base, read, count, begun, rows)
            return start, run
        bounds = np.linspace(0, n, k + 1).astype(np.int64)

        def part(a: int, b: int) -> tuple[Array, Array, Array]:
            return self.native.regions(
                records,
                None if before is None else before[a:b],
                None if after is None else after[a:b],
                base[a:b],
                read[a:b],
                count[a:b],
                begun[a:b],
                rows[a:b],
            )

        done = self._map([lambda a=int(a), b=int(b): part(a, b) for a, b in itertools.pairwise(bounds)])
        return np.concatenate([d[0] for d in done]), np.concatenate([d[1] for d in done])

    def chunks(
        self,
        records: Array,
        record_rows: Array,
        row: Array,
        slot: Array,
        length: Array,
        first_flags: Array,
        last_flags: Array,
        empty_t: Array,
        table: Array,
        out: Array,
    ) -> bool:
        """As :meth:`NativePass.chunks`, piece ``p`` of region ``row[p]`` of the pass (its records
        in row ``record_rows[row[p]]`` of ``records``, its header ``table[row[p]]``), the pieces
        split among threads by the chunks they make."""
        per = DRAINED_EVENTS_PER_CHUNK
        made = np.maximum(-(-length // per), 1)
        k = self._split(int(length.sum()))
        self.used = max(self.used, k)
        where = record_rows[row]
        if k == 1:
            return self.native.chunks(records, where, slot, length, row, first_flags, last_flags, empty_t, table, out)
        ends = np.cumsum(made)
        cuts = np.searchsorted(ends, np.linspace(0, ends[-1], k + 1)[1:-1])
        bounds = [0, *sorted(set((cuts + 1).tolist())), len(length)]
        offsets = np.r_[0, ends]

        def part(a: int, b: int) -> bool:
            return self.native.chunks(
                records,
                where[a:b],
                slot[a:b],
                length[a:b],
                row[a:b],
                first_flags[a:b],
                last_flags[a:b],
                empty_t[a:b],
                table,
                out[int(offsets[a]) : int(offsets[b])],
            )

        pairs = [(a, b) for a, b in itertools.pairwise(bounds) if b > a]
        return all(self._map([lambda a=a, b=b: part(a, b) for a, b in pairs]))
