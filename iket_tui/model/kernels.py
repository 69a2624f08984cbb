"""What the stream says about traced kernels: the agent's tracing state, the modules' event
tables, every launch with its events, and the ring's counts of what was read and lost.

Fed the kernel messages of a stream (``kernel_tracing``, ``kernel_module``, ``kernel_records``,
docs/ring.md) by the session, on the app thread. Each ``kernel_records`` is checked and decoded
once, here; records of a module whose event table has not arrived are held undecoded until it
does. Modules are known by (ring, module id): two rings may both have a module 1.

A stream of several processes has one timeline per process that sent kernel messages (their
rings and modules are numbered by each process alone, so two processes may share both ids);
:class:`ProcessKernels` shows them as one: launches of every process newest first, each named
by its process.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from iket_tui.durations import duration
from iket_tui.model.launch_coverage import NOT_TRACED, PARTIAL, RUNNING
from iket_tui.model.launches import Launch, LaunchKey, held_events
from iket_tui.model.nodes import ProcessNode
from iket_tui.model.running_kernels import DEFAULT_STUCK_AFTER_NS, DeviceClock, Unfinished, unfinished
from iket_tui.protocol import messages as m
from iket_tui.ring.counters import LOSS_OVERWRITTEN, RingCounters
from iket_tui.ring.decode import EventTables, decode
from iket_tui.ring.events import EventTableError, ModuleEvents
from iket_tui.ring.wire import Records, RecordsError, module_from_message, records_from_message

DEFAULT_MAX_EVENTS = 10_000_000
SPLIT_BYTES = 4 << 20
"""A drain's batch of more chunk bytes than this is sent as several messages, all full but the
last (docs/ring.md, "Messages")."""
"""Events the timeline keeps (25 bytes each kept, 32 decoded) before it summarises the oldest launches."""

ModuleKey = tuple[int, int]
"""(ring id, module id)."""


class KernelMessageError(ValueError):
    """A kernel message that cannot be read; the session counts it as malformed."""


@dataclass
class KernelTracing:
    """The agent's tracing state, from its ``kernel_tracing`` message."""

    enabled: bool = False
    device: str | None = None  # the GPU the ring lives on, None without one
    reason: str | None = None  # why there is no ring (no device, no cupy, ...)
    drain_hz: float | None = None


