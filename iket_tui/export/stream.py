"""What every export written while a recording is read shares: the session the recording's
chunks are applied to, each compile handed over once it ended and then forgotten, the kernel
events kept on disk rather than in the model until the launches are written, and a temporary
file that holds written bytes in keyed runs, to be copied out later in another order.

Memory then stays bounded by the compiles open at once and the kernel events of launches still
running, whatever the size of the recording.
"""

from __future__ import annotations

import itertools
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, Final

import numpy as np

from iket_tui.export.common import STREAM_END, ExportError, launches_of
from iket_tui.model.kernels import KernelTimeline
from iket_tui.model.launches import Launch
from iket_tui.model.nodes import CompileNode
from iket_tui.model.pass_bound import UNBOUNDED_PASSES
from iket_tui.model.session import Session
from iket_tui.ring.layout import EVENT_DTYPE

COPY_CHUNK: Final = 1 << 20
"""Bytes read back from a spool at a time."""
UNBOUNDED: Final = sys.maxsize
"""The export's session keeps every kernel event it is given: a launch holds its events only
until they go to disk, and a launch summarised to stay within a bound would lose them."""
LAUNCH_KEPT_MAX: Final = 1 << 16
"""Events a running launch keeps in the model before they go to the spool (2 MiB decoded)."""


class SpoolError(ExportError):
    """The temporary file an export keeps its events in could not be written or read back (the
    temporary directory is full, or gone): the message names that directory, not the output."""


class Spool:
    """A temporary file written in runs, each under a key; :meth:`copy` writes one key's runs
    out again in the order they were added. The file is created at the first run and removed
    when closed (or when the process ends). It is unbuffered, so that a write that fails does
    so in :meth:`add`, never later; a failure is a :class:`SpoolError`."""

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._size = 0
        self._runs: dict[object, list[tuple[int, int]]] = {}

    def add(self, key: object, data: bytes) -> None:
        """Keep ``data`` as the next run of ``key``."""
        if not data:
            return
        try:
            if self._file is None:
                self._file = tempfile.TemporaryFile(prefix="iket-export-", buffering=0)  # noqa: SIM115 (lives until close())
            self._file.seek(self._size)
            view = memoryview(data)
            while view:
                view = view[self._file.write(view) or 0 :]
        except OSError as exc:
            raise _spool_error(exc) from None
        self._runs.setdefault(key, []).append((self._size, len(data)))
        self._size += len(data)

    def has(self, key: object) -> bool:
        return key in self._runs

    def runs(self, key: object, piece_size: int = COPY_CHUNK) -> Iterator[bytes]:
        """The runs of ``key``, in the order they were added, in pieces of at most ``piece_size``
        bytes (a run of whole records read in pieces of a multiple of their size stays in whole
        records)."""
        file = self._file
        if file is None:
            return
        for at, size in _joined(self._runs.get(key, [])):
            while size > 0:
                try:
                    file.seek(at)
                    piece = file.read(min(size, piece_size))
                except OSError as exc:
                    raise _spool_error(exc) from None
                if not piece:
                    raise SpoolError(f"temporary file in {tempfile.gettempdir()} cut short: {size} bytes missing")
                at += len(piece)
                size -= len(piece)
                yield piece

    def read(self, key: object) -> bytes:
        """Every run of ``key`` as one piece."""
        return b"".join(self.runs(key))

    def copy(self, key: object, write: Callable[[bytes], object]) -> None:
        for piece in self.runs(key):
            write(piece)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._runs.clear()


def _spool_error(exc: OSError) -> SpoolError:
    """The one line for a temporary file that failed: where it lives, and how to choose another
    place."""
    try:
        where = f"temporary file in {tempfile.gettempdir()}"
    except OSError:  # no usable temporary directory at all
        where = "temporary file"
    return SpoolError(f"{where}: {exc.strerror or exc}; TMPDIR names another directory")


