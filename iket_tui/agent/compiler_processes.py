"""The processes a compile's codegen step runs (nvcc, and below it cicc, ptxas, the host
compiler), watched from ``/proc`` while the step runs and told as ``compile_process`` events.

A compile that hangs in its compiler is not in Python nor in TVM: it waits on a child process
(a ``ptxas`` spinning at 100% CPU). The compiler's thread notes when a codegen step begins and
ends, nothing more; a small daemon thread of the agent looks, every :data:`POLL_S` and only
while a step is open, at the children that thread started (``/proc/PID/task/TID/children``:
the kernel keeps each thread's children apart, so the compiles of a thread pool are told
apart) and at theirs, and reads each one's command line, CPU time and start. Each process is
told when it is first seen, again while it runs when its CPU time grew (at most every
:func:`update_every_ns`, which grows with its age, so that an hour-long hang does not fill the
backlog), and when it ends. Processes that come and go between two looks are not seen.

Bounded: at most :data:`MAX_PER_STEP` processes per step, :data:`MAX_DEPTH` generations
below the compiler's thread, and a command line of at most :data:`MAX_ARGS` arguments of
:data:`MAX_ARG_CHARS` characters. The events go through the registry like every other, into
each client's bounded queue (dropped and counted when full). Nothing here raises into the
compiler.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from iket_tui.protocol import messages as m
from iket_tui.protocol.messages import Message

POLL_S: Final = 0.5
"""How often the open codegen steps' processes are looked at."""
MAX_PER_STEP: Final = 64
"""Processes followed per codegen step; those beyond are not told."""
MAX_DEPTH: Final = 8
"""Generations of processes followed below the compiler's thread."""
MAX_ARGS: Final = 64
"""Arguments of a command line kept; the rest are said as a count."""
MAX_ARG_CHARS: Final = 512
"""Characters of one argument kept (cut in the middle beyond)."""
_TICK_NS: Final = 1_000_000_000 // (os.sysconf("SC_CLK_TCK") or 100)


