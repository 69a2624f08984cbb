"""What ``dump`` adds after a recording's messages: each kernel launch's status (complete,
partial with how much and why, or not traced, as the kernels screen says it), then each launch
that had not finished when the stream ended, with the warps that had not ended and their last
events (a recording of a process killed while a kernel hung ends with its stuck state, as the
last one known). In a recording of several processes, each process's kernel messages are
followed apart (their rings and modules are numbered per process) and each line names its
process."""

from __future__ import annotations

import contextlib
from typing import Any

from iket_tui.model.kernels import KernelMessageError, KernelTimeline, ProcessKernels
from iket_tui.model.launch_coverage import COMPLETE, RUNNING
from iket_tui.model.launches import Launch
from iket_tui.model.nodes import ProcessNode
from iket_tui.protocol import messages as m

UNFINISHED = "kernel_unfinished"
"""The type of the line ``dump`` writes for a launch still running at the end of the stream."""
LAUNCH = "kernel_launch"
"""The type of the line ``dump`` writes for each launch: its status."""
_KERNEL_TYPES = frozenset({m.KERNEL_TRACING, m.KERNEL_MODULE, m.KERNEL_RECORDS})


class RunningLaunches:
    """Follows the kernel messages of a stream for the launches still running at its end; a
    launch's events are let go as the next one arrives, its unfinished warps are kept."""

    def __init__(self) -> None:
        self._current = ProcessNode()
        self._by_pid: dict[tuple[object, int], ProcessNode] = {}  # by host and pid
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
            self._select(msg.get("pid"), msg.get("host"))
            timeline = self.kernels.timelines.get(self._current)
            if msg.get("state") in (m.PROCESS_ENDED, m.PROCESS_FAILED) and timeline is not None:
                timeline.end_stream()
        elif kind == m.HELLO and msg.get("role", "agent") == "agent":
            pid, rank = msg.get("pid"), msg.get("rank")
            if type(pid) is int and self._current.pid is None:
                self._select(pid)
            if type(rank) is int:
                self._current.rank = rank

    def _select(self, pid: object, host: object = None) -> None:
        """Whose messages follow: the first pid named takes the process seen before any was named."""
        if type(pid) is not int:
            return
        node = self._by_pid.get((host, pid))
        if node is None:
            first = self.kernels.first.process
            node = first if first is not None and first.pid is None else ProcessNode()
            node.pid = pid
            node.host = host if type(host) is str else None
            self._by_pid[(host, pid)] = node
        self._current = node

    def at_end(self) -> list[dict[str, Any]]:
        """The stream ended: one ``kernel_launch`` map per launch, oldest first, with its status
        (and for one not complete, the words the flame view's title says and what it lost), then
        one ``kernel_unfinished`` map per launch with warps that had not ended: how long it had
        been quiet and the summary line the kernels screen shows; where several processes trace
        kernels, the process's pid (and rank) on each."""
        kernels = self.kernels
        for timeline in kernels.timelines.values():
            timeline.end_stream()
        launches = list(reversed(kernels.newest_first()))
        found = [self._status(launch) for launch in launches]
        for launch in launches:
            if not launch.running:
                continue
            unfinished = kernels.unfinished(launch, self.last_t_ns, limit=8)
            ring, module, _, number = launch.key
            found.append(
                {
                    "type": UNFINISHED,
                    "t_ns": self.last_t_ns,
                    **self._whose(launch),
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

    def _whose(self, launch: Launch) -> dict[str, Any]:
        """The launch's process, where several trace kernels."""
        process = launch.process
        if not self.kernels.several or process is None:
            return {}
        host = {"host": process.host} if process.host is not None else {}
        return {**host, "pid": process.pid, **({"rank": process.rank} if process.rank is not None else {})}

    def _status(self, launch: Launch) -> dict[str, Any]:
        """A ``kernel_launch`` map: the launch, its status and, where not complete, why."""
        status = launch.status()
        coverage = launch.coverage
        ring, module, _, number = launch.key
        line: dict[str, Any] = {
            "type": LAUNCH,
            "t_ns": self.last_t_ns,
            **self._whose(launch),
            "kernel": launch.kernel,
            "ring_id": ring,
            "module": module,
            "launch": number,
            "grid": list(coverage.grid) if coverage.grid is not None else None,
            "block_warps": coverage.block_warps,
            "status": status.short(),
            "warps_whole": coverage.warps_whole,
            "warps_expected": coverage.expected_warps,
            "events": coverage.events_kept,
            "events_of_whole_warps": coverage.events_whole,
        }
        if status.state in (COMPLETE, RUNNING):
            return line
        line["why"] = list(status.reasons)
        line["summary"] = f"{status.words()} · {coverage.detail()}"
        return line
