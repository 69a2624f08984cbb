"""What ``dump`` adds after a recording's messages: each kernel launch that had not finished
when the stream ended, with the warps that had not ended and their last events (a recording of
a process killed while a kernel hung ends with its stuck state, as the last one known)."""

from __future__ import annotations

import contextlib
from typing import Any

from iket_tui.model.kernels import KernelMessageError, KernelTimeline
from iket_tui.protocol import messages as m

UNFINISHED = "kernel_unfinished"
"""The type of the line ``dump`` writes for a launch still running at the end of the stream."""
_KERNEL_TYPES = frozenset({m.KERNEL_TRACING, m.KERNEL_MODULE, m.KERNEL_RECORDS})


class RunningLaunches:
    """Follows the kernel messages of a stream for the launches still running at its end; a
    launch's events are let go as the next one arrives, its unfinished warps are kept."""

    def __init__(self) -> None:
        self.kernels = KernelTimeline(max_events=0)
        self.last_t_ns = 0
        """The latest agent time the stream carried: its end."""

    def apply(self, msg: dict[str, Any]) -> None:
        """Take in one message of the stream."""
        t = msg.get("t_ns")
        if type(t) is int and t > self.last_t_ns:
            self.last_t_ns = t
        if msg.get("type") in _KERNEL_TYPES:
            with contextlib.suppress(KernelMessageError):  # left out, as the session leaves it out
                self.kernels.apply(msg)

    def at_end(self) -> list[dict[str, Any]]:
        """One ``kernel_unfinished`` map per launch with warps that had not ended, oldest first:
        how long it had been quiet and the summary line the kernels screen shows."""
        kernels = self.kernels
        found: list[dict[str, Any]] = []
        for launch in sorted(kernels.launches.values(), key=lambda launch: launch.order):
            if not launch.running:
                continue
            unfinished = kernels.unfinished(launch, self.last_t_ns, limit=8)
            ring, module, _, number = launch.key
            found.append(
                {
                    "type": UNFINISHED,
                    "t_ns": self.last_t_ns,
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