class KernelTimeline:
    """Traced modules, launches and ring counters of one stream.

    ``version`` changes whenever anything here changed; each launch has its own version too.
    """

    def __init__(
        self,
        max_events: int = DEFAULT_MAX_EVENTS,
        *,
        stuck_after_ns: int = DEFAULT_STUCK_AFTER_NS,
        process: ProcessNode | None = None,
        orders: Iterator[int] | None = None,
    ) -> None:
        """``max_events``: events kept at most, over every timeline of the pool (a session's
        are one pool, see :meth:`ProcessKernels.of`). ``process``: the process whose kernel
        messages these are, named on its launches. ``orders`` numbers the launches as they
        first appear; the timelines of one session share it, so that their launches sort
        together by arrival."""
        self.process = process
        self.pool: list[KernelTimeline] = [self]
        """The timelines whose events count against one bound (a session's, one per process)."""
        self.launch_orders = orders if orders is not None else itertools.count()
        """Numbers each launch as it first appears (shared by a session's timelines)."""
        self.tracing: KernelTracing | None = None
        self.modules: dict[ModuleKey, ModuleEvents] = {}
        """Every event table received, by (ring, module)."""
        self.module_compile: dict[ModuleKey, int | None] = {}
        """The compile that built each module, when the agent said."""
        self.counters: dict[int, RingCounters] = {}
        """Each ring's counters as last reported, by ring id."""
        self.launches: dict[LaunchKey, Launch] = {}
        self.batches = 0
        self.chunks = 0
        self.events_received = 0
        """Events in the records that reached this client (the counters say how many were read)."""
        self.max_events = max_events
        """Events kept at most; the oldest launches beyond it keep only their summary."""
        self.retained = 0
        self.evicted_launches = 0
        self.evicted_events = 0
        self.waiting_events = 0
        """Events of records whose module's event table has not arrived: held, not yet shown."""
        self.stuck_after_ns = stuck_after_ns
        """A launch with an unfinished warp that has run no event for longer than this is running past the threshold."""
        self.clocks: dict[int, DeviceClock] = {}
        """Each ring's device timer as of its latest records, by ring id."""
        self.version = 0
        self._running: dict[LaunchKey, Launch] = {}  # the launches with warps that have not ended
        self._tables: dict[int, EventTables] = {}  # the decoder's lookup arrays, one per ring
        self._waiting: list[tuple[Records, bool]] = []
        self._incomplete: tuple[int, str] | None = None  # incomplete_words as of a version
        self._received: dict[int, int] = {}  # per ring, the events of its records that arrived
        self._missing: dict[int, int] = {}  # per ring, events read and not arrived as of its last drain seen whole

    # Applying messages

    def apply(self, msg: Mapping[str, Any]) -> None:
        """Apply one kernel message; raises :class:`KernelMessageError` for a malformed one."""
        kind = msg.get("type")
        try:
            if kind == m.KERNEL_TRACING:
                self._tracing(msg)
            elif kind == m.KERNEL_MODULE:
                self._module(msg)
            elif kind == m.KERNEL_RECORDS:
                records = records_from_message(msg)
                self._clock(records, msg.get("t_ns"))
                # Drains that send losses carry each launch's shape and flag warp begins; the
                # words there held other things before.
                self._records(records, shaped="losses" in msg)
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

    def _clock(self, records: Records, t_ns: object) -> None:
        if type(t_ns) is not int:
            return  # a batch without the agent's time moves no clock
        known = self.clocks.get(records.ring_id)
        self.clocks[records.ring_id] = DeviceClock(
            batch_t_ns=t_ns,
            device_now_ns=records.device_now_ns,
            newest_event_ns=known.newest_event_ns if known is not None else 0,
        )

    def _module(self, msg: Mapping[str, Any]) -> None:
        table = module_from_message(msg)
        ring_id = msg.get("ring_id")
        ring = ring_id if type(ring_id) is int else 0
        key = (ring, table.module)
        self.modules[key] = table
        compile_id = msg.get("compile")
        self.module_compile[key] = compile_id if type(compile_id) is int else None
        self._tables.setdefault(ring, EventTables()).add(table)
        waiting, self._waiting = self._waiting, []
        self.waiting_events = 0
        for records, shaped in waiting:
            self._add(records, shaped)

    def _records(self, records: Records, *, shaped: bool) -> None:
        ring = records.ring_id
        running = [launch for key, launch in self._running.items() if key[0] == ring]
        touched = self._add(records, shaped)  # first: a batch that cannot be decoded is counted by nothing here
        self.batches += 1
        self.chunks += len(records.chunks)
        events = int(records.chunks["n_events"].sum(dtype=np.int64))
        self.events_received += events
        self._received[ring] = self._received.get(ring, 0) + events
        before = self.counters.get(ring)
        self.counters[ring] = records.counters
        last_of_drain = len(records.chunks) * records.layout.chunk_bytes < SPLIT_BYTES
        self._unnamed_losses(ring, before, records.counters, shaped, last_of_drain, [*running, *touched])

    def _unnamed_losses(
        self,
        ring: int,
        before: RingCounters | None,
        after: RingCounters,
        shaped: bool,
        last_of_drain: bool,
        launches: list[Launch],
    ) -> None:
        """Put what the ring's counters say was lost without a name on ``launches``, those
        running while it was: warps the ring went round before their names were read (events
        lost, from a drain that names no loss), and events the agent read and dropped for this
        client. The second is known once the last batch of a drain arrived (a drain's batches
        carry the same counters; all but the last are full): the events the ring had read by
        then that never arrived, beyond those missing before (from before this client attached,
        among them)."""
        start = before if before is not None else RingCounters()  # a client attached late: said lapped then
        lapped = after.warps_unread - start.warps_unread
        lost = 0 if shaped else after.events_lost - start.events_lost
        dropped = 0
        if last_of_drain:
            settled = after.events_read - self._received.get(ring, 0)
            missing = self._missing.get(ring)
            if missing is not None and settled > missing:
                dropped = settled - missing
            self._missing[ring] = settled
        if lapped <= 0 and lost <= 0 and dropped <= 0:
            return
        for launch in {id(launch): launch for launch in launches}.values():
            coverage = launch.coverage
            coverage.lapped_while_running(max(lapped, 0), max(lost, 0))
            coverage.dropped_while_running(dropped)

    def _add(self, records: Records, shaped: bool) -> list[Launch]:
        """Decode and file a batch's records and losses by launch; returns the launches it named."""
        losses = records.losses
        if not len(records.chunks) and not len(losses):
            return []
        ring = records.ring_id
        tables = self._tables.get(ring)
        modules = np.unique(records.chunks["module"])  # losses follow their warp's begin, decoded with its table
        if tables is None or any(tables.module(int(module)) is None for module in modules):
            self._waiting.append((records, shaped))
            self.waiting_events += int(records.chunks["n_events"].sum(dtype=np.int64))
            return []
        chunks = records.chunks
        events = decode(chunks, tables, records.layout, records.warp_slots)
        clock = self.clocks.get(ring)
        if clock is not None and len(events):
            clock.newest_event_ns = max(clock.newest_event_ns, int(events["t_ns"].max()))
        of_events, of_chunks, of_losses = _by_launch(events), _by_launch(chunks), _by_launch(losses)
        held = held_events(events)  # packed once for the batch, then taken apart by launch
        touched = []
        # Launches with records first (as they arrived), then those known only by their losses.
        for packed in [*of_events, *(packed for packed in of_losses if packed not in of_events)]:
            found = self._launch(ring, packed, tables)
            lost = losses[of_losses.get(packed, _NONE)]
            # The batch's chunks and losses at once: a warp's loss may come with its end.
            found.coverage.add(chunks[of_chunks.get(packed, _NONE)], lost, begins_known=shaped)
            if packed in of_events:
                found.add(_rows_of(held, of_events[packed]))
            if found.progress.lose(lost[lost["reason"] != LOSS_OVERWRITTEN]) and found.version:
                found.version += 1  # after its begin: lost, no longer drawn running
            self._follow(found)
            touched.append(found)
        self.retained += len(events)
        self._bound()
        return touched

    def _launch(self, ring: int, packed: int, tables: EventTables) -> Launch:
        """The launch of ``packed`` (:func:`_launch_keys`), made when first named."""
        module, kernel, launch = packed >> 40, (packed >> 32) & 0xFF, packed & 0xFFFFFFFF
        key = (ring, module, kernel, launch)
        found = self.launches.get(key)
        if found is None:
            table = tables.module(module)
            name = table.kernels[kernel] if table is not None and kernel < len(table.kernels) else f"kernel {kernel}"
            compile_id = self.module_compile.get((ring, module))
            found = Launch(key, name, table, order=next(self.launch_orders), compile=compile_id, process=self.process)
            self.launches[key] = found
        return found

    def _follow(self, launch: Launch) -> None:
        if launch.running:
            self._running[launch.key] = launch
        else:
            self._running.pop(launch.key, None)

    def end_stream(self) -> None:
        """The stream ended: nothing more of any launch will come; those still running were cut."""
        for launch in self.launches.values():
            coverage = launch.coverage
            if coverage.ended:
                continue
            if launch.status().state == RUNNING:
                coverage.cut = True
            coverage.ended = True
        self.version += 1

    def _bound(self) -> None:
        """Let the oldest launches go (never the newest) until the events kept fit the bound,
        over every timeline of the pool: the bound is the session's, however many processes."""
        pool = self.pool
        kept = sum(timeline.retained for timeline in pool)
        if kept <= self.max_events:
            return
        owned = [(launch, timeline) for timeline in pool for launch in timeline.launches.values()]
        for launch, timeline in sorted(owned, key=lambda pair: pair[0].order)[:-1]:
            if kept <= self.max_events:
                break
            if not launch.evicted:
                kept -= launch.rows
                timeline.retained -= launch.rows
                timeline.evicted_events += launch.records
                timeline.evicted_launches += 1
                timeline.version += 1
                launch.evict()

    def release(self, launch: Launch) -> list[np.ndarray[Any, np.dtype[np.void]]]:
        """Take the events ``launch`` holds out of the timeline, for a reader that keeps them
        itself (an export, on disk): they no longer count against the bound, and a later
        eviction of the launch counts only what it holds then."""
        parts = launch.release()
        self.retained -= sum(len(part) for part in parts)
        self.version += 1
        return parts

    # Derived state

    def newest_first(self) -> list[Launch]:
        return sorted(self.launches.values(), key=lambda launch: launch.order, reverse=True)

    def incomplete_words(self) -> str:
        """How many launches did not arrive whole, for the title: `` (2 partial, 1 not traced)``;
        empty when none (worked out once per version of the timeline)."""
        if self._incomplete is None or self._incomplete[0] != self.version:
            counts = Counter(launch.status().state for launch in self.launches.values())
            found = [f"{counts[state]} {state}" for state in (PARTIAL, NOT_TRACED) if counts[state]]
            self._incomplete = (self.version, f" ({', '.join(found)})" if found else "")
        return self._incomplete[1]

    def device_now_ns(self, ring: int, agent_now_ns: int) -> int | None:
        """The device timer of ``ring`` at agent time ``agent_now_ns`` (see :class:`DeviceClock`);
        None before any records of it arrived."""
        clock = self.clocks.get(ring)
        return clock.now_ns(agent_now_ns) if clock is not None else None

    def quiet_ns(self, launch: Launch, agent_now_ns: int) -> int:
        """How long the launch's longest quiet unfinished warp has run no event, on its device's
        clock: a warp that waits is quiet however busy the launch's other warps are (0 when every
        warp ended or the clock is unknown)."""
        now = self.device_now_ns(launch.key[0], agent_now_ns)
        open_warps = launch.progress.open
        if now is None or not len(open_warps):
            return 0
        return max(0, now - int(open_warps["t_ns"].min()))

    def running_past(self, launch: Launch, agent_now_ns: int) -> bool:
        """Whether one of the launch's unfinished warps has run no event for longer than ``stuck_after_ns``."""
        return launch.running and self.quiet_ns(launch, agent_now_ns) > self.stuck_after_ns

    def running_ns(self, launch: Launch, agent_now_ns: int) -> int:
        """How long the launch has run at agent time ``agent_now_ns``: from its first event to the
        device's now while it runs (its events' span says only when the last one came), from its
        first event to its last once it finished or where the device's clock is unknown."""
        now = self.device_now_ns(launch.key[0], agent_now_ns)
        if not launch.running or now is None:
            return launch.duration_ns
        return max(launch.duration_ns, now - launch.first_ns)

    def unfinished(self, launch: Launch, agent_now_ns: int, *, limit: int = 200) -> Unfinished:
        """The launch's warps that have not ended, grouped per block by their last event, the
        longest quiet first, dated on its device's clock at agent time ``agent_now_ns``."""
        now = self.device_now_ns(launch.key[0], agent_now_ns)
        return unfinished(
            launch.progress,
            launch.module,
            device_now_ns=now if now is not None else launch.last_ns,
            stuck_after_ns=self.stuck_after_ns,
            limit=limit,
        )

    @property
    def has_ring(self) -> bool:
        """Whether the target traces kernels on a GPU (or a recording of one holds launches)."""
        tracing = self.tracing
        return bool(self.launches) or (tracing is not None and tracing.device is not None)

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

    def kernel_names(self) -> list[str]:
        """The kernels of every traced module, sorted, each once."""
        return sorted({name for table in self.modules.values() for name in table.kernels})

    def running(self) -> list[Launch]:
        """The launches with warps that began and have not ended, oldest first."""
        return sorted(self._running.values(), key=lambda launch: launch.order)

    def quiet(self, agent_now_ns: int) -> list[Launch]:
        """The launches running past the threshold at agent time ``agent_now_ns``, oldest first."""
        return [launch for launch in self.running() if self.running_past(launch, agent_now_ns)]

    def headline(self, agent_now_ns: int | None = None) -> str:
        """One short phrase for the header; empty when the target does not trace kernels. With
        ``agent_now_ns``, it also says how many launches run past the threshold then."""
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
        return text + _quiet_words(self, agent_now_ns)

    def title(self, *, following: bool, quiet: int = 0) -> str:
        """The kernels screen's title line: where the ring is, launches, events read and lost,
        and how many launches (``quiet``) run with no event for longer than the threshold."""
        tracing = self.tracing
        if tracing is None:
            return "kernels: this target does not trace kernels (iket-tui run --kernels)"
        ring = f"ring on {tracing.device}" if tracing.device else f"no ring ({tracing.reason or 'no device'})"
        lost = self.events_lost + self.events_missed
        count = len(self.launches)
        launches = f"{count} launch{'' if count == 1 else 'es'}{self.incomplete_words()}"
        text = f"kernels: {ring} · {launches} · {self.events_read:,} events read, {lost:,} lost"
        if self.waiting_events:
            text += f" · {self.waiting_events:,} events waiting for their module's event table"
        if self.evicted_launches:
            text += f" · {self.evicted_launches} older launches summarised (events kept at most {self.max_events:,})"
        if quiet:
            text += f" · {quiet} running with a warp quiet for over {duration(self.stuck_after_ns)}"
        return text + ("  follow" if following else "")