def _joined(runs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Runs that follow each other in the file, as one."""
    out: list[tuple[int, int]] = []
    for at, size in runs:
        if out and out[-1][0] + out[-1][1] == at:
            out[-1] = (out[-1][0], out[-1][1] + size)
        else:
            out.append((at, size))
    return out


def forget(comp: CompileNode) -> None:
    """Let go of a written compile's passes and codegen steps (its summary stays): a pass links
    to its parent and its context, which link back, so those links are broken here and the
    passes go at once, not at the cycle collector's next full sweep."""
    for ctx in comp.context_order:
        for node in ctx.passes.values():
            node.parent = None
        ctx.passes.clear()
        ctx.roots.clear()
    comp.contexts.clear()
    comp.context_order.clear()
    comp.codegen_steps.clear()
    comp.incomplete.clear()
    comp.failing = None
    comp.failure = None
    comp.forgotten = True  # what comes of it later is counted, not kept (a recording that lies)


class LaunchSpool:
    """The decoded kernel events of a session kept in a :class:`Spool` instead of in its launches:
    a launch's events go there once none of its warps is running (records that come later, of
    warps that had not begun, join them) or once it holds :data:`LAUNCH_KEPT_MAX` of them.
    :meth:`events` gives a launch's events back whole, in arrival order, as
    :meth:`~iket_tui.model.launches.Launch.events` would have. For an export that shows no
    kernel event (``keep=False``) every event is let go as it comes, and none is kept."""

    def __init__(self, session: Session, *, keep: bool = True) -> None:
        self._session = session
        self._keep = keep
        self._spool = Spool()
        self._holding: dict[KernelTimeline, list[Launch]] = {}  # launches left holding events, per timeline
        self._known: dict[KernelTimeline, int] = {}  # launches of each timeline looked at so far

    def take(self) -> None:
        """Move the events of every launch that is done (or holds many) into the spool. Only the
        launches left holding events and those new since are looked at, unless the timeline
        holds more events than those have (records of an older launch came again)."""
        for timeline in self._session.kernel_processes.timelines.values():
            if not timeline.retained:
                continue
            launches = timeline.launches
            known = self._known.get(timeline, 0)
            looked = self._holding.get(timeline, [])
            if len(launches) > known:
                looked = looked + list(itertools.islice(launches.values(), known, None))
            if sum(len(part) for launch in looked for part in launch.parts) < timeline.retained:
                looked = list(launches.values())
            self._known[timeline] = len(launches)
            holding: list[Launch] = []
            for launch in looked:
                if not launch.parts:
                    continue
                kept = sum(len(part) for part in launch.parts)
                if self._keep and launch.running and kept < LAUNCH_KEPT_MAX:
                    holding.append(launch)
                    continue
                parts = timeline.release(launch)
                if self._keep:
                    for part in parts:
                        self._spool.add(launch.order, part.tobytes())
            self._holding[timeline] = holding

    def events(self, launch: Launch) -> np.ndarray[Any, np.dtype[np.void]]:
        """Every event of ``launch``: those spooled, then those it still holds. It is read
        whole (its ranges are paired over all its warps at once), so the largest launch sets
        the export's peak memory."""
        spooled = np.frombuffer(self._spool.read(launch.order), dtype=EVENT_DTYPE)
        return np.concatenate([spooled, launch.events()]) if launch.parts else spooled.copy()

    def close(self) -> None:
        self._spool.close()


def grid_of(events: np.ndarray[Any, np.dtype[np.void]]) -> tuple[int, int, int]:
    """The grid shape ``events`` show: highest block index plus one, per dimension (as
    :meth:`~iket_tui.model.launches.Launch.grid`)."""
    if not len(events):
        return (0, 0, 0)
    return (int(events["block_x"].max()) + 1, int(events["block_y"].max()) + 1, int(events["block_z"].max()) + 1)


def lanes_of(events: np.ndarray[Any, np.dtype[np.void]]) -> int:
    """Blocks times the widest block's warps: the (block, warp) threads a launch's pairing numbers
    (``len(spans.blocks) * spans.max_warps``), without pairing it."""
    if not len(events):
        return 0
    keys = events["block_z"].astype(np.int64) << 48 | events["block_y"].astype(np.int64) << 32 | events["block_x"]
    return len(np.unique(keys)) * (int(events["warp"].max()) + 1)


class CompileStream:
    """A recording's messages applied chunk by chunk (:meth:`feed`): each compile is handed to
    :meth:`_ended` once it ended, and every launch's events move to a :class:`LaunchSpool` when
    it is done (``keep_kernels``; otherwise they are let go). :meth:`_close` ends the stream and
    hands over the compiles still open."""

    def __init__(self, *, keep_kernels: bool = True) -> None:
        self.session = Session(max_kernel_events=UNBOUNDED, max_passes=UNBOUNDED_PASSES)
        self.kernel_events = LaunchSpool(self.session, keep=keep_kernels)
        self._spools: list[Spool] = []  # the format's own temporary files, removed at finish
        self._seen = 0  # compiles of the tree looked at so far
        self._open: dict[CompileNode, None] = {}  # compiles not yet handed over, oldest first

    def feed(self, messages: Iterable[Any]) -> None:
        """Apply a chunk of the recording's messages and hand over every compile that ended in it."""
        session = self.session
        session.apply(messages)
        tree = session.tree
        compiles = tree.compiles
        for comp in compiles[self._seen :]:
            self._open[comp] = None
        self._seen = len(compiles)
        ended = [comp for comp in self._open if comp.end_ns is not None]
        if ended:
            for comp in ended:
                del self._open[comp]
                self._ended(comp)
            tree.forget_passes()  # every pass ever seen, in tree order: no export needs it
        self.kernel_events.take()

    def spool(self) -> Spool:
        """A temporary file for the format's own runs, removed by :meth:`finish`."""
        spool = Spool()
        self._spools.append(spool)
        return spool

    def finish(self) -> int:
        """Write the rest of the file; the number of events it holds. The temporary files go
        however it ends (a recording refused, a full disk)."""
        try:
            return self._finish()
        finally:
            for spool in self._spools:
                spool.close()
            self.kernel_events.close()

    def _finish(self) -> int:
        raise NotImplementedError

    def _close(self) -> list[Launch]:
        """End the stream: the compiles still open are handed over (as incomplete, to the last
        time seen); every launch, in the order they first appeared."""
        self.session.end_stream(STREAM_END)
        for comp in list(self._open):
            del self._open[comp]
            self._ended(comp)
        return launches_of(self.session)

    def _ended(self, comp: CompileNode) -> None:
        raise NotImplementedError
