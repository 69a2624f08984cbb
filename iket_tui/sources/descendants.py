"""Which agents serve the descendants of a process: the parent-pid chain, read from ``/proc``.

``iket-tui run`` follows the processes its program starts (multiprocessing workers, a
``torchrun``'s ranks, a ``subprocess`` running Python): each starts its own agent, and the
agents whose process descends from the program are found in this user's runtime directory
by walking each one's parent-pid chain up to the program.
"""

from __future__ import annotations

from pathlib import Path

from iket_tui.endpoints import AgentEndpoint, list_endpoints

MAX_DEPTH = 64
"""Parent links followed at most: deeper than any real process tree, and a guard against a loop."""


def parent_pid(pid: int) -> int | None:
    """The parent of ``pid`` now, or ``None`` if there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = raw[raw.rfind(b")") + 2 :].split()
    return int(fields[1])


def ancestors(pid: int) -> list[int]:
    """The processes above ``pid``, its parent first, up to the first process (pid 1)."""
    chain: list[int] = []
    up = parent_pid(pid)
    while up is not None and up > 0 and len(chain) < MAX_DEPTH:
        chain.append(up)
        if up == 1:
            break
        up = parent_pid(up)
    return chain


def descends_from(pid: int, ancestor: int) -> bool:
    """Whether ``ancestor`` is above ``pid`` in the process tree now."""
    return ancestor in ancestors(pid)


def agents_below(root: int) -> list[AgentEndpoint]:
    """Agent sockets of this user whose live process descends from ``root``, oldest pid first.
    Found by their names alone, without connecting: a socket that nothing listens on is only
    found out by connecting to it."""
    return [found for found in list_endpoints() if descends_from(found.pid, root)]