_NONE: Final = np.zeros(0, dtype=np.intp)


def _by_launch(rows: np.ndarray[Any, np.dtype[np.void]]) -> dict[int, np.ndarray[Any, np.dtype[np.intp]]]:
    """The indices of ``rows`` (events, chunks or losses) per launch (:func:`_launch_keys`), in
    order of the keys, each launch's rows in their order."""
    if not len(rows):
        return {}
    keys = _launch_keys(rows)
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    bounds = np.r_[starts, len(ordered)].tolist()
    return {packed: order[bounds[i] : bounds[i + 1]] for i, packed in enumerate(ordered[starts].tolist())}


def _rows_of(
    rows: np.ndarray[Any, np.dtype[np.void]], at: np.ndarray[Any, np.dtype[np.intp]]
) -> np.ndarray[Any, np.dtype[np.void]]:
    """``rows[at]`` for ascending ``at`` (``rows`` contiguous), as an array of its own: the whole
    array itself, a copied slice where ``at`` runs without gaps, else the rows gathered as
    plain bytes (indexing a structured array gathers field by field, 20 times slower)."""
    if len(at) == len(rows):
        return rows
    if len(at) and int(at[-1]) - int(at[0]) == len(at) - 1:
        return rows[int(at[0]) : int(at[-1]) + 1].copy()
    as_bytes = rows.view(np.uint8).reshape(len(rows), rows.dtype.itemsize)
    gathered: np.ndarray[Any, np.dtype[np.void]] = np.take(as_bytes, at, axis=0).view(rows.dtype).reshape(-1)
    return gathered


