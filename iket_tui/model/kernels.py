"""What the stream says about traced kernels: modules, ring drains and their losses.

Kept beside the pass tree and fed the kernel messages it receives (``kernel_tracing``,
``kernel_module``, ``kernel_records``, docs/ring.md). It holds counts and event tables, not
records: the records themselves are decoded where they are drawn.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from iket_tui.model.launches import KernelTimeline
from iket_tui.protocol import messages as m
from iket_tui.ring.drain import RingCounters
from iket_tui.ring.events import EventTableError, ModuleEvents
from iket_tui.ring.wire import RecordsError, module_from_message, records_from_message


class KernelMessageError(ValueError):
    """A kernel message that cannot be read; counted as malformed by the tree."""


@dataclass
class KernelTracing:
    """The agent's tracing state, from its ``kernel_tracing`` message."""

    enabled: bool = False
    device: str | None = None  # the GPU the ring lives on, None without one
    reason: str | None = None  # why there is no ring (no device, no cupy, ...)
    drain_hz: float | None = None


@dataclass
class KernelSummary:
    """Traced modules by (ring, module id) and the ring's counters as last reported."""

    tracing: KernelTracing | None = None
    modules: dict[tuple[int, int], ModuleEvents] = field(default_factory=dict)
    module_compile: dict[tuple[int, int], int | None] = field(default_factory=dict)
    counters: dict[int, RingCounters] = field(default_factory=dict)  # by ring id
    batches: int = 0
    chunks: int = 0
    events_received: int = 0
    """Events in the records that reached this client (the counters say how many were read)."""
    timeline: KernelTimeline = field(default_factory=KernelTimeline)
    """Every launch and its events, for the flame view."""
    version: int = 0

    @property
    def events_read(self) -> int:
        return sum(c.events_read for c in self.counters.values())

    @property
    def events_lost(self) -> int:
        return sum(c.events_lost for c in self.counters.values())

    @property
    def torn(self) -> int:
        return sum(c.torn for c in self.counters.values())

    @property
    def events_missed(self) -> int:
        """Events the agent read from its ring and sent that never reached this client (record
        batches dropped from a full client queue, or from before it attached)."""
        return max(0, self.events_read - self.events_received)

    def headline(self) -> str:
        """One short phrase for the header; empty when the target does not trace kernels."""
        tracing = self.tracing
        if tracing is None:
            return ""
        if tracing.device is None and not self.counters:
            return f"kernels: no ring ({tracing.reason or 'no device'})"
        text = f"kernels: {self.events_read:,} ev"
        lost = self.events_lost + self.events_missed
        if lost or self.torn:
            text += f", {lost:,} lost"
        if self.torn:
            text += f" ({self.torn:,} torn)"
        return text

    def apply(self, msg: Mapping[str, Any]) -> None:
        """Apply one kernel message; raises :class:`KernelMessageError` for a malformed one."""
        kind = msg.get("type")
        try:
            if kind == m.KERNEL_TRACING:
                self._tracing(msg)
            elif kind == m.KERNEL_MODULE:
                table = module_from_message(msg)
                ring_id = msg.get("ring_id")
                key = (ring_id if type(ring_id) is int else 0, table.module)
                self.modules[key] = table
                compile_id = msg.get("compile")
                self.module_compile[key] = compile_id if type(compile_id) is int else None
                self.timeline.apply(msg)
            elif kind == m.KERNEL_RECORDS:
                records = records_from_message(msg)
                self.batches += 1
                self.chunks += len(records.chunks)
                self.events_received += int(records.chunks["n_events"].sum(dtype="int64"))
                self.counters[records.ring_id] = records.counters
                self.timeline.apply(msg)
            else:
                raise KernelMessageError(f"not a kernel message: {kind!r}")
        except (EventTableError, RecordsError) as exc:
            raise KernelMessageError(str(exc)) from None
        self.version += 1

    def _tracing(self, msg: Mapping[str, Any]) -> None:
        enabled, device, reason, hz = msg.get("enabled"), msg.get("device"), msg.get("reason"), msg.get("drain_hz")
        if type(enabled) is not bool or not (device is None or type(device) is str):
            raise KernelMessageError("kernel_tracing without a boolean 'enabled'")
        self.tracing = KernelTracing(
            enabled=enabled,
            device=device,
            reason=reason if type(reason) is str else None,
            drain_hz=float(hz) if isinstance(hz, int | float) and not isinstance(hz, bool) else None,
        )
