"""What ``dump`` adds after a recording's messages: each kernel launch that had not finished
when the stream ended, with the warps that had not ended and their last events (a recording of
a process killed while a kernel hung ends with its stuck state, as the last one known). In a
recording of several processes, each process's kernel messages are followed apart (their rings
and modules are numbered per process) and each line names its process."""

from __future__ import annotations

import contextlib
from typing import Any

from iket_tui.model.kernels import KernelMessageError, KernelTimeline, ProcessKernels
from iket_tui.model.nodes import ProcessNode
from iket_tui.protocol import messages as m

UNFINISHED = "kernel_unfinished"
"""The type of the line ``dump`` writes for a launch still running at the end of the stream."""
_KERNEL_TYPES = frozenset({m.KERNEL_TRACING, m.KERNEL_MODULE, m.KERNEL_RECORDS})


class RunningLaunches:
    """Follows the kernel messages of a stream for the launches still running at its end; a
    launch's events are let go as the next one arrives, its unfinished warps are kept."""

    def __init__(self) -> None:
        self._current = ProcessNode()
        self._by_pid: dict[int, ProcessNode] = {}
        self.kernels = ProcessKernels(KernelTimeline(max_events=0, process=self._current))
        """Each process's kernel timeline."""
        self.last_t_ns = 0
        """The latest agent time the stream carried: its end."""

    def apply(self, msg: dict[str, Any]) -> None:
        """Take in one message of the stream."""
        t = msg.get("t_ns")
        if type(t) is int and t > self.last_t_ns:
            self.last_t_ns = t
        kind = msg.get("type")
        if kind in _KERNEL_TYPES:
            with contextlib.suppress(KernelMessageError):  # left out, as the session leaves it out
                self.kernels.of(self._current).apply(msg)
        elif kind == m.PROCESS:
            self._select(msg.get("pid"))
        elif kind == m.HELLO and msg.get("role", "agent") == "agent":
            pid, rank = msg.get("pid"), msg.get("rank")
            if type(pid) is int and self._current.pid is None:
                self._select(pid)
            if type(rank) is int:
                self._current.rank = rank

    def _select(self, pid: object) -> None:
        """Whose messages follow: the first pid named takes the process seen before any was named."""
        if type(pid) is not int:
            return
        node = self._by_pid.get(pid)
        if node is None:
            first = self.kernels.first.process
            node = first if first is not None and first.pid is None else ProcessNode()
            node.pid = pid
            self._by_pid[pid] = node
        self._current = node

    def at_end(self) -> list[dict[str, Any]]:
        """One ``kernel_unfinished`` map per launch with warps that had not ended, oldest first:
        how long it had been quiet and the summary line the kernels screen shows; where several
        processes trace kernels, the process's pid (and rank) too."""
        kernels = self.kernels
        several = kernels.several
        found: list[dict[str, Any]] = []
        for launch in reversed(kernels.newest_first()):
            if not launch.running:
                continue
            unfinished = kernels.unfinished(launch, self.last_t_ns, limit=8)
            ring, module, _, number = launch.key
            process = launch.process
            whose: dict[str, Any] = {}
            if several and process is not None:
                whose["pid"] = process.pid
                if process.rank is not None:
                    whose["rank"] = process.rank
            found.append(
                {
                    "type": UNFINISHED,
                    "t_ns": self.last_t_ns,
                    **whose,
                    "kernel": launch.kernel,
                    "ring_id": ring,
                    "module": module,
                    "launch": number,
                    "blocks": launch.blocks(),
                    "unfinished_blocks": unfinished.blocks,
                    "unfinished_warps": unfinished.warps,
                    "quiet_ns": kernels.quiet_ns(launch, self.last_t_ns),
                    "summary": unfinished.summary(launch.blocks()),
                }
            )
        return found