def _launch_keys(rows: np.ndarray[Any, np.dtype[np.void]]) -> np.ndarray[Any, np.dtype[np.int64]]:
    """One int64 per row (event, chunk or loss) naming its launch: module (16 bits), kernel (8),
    launch number (32)."""
    keys: np.ndarray[Any, np.dtype[np.int64]] = (
        rows["module"].astype(np.int64) << 40 | rows["kernel"].astype(np.int64) << 32 | rows["launch"]
    )
    return keys


def _quiet_words(kernels: KernelTimeline | ProcessKernels, agent_now_ns: int | None) -> str:
    """The header's words for the launches with a warp quiet past the threshold at agent time
    ``agent_now_ns`` and the longest such quiet: ``, 1 launch with a warp quiet 12.4 s``; empty
    without a time or without such a launch."""
    if agent_now_ns is None:
        return ""
    quiet = kernels.quiet(agent_now_ns)
    if not quiet:
        return ""
    longest = max(kernels.quiet_ns(launch, agent_now_ns) for launch in quiet)
    return f", {len(quiet)} launch{'es' if len(quiet) > 1 else ''} with a warp quiet {duration(longest)}"


def _ring_words(tracing: KernelTracing | None) -> str:
    """Where a process's ring is, in the title's words."""
    if tracing is None:
        return "recorded launches"
    return f"ring on {tracing.device}" if tracing.device else f"no ring ({tracing.reason or 'no device'})"