def update_every_ns(running_ns: int) -> int:
    """How long a running process's next event waits after its last one: a tenth of its age,
    from 1 s up to 10 s."""
    return min(10_000_000_000, max(1_000_000_000, running_ns // 10))


@dataclass
class _Stat:
    """What ``/proc/PID/stat`` says of a process."""

    ppid: int
    name: str
    zombie: bool
    cpu_ns: int
    start_ticks: int
    exit: int | None


@dataclass
class _Process:
    """One process of a codegen step, as last told."""

    pid: int
    ppid: int
    name: str
    argv: list[str]
    start_ticks: int
    start_ns: int
    cpu_ns: int
    told_ns: int
    told_cpu_ns: int
    ended: bool = False


@dataclass
class CodegenWatch:
    """One open codegen step of a compile, and the processes seen below its thread."""

    compile_id: int
    step: str | None
    thread: int
    """The compiler's thread, as the kernel numbers it (``threading.get_native_id``)."""
    processes: dict[int, _Process] = field(default_factory=dict)
    open: bool = True


class CompilerProcesses:
    """The processes of every open codegen step of this process; ``emit`` tells each event."""

    def __init__(self, emit: Callable[[Message], None]) -> None:
        self._emit = emit
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._open: list[CodegenWatch] = []
        self._thread: threading.Thread | None = None

    def watch(self, compile_id: int, step: str | None) -> CodegenWatch:
        """A codegen step of ``compile_id`` begins on this thread: watch what it runs until :meth:`done`."""
        watch = CodegenWatch(compile_id, step, threading.get_native_id())
        with self._lock:
            self._open.append(watch)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="iket-tui compiler processes", daemon=True)
                self._thread.start()
            self._changed.notify_all()
        return watch

    def done(self, watch: CodegenWatch) -> None:
        """The step ended: each of its processes is told once more, ended (or, one still
        running, left), before the step's end is."""
        with self._lock:
            if not watch.open:
                return
            watch.open = False
            self._open = [other for other in self._open if other is not watch]
            now = time.monotonic_ns()
            for process in watch.processes.values():
                if process.ended:
                    continue
                stat = _stat(process.pid)
                alive = stat is not None and not stat.zombie and stat.start_ticks == process.start_ticks
                self._tell(watch, process, stat, now, m.COMPILER_RUNNING if alive else m.COMPILER_ENDED, final=True)

    def running(self) -> list[dict[str, Any]]:
        """Every process of an open codegen step that runs now, with its CPU time read now
        (the ``processes`` of a ``stacks`` answer)."""
        with self._lock:
            found = [(watch, process) for watch in self._open for process in watch.processes.values()]
        now = time.monotonic_ns()
        out = []
        for watch, process in found:
            stat = _stat(process.pid)
            if process.ended or stat is None or stat.zombie or stat.start_ticks != process.start_ticks:
                continue
            out.append(
                {
                    "compile": watch.compile_id,
                    "step": watch.step,
                    "pid": process.pid,
                    "ppid": process.ppid,
                    "name": process.name,
                    "argv": process.argv,
                    "cpu_ns": stat.cpu_ns,
                    "running_ns": max(0, now - process.start_ns),
                }
            )
        return out

    def pids_of(self, compile_id: int) -> list[int]:
        """The processes the open codegen steps of ``compile_id`` run now, as last seen, oldest first."""
        with self._lock:
            return [
                process.pid
                for watch in self._open
                if watch.compile_id == compile_id
                for process in watch.processes.values()
                if not process.ended
            ]

    def forget(self) -> None:
        """Nothing is watched (in a child made by ``fork``: the parent's steps are not its own,
        and the watching thread did not survive)."""
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._open = []
        self._thread = None

    # The watching thread

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._open:
                    self._changed.wait()
            time.sleep(POLL_S)  # a step's first look comes after a while: nothing runs at its very start
            with self._lock:
                watches = list(self._open)
            for watch in watches:
                try:
                    self._look(watch)
                except Exception:  # a /proc that reads oddly: the next look tries again
                    continue

    def _look(self, watch: CodegenWatch) -> None:
        """Read the step's processes now and tell what changed."""
        with self._lock:
            known = {pid: process.start_ticks for pid, process in watch.processes.items() if not process.ended}
        found = _descendants(os.getpid(), watch.thread, room=MAX_PER_STEP)
        for pid in known.keys() - found.keys():  # gone, or moved away from under its parent (an orphan)
            stat = _stat(pid)
            if stat is not None and stat.start_ticks == known[pid]:
                found[pid] = (stat, None)
        now = time.monotonic_ns()
        offset = _boot_offset_ns()
        with self._lock:
            if not watch.open:
                return  # the step ended meanwhile: :meth:`done` told the rest
            for pid, (stat, argv) in found.items():
                process = watch.processes.get(pid)
                if process is not None and process.start_ticks != stat.start_ticks:
                    process = None  # the pid was used again
                if process is None:
                    if len(watch.processes) >= MAX_PER_STEP or stat.zombie:
                        continue
                    process = _Process(
                        pid=pid,
                        ppid=stat.ppid,
                        name=stat.name,
                        argv=argv if argv is not None else _argv(pid, stat.name),
                        start_ticks=stat.start_ticks,
                        start_ns=_start_ns(stat.start_ticks, now, offset),
                        cpu_ns=stat.cpu_ns,
                        told_ns=0,
                        told_cpu_ns=-1,
                    )
                    watch.processes[pid] = process
                    self._tell(watch, process, stat, now, m.COMPILER_RUNNING)
                elif process.ended:
                    continue
                elif stat.zombie:
                    self._tell(watch, process, stat, now, m.COMPILER_ENDED)
                elif stat.name != process.name:  # it ran another program (exec) since
                    process.name, process.argv = stat.name, _argv(pid, stat.name)
                    self._tell(watch, process, stat, now, m.COMPILER_RUNNING)
                elif stat.cpu_ns != process.told_cpu_ns and now - process.told_ns >= update_every_ns(
                    now - process.start_ns
                ):
                    self._tell(watch, process, stat, now, m.COMPILER_RUNNING)
            for process in watch.processes.values():
                if not process.ended and process.pid not in found:
                    self._tell(watch, process, None, now, m.COMPILER_ENDED)

    def _tell(
        self,
        watch: CodegenWatch,
        process: _Process,
        stat: _Stat | None,
        now: int,
        state: str,
        *,
        final: bool = False,
    ) -> None:
        """Emit the process's event (with the registry's lock taken inside: never the other way round)."""
        if stat is not None and stat.start_ticks == process.start_ticks:
            process.cpu_ns = stat.cpu_ns
        exit = stat.exit if stat is not None and stat.zombie else None
        if state == m.COMPILER_RUNNING and final:
            state = m.COMPILER_LEFT
        if state != m.COMPILER_RUNNING:
            process.ended = True
        process.told_ns = now
        process.told_cpu_ns = process.cpu_ns
        self._emit(
            m.compile_process(
                compile=watch.compile_id,
                step=watch.step,
                pid=process.pid,
                ppid=process.ppid,
                name=process.name,
                argv=process.argv,
                state=state,
                running_ns=max(0, now - process.start_ns),
                cpu_ns=process.cpu_ns,
                exit=exit,
                t_ns=now,
            )
        )


def _descendants(pid: int, thread: int, *, room: int) -> dict[int, tuple[_Stat, list[str] | None]]:
    """The processes below thread ``thread`` of process ``pid``, each with its stat (their
    command lines are read once, when first told); at most ``room``, generation by generation."""
    found: dict[int, tuple[_Stat, list[str] | None]] = {}
    generation = _children(f"/proc/{pid}/task/{thread}/children")
    for _depth in range(MAX_DEPTH):
        below: list[int] = []
        for child in generation:
            if child in found or len(found) >= room:
                continue
            stat = _stat(child)
            if stat is None:
                continue
            found[child] = (stat, None)
            below += _children_of(child)
        if not below:
            break
        generation = below
    return found


def _children_of(pid: int) -> list[int]:
    """The children of every thread of process ``pid``."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    out: list[int] = []
    for thread in threads:
        out += _children(f"/proc/{pid}/task/{thread}/children")
    return out


def _children(path: str) -> list[int]:
    try:
        with open(path, "rb") as file:
            return [int(word) for word in file.read().split()]
    except (OSError, ValueError):
        return []


def _stat(pid: int) -> _Stat | None:
    """``/proc/PID/stat``, or None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            text = file.read().decode("utf-8", "replace")
    except OSError:
        return None
    open_at, close_at = text.find("("), text.rfind(")")
    rest = text[close_at + 2 :].split()  # from field 3, the state, on
    if open_at < 0 or close_at < 0 or len(rest) < 20:
        return None
    status = int(rest[49]) if len(rest) > 49 else None  # field 52, the exit status (Linux 3.5 on)
    exit = None
    if status is not None:
        exit = (status >> 8) & 0xFF if status & 0x7F == 0 else -(status & 0x7F)
    return _Stat(
        ppid=int(rest[1]),
        name=text[open_at + 1 : close_at],
        zombie=rest[0] in ("Z", "X"),
        cpu_ns=(int(rest[11]) + int(rest[12])) * _TICK_NS,
        start_ticks=int(rest[19]),
        exit=exit,
    )


def _argv(pid: int, name: str) -> list[str]:
    """The command line of ``pid``, bounded (see :data:`MAX_ARGS`); ``[name]`` when it has none to read."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            raw = file.read(MAX_ARGS * MAX_ARG_CHARS * 4)
    except OSError:
        return [name]
    words = [word.decode("utf-8", "replace") for word in raw.split(b"\0")]
    if words and words[-1] == "":
        words.pop()
    if not words:
        return [name]
    kept = [_shortened(word) for word in words[:MAX_ARGS]]
    if len(words) > MAX_ARGS:
        kept[-1] = f"... {len(words) - MAX_ARGS + 1} more arguments"
    return kept


def _shortened(word: str) -> str:
    if len(word) <= MAX_ARG_CHARS:
        return word
    half = (MAX_ARG_CHARS - 5) // 2
    return f"{word[:half]} ... {word[-half:]}"


def _boot_offset_ns() -> int | None:
    """How far the boot clock (which ``/proc`` start times count on) is ahead of the agent's
    (``CLOCK_MONOTONIC``: it stops while the machine sleeps); None where it cannot be read."""
    try:
        return time.clock_gettime_ns(time.CLOCK_BOOTTIME) - time.monotonic_ns()
    except (AttributeError, OSError):
        return None


def _start_ns(start_ticks: int, now: int, offset_ns: int | None) -> int:
    """A process's start (clock ticks since boot) on the agent's clock, to the tick; ``now``
    where the boot clock cannot be read."""
    return now if offset_ns is None else min(now, start_ticks * _TICK_NS - offset_ns)
