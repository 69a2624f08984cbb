"""The child processes a thread of this process waits on, and the processes under them, and how an
abort ends them: SIGTERM to all, then SIGKILL to those still there after a short grace.

The processes a thread waits on are read from its Python frames: the ``subprocess.Popen`` whose
``communicate`` or ``wait`` it is in (TileLang runs nvcc so, and a program's own passes most
often do too). Those under them (nvcc's cicc, ptxas and host compiler) are found through
``/proc``, by parent, and told apart from a later process given the same pid by their start
time. Only these are ever signalled, never the program itself. Linux only: elsewhere a thread
waits on no process that can be named.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from types import FrameType
from typing import Any, Final

GRACE_S: Final = 2.0
"""How long the processes have to end after SIGTERM before they are killed."""
COMMAND_CHARS: Final = 200
"""A command line is cut to this many characters."""

_WAITS: Final = frozenset(
    method.__code__
    for method in (
        subprocess.Popen.communicate,
        subprocess.Popen._communicate,  # type: ignore[attr-defined]
        subprocess.Popen.wait,
        subprocess.Popen._wait,  # type: ignore[attr-defined]
        subprocess.Popen._try_wait,  # type: ignore[attr-defined]
    )
)
"""The code of the ``Popen`` methods that wait for the child."""


@dataclass(frozen=True)
class ChildProcess:
    """One process a thread waits on, or one under it."""

    pid: int
    ppid: int
    started: int
    """Its start time (clock ticks after boot): a later process given the same pid has another."""
    command: str
    """Its command line, cut to :data:`COMMAND_CHARS`."""
    name: str
    """The program it runs (``nvcc``, a script's own name rather than its interpreter's)."""

    def as_dict(self) -> dict[str, Any]:
        """``pid``, ``ppid``, ``name``, ``command``: as an abort answer names it."""
        return {"pid": self.pid, "ppid": self.ppid, "name": self.name, "command": self.command}


def waited_on(frame: FrameType | None) -> list[ChildProcess]:
    """The live processes a thread whose innermost frame is ``frame`` waits on, each followed by
    those under it; empty when it waits on none."""
    pids: list[int] = []
    while frame is not None:
        if frame.f_code in _WAITS:
            popen = frame.f_locals.get("self")
            if isinstance(popen, subprocess.Popen) and popen.returncode is None and popen.pid not in pids:
                pids.append(popen.pid)
        frame = frame.f_back
    return with_descendants(pids) if pids else []


def with_descendants(pids: list[int]) -> list[ChildProcess]:
    """The live processes of ``pids`` (children of this process), each followed by those under it."""
    table = _processes()
    under: dict[int, list[ChildProcess]] = {}
    for process in table.values():
        under.setdefault(process.ppid, []).append(process)
    found: list[ChildProcess] = []
    for pid in pids:
        root = table.get(pid)
        if root is None or root.ppid != os.getpid():
            continue
        pending = [root]
        while pending:
            process = pending.pop(0)
            if process not in found:
                found.append(process)
                pending.extend(sorted(under.get(process.pid, ()), key=lambda child: child.pid))
    return found


def end(processes: list[ChildProcess], grace_s: float = GRACE_S) -> list[tuple[ChildProcess, str]]:
    """End ``processes`` and any started under them meanwhile: SIGTERM, then SIGKILL to those still
    there after ``grace_s``. Each process signalled, with the last signal it was sent."""
    sent: dict[ChildProcess, str] = {}
    for process in processes:
        if _signal(process, signal.SIGTERM):
            sent[process] = "SIGTERM"
    deadline = time.monotonic() + grace_s
    while any(_alive(process) for process in sent) and time.monotonic() < deadline:
        time.sleep(0.02)
    left = [process for process in sent if _alive(process)]
    if left:
        for process in with_descendants([process.pid for process in processes if _alive(process)]) + left:
            if _signal(process, signal.SIGKILL):
                sent[process] = "SIGKILL"
        deadline = time.monotonic() + grace_s
        while any(_alive(process) for process in sent) and time.monotonic() < deadline:
            time.sleep(0.02)
    return list(sent.items())


def _signal(process: ChildProcess, signum: int) -> bool:
    """Send ``signum`` to ``process`` if it is still that process; whether it was sent."""
    if not _alive(process):
        return False
    try:
        os.kill(process.pid, signum)
    except OSError:
        return False
    return True


def _alive(process: ChildProcess) -> bool:
    """Whether ``process`` still runs (a zombie has ended; a reused pid is another process)."""
    now = _read(process.pid)
    return now is not None and now.started == process.started


def _processes() -> dict[int, ChildProcess]:
    """Every live process that ``/proc`` shows, by pid."""
    table: dict[int, ChildProcess] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if name.isdigit():
            process = _read(int(name))
            if process is not None:
                table[process.pid] = process
    return table


def _read(pid: int) -> ChildProcess | None:
    """Process ``pid`` as ``/proc`` shows it now; None when it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read().decode(errors="replace")
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            argv = file.read().split(b"\0")
    except OSError:
        return None
    comm, _, rest = stat.partition(" (")[2].rpartition(") ")
    fields = rest.split()
    if len(fields) < 20 or fields[0] in ("Z", "X", "x"):
        return None
    command = " ".join(arg.decode(errors="replace") for arg in argv if arg) or f"[{comm}]"
    if len(command) > COMMAND_CHARS:
        command = command[: COMMAND_CHARS - 3] + "..."
    return ChildProcess(pid=pid, ppid=int(fields[1]), started=int(fields[19]), command=command, name=comm)


def named(processes: list[ChildProcess]) -> str:
    """``nvcc (pid 4242), ptxas (pid 4250)``."""
    return ", ".join(f"{process.name} (pid {process.pid})" for process in processes)