def process_label(process: ProcessNode | None) -> str:
    """A process as the kernel views name it: ``pid 123 (rank 3)``, the rank when it is known."""
    if process is None:
        return ""
    rank = f" (rank {process.rank})" if process.rank is not None else ""
    return f"{process.name}{rank}"


class ProcessKernels:
    """The kernel timelines of a session's processes, one per process that sent kernel messages,
    seen as one by the kernels screen. With one process it says exactly what its timeline says;
    with several, each launch, summary and ring is named by its process."""

    def __init__(self, first: KernelTimeline) -> None:
        """``first``: the timeline of the session's first process (or of a recording's sample)."""
        self.first = first
        self.timelines: dict[ProcessNode | None, KernelTimeline] = {first.process: first}
        """Each process's timeline, in the order they first sent kernel messages (the first process first)."""

    def of(self, process: ProcessNode) -> KernelTimeline:
        """The timeline of ``process``, made on its first kernel message with the first one's settings."""
        found = self.timelines.get(process)
        if found is None:
            first = self.first
            found = KernelTimeline(
                first.max_events, stuck_after_ns=first.stuck_after_ns, process=process, orders=first.launch_orders
            )
            found.pool = first.pool
            first.pool.append(found)
            self.timelines[process] = found
        return found

    @property
    def several(self) -> bool:
        """Whether more than one process traces kernels or ran traced launches."""
        return sum(1 for timeline in self.timelines.values() if timeline.tracing or timeline.launches) > 1

    def _shown(self) -> list[KernelTimeline]:
        """The timelines with something to show, the first one always."""
        return [t for t in self.timelines.values() if t is self.first or t.tracing is not None or t.launches]

    @property
    def version(self) -> int:
        """Changes whenever any timeline changed (each one's version only grows)."""
        return sum(timeline.version for timeline in self.timelines.values()) + len(self.timelines)

    @property
    def has_ring(self) -> bool:
        return any(timeline.has_ring for timeline in self.timelines.values())

    def timeline_of(self, launch: Launch) -> KernelTimeline:
        return self.timelines.get(launch.process, self.first)

    def newest_first(self) -> list[Launch]:
        """Every process's launches, the newest first."""
        if len(self.timelines) == 1:
            return self.first.newest_first()
        launches = [launch for timeline in self.timelines.values() for launch in timeline.launches.values()]
        return sorted(launches, key=lambda launch: launch.order, reverse=True)

    def who(self, launch: Launch) -> str:
        """The process a launch ran in, where several trace kernels; else empty."""
        return process_label(launch.process) if self.several else ""

    def running_past(self, launch: Launch, agent_now_ns: int) -> bool:
        return self.timeline_of(launch).running_past(launch, agent_now_ns)

    def quiet_ns(self, launch: Launch, agent_now_ns: int) -> int:
        return self.timeline_of(launch).quiet_ns(launch, agent_now_ns)

    def running_ns(self, launch: Launch, agent_now_ns: int) -> int:
        return self.timeline_of(launch).running_ns(launch, agent_now_ns)

    def unfinished(self, launch: Launch, agent_now_ns: int, *, limit: int = 200) -> Unfinished:
        """As :meth:`KernelTimeline.unfinished`, its summary naming the process where several trace kernels."""
        found = self.timeline_of(launch).unfinished(launch, agent_now_ns, limit=limit)
        who = self.who(launch)
        return dataclasses.replace(found, who=who) if who else found

    def quiet(self, agent_now_ns: int) -> list[Launch]:
        """Every process's launches running past the threshold, oldest first."""
        quiet = [launch for timeline in self.timelines.values() for launch in timeline.quiet(agent_now_ns)]
        return sorted(quiet, key=lambda launch: launch.order)

    def latest_batch_t_ns(self) -> int:
        """The agent time of the newest records of any ring."""
        return max(
            (clock.batch_t_ns for timeline in self.timelines.values() for clock in timeline.clocks.values()),
            default=0,
        )

    def title(self, *, following: bool, quiet: int = 0) -> str:
        """The kernels screen's title line; with several processes tracing kernels, which ones
        do, each with its ring, and the launches, events and losses of each."""
        if not self.several:
            shown = [t for t in self.timelines.values() if t.tracing is not None or t.launches]
            return (shown[0] if shown else self.first).title(following=following, quiet=quiet)
        timelines = [t for t in self._shown() if t.tracing is not None or t.launches]
        rings = [_ring_words(timeline.tracing) for timeline in timelines]
        shared = len(set(rings)) == 1
        parts = []
        for timeline, ring in zip(timelines, rings, strict=True):
            count = len(timeline.launches)
            part = f"{process_label(timeline.process)}{'' if shared else ' ' + ring}: "
            part += f"{count} launch{'' if count == 1 else 'es'}{timeline.incomplete_words()}"
            part += f", {timeline.events_read:,} events"
            lost = timeline.events_lost + timeline.events_missed
            parts.append(part + (f", {lost:,} lost" if lost else ""))
        head = f"kernels of {len(timelines)} processes" + (f", each with its {rings[0]}" if shared else "")
        lost = sum(t.events_lost + t.events_missed for t in timelines)
        text = " · ".join([head, *parts, f"{lost:,} lost"])
        waiting = sum(t.waiting_events for t in timelines)
        if waiting:
            text += f" · {waiting:,} events waiting for their module's event table"
        evicted = sum(t.evicted_launches for t in timelines)
        if evicted:
            text += f" · {evicted} older launches summarised (events kept at most {self.first.max_events:,})"
        if quiet:
            text += f" · {quiet} running with a warp quiet for over {duration(self.first.stuck_after_ns)}"
        return text + ("  follow" if following else "")

    def headline(self, agent_now_ns: int | None = None) -> str:
        """The header's phrase: the first process's, or with several tracing, the sums over them."""
        if not self.several:
            return self.first.headline(agent_now_ns)
        timelines = [t for t in self.timelines.values() if t.tracing is not None or t.launches]
        read = sum(t.events_read for t in timelines)
        lost = sum(t.events_lost + t.events_missed for t in timelines)
        torn = sum(t.torn for t in timelines)
        text = f"kernels of {len(timelines)} processes: {read:,} ev"
        if lost or torn:
            text += f", {lost:,} lost"
        if torn:
            text += f" ({torn:,} torn)"
        return text + _quiet_words(self, agent_now_ns)
