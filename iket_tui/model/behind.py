"""The same pass compared across processes: one rank still in a pass that the other ranks
finished long ago ("rank 3 has been in `tl.LayoutInference` 40 s; the other ranks finished it in
0.2 s").

In a session of several processes (a ``torchrun``'s ranks, a pool of workers compiling the same
kernels) a hang rarely shows in one process alone: what tells it is that the others got
through the same pass quickly. :func:`passes_behind` finds, among the stuck passes of a pass tree
(:meth:`~iket_tui.model.pass_tree.PassTree.is_stuck`), those that other processes finished, for
the UI; :class:`BehindInStream` finds the same in a stream of messages read once (``iket-tui
dump``), without keeping the tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median
from typing import Any

from iket_tui.durations import duration
from iket_tui.model.nodes import DONE, PassNode, ProcessNode
from iket_tui.model.pass_tree import STUCK_FACTOR, PassTree
from iket_tui.protocol import messages as m

_Key = tuple[str | None, int]
"""A process of the stream: its host (``None`` for this machine's) and pid."""
BEHIND_TYPE = "pass_behind"
"""The type of the line ``dump`` writes for a pass one process was far behind the others in."""
RUNS_KEPT = 32
"""Runs of one pass name kept per process to compare with (the first ones): a dump of millions of
passes keeps no more than this per name and process."""
MIN_BEHIND_NS = 1_000_000_000
"""In a stream read once, a pass counts as behind only when it took at least this long (and
:data:`~iket_tui.model.pass_tree.STUCK_FACTOR` times what the other processes took)."""


@dataclass(frozen=True)
class PassBehind:
    """One process far behind the others in a pass: how long it has been (or was) in it, and
    how long the others that finished it took (the median of their runs)."""

    who: str  # "rank 3", "pid 123"
    name: str
    spent_ns: int
    others_ns: int
    finished_by: int  # other processes that finished the pass
    others: int  # other processes in all
    ranks: bool  # the processes are ranks: say "ranks" rather than "processes"
    running: bool = True  # still in it (else it ended, that late)
    ended: str | None = None  # why its process's stream ended while it was in it (in it until then)

    @property
    def text(self) -> str:
        """The comparison in one sentence."""
        kind = "ranks" if self.ranks else "processes"
        if self.finished_by >= self.others:
            them = f"the other {kind}" if self.others > 1 else f"the other {'rank' if self.ranks else 'process'}"
        else:
            them = f"{self.finished_by} of the other {self.others} {kind}"
        been = "has been" if self.running else "was"
        spent, theirs = duration(self.spent_ns), duration(self.others_ns)
        until = " until its stream ended" if self.ended is not None else ""
        return f"{self.who} {been} in `{self.name}` {spent}{until}; {them} finished it in {theirs}"


def passes_behind(tree: PassTree, now_ns: int) -> list[PassBehind]:
    """The stuck passes that other processes of the session finished, oldest first; none in a
    session of one process."""
    if not tree.several:
        return []
    stuck = tree.stuck_passes(now_ns)
    if not stuck:
        return []
    processes = tree.processes
    ranks = tree.by_rank and all(process.rank is not None for process in processes if process.compiles)
    found: list[PassBehind] = []
    for node in stuck:
        mine = tree.process_of(node.compile)
        done = _finished_elsewhere(tree, node.name, mine)
        if not done:
            continue
        finished_by = len({id(process) for process, _ in done})
        others = sum(1 for process in processes if process is not mine and process.compiles)
        found.append(
            PassBehind(
                who=tree.process_label(mine),
                name=node.name,
                spent_ns=now_ns - node.start_ns,
                others_ns=int(median(ns for _, ns in done)),
                finished_by=finished_by,
                others=max(others, finished_by),
                ranks=ranks,
            )
        )
    return found


def _finished_elsewhere(tree: PassTree, name: str, mine: ProcessNode) -> list[tuple[ProcessNode, int]]:
    """Each finished run of the pass ``name`` in a process other than ``mine``, with its duration."""
    runs: list[tuple[ProcessNode, int]] = []
    for process in tree.processes:
        if process is mine:
            continue
        for comp in process.compiles:
            for ctx in comp.context_order:
                for node in ctx.passes.values():
                    if node.name == name and node.status is DONE and node.duration_ns is not None:
                        runs.append((process, node.duration_ns))
    return runs


class BehindInStream:
    """Follows the pass events of a stream of several processes (``process`` messages say whose
    events follow) and tells, at its end, which process was far behind the others in a pass: one
    still in it when the stream ended, one in it when its own stream ended (a ``process`` message
    with a ``state``: a rank killed mid-pass was in it until then, not to the end of the
    recording), or one that took :data:`STUCK_FACTOR` times as long as the others, and
    :data:`MIN_BEHIND_NS` at least. Keeps per process only its open passes, the passes its end
    cut, and the longest and the first :data:`RUNS_KEPT` runs of each pass name."""

    def __init__(self) -> None:
        self._process: _Key = (None, 0)  # whose messages come now ((None, 0) before any ``process`` message)
        self._first: int | None = None
        self._ranks: dict[_Key, int | None] = {}
        self._open: dict[tuple[_Key, int, int], tuple[str, int]] = {}  # (process, compile, seq) -> name, start
        self._cut: list[tuple[int, _Key, str, int, str]] = []  # start, process, name, time in it, why it ended
        self._runs: dict[str, dict[_Key, list[int]]] = {}  # name -> process -> its first durations
        self._longest: dict[tuple[str, _Key], int] = {}  # (name, process) -> its longest run
        self._compiling: set[_Key] = set()
        self.last_t_ns = 0

    def apply(self, msg: dict[str, Any]) -> None:
        """Take in one message of the stream (maps only; others are ignored)."""
        kind = msg.get("type")
        t = msg.get("t_ns")
        if type(t) is int and t > self.last_t_ns:
            self.last_t_ns = t
        if kind == m.PROCESS:
            pid, host = msg.get("pid"), msg.get("host")
            if type(pid) is int:
                self._process = (host if type(host) is str else None, pid)  # pids of two hosts may be the same
                state, reason = msg.get("state"), msg.get("reason")
                if state is not None:
                    at = t if type(t) is int else self.last_t_ns
                    self._ended(self._process, at, reason if type(reason) is str else str(state))
        elif kind == m.HELLO and msg.get("role", "agent") == "agent":
            pid, rank = msg.get("pid"), msg.get("rank")
            if type(pid) is int:
                if self._process == (None, 0):
                    self._process = (None, pid)  # the first process's messages come before any ``process`` message
                self._ranks[self._process] = rank if type(rank) is int else None
        elif kind == m.PASS_START:
            compile_id, seq, name = msg.get("compile"), msg.get("seq"), msg.get("name")
            if type(compile_id) is int and type(seq) is int and type(name) is str and type(t) is int:
                self._open[(self._process, compile_id, seq)] = (name, t)
                self._compiling.add(self._process)
        elif kind in (m.PASS_END, m.PASS_INCOMPLETE):
            compile_id, seq = msg.get("compile"), msg.get("seq")
            if type(compile_id) is not int or type(seq) is not int:
                return
            opened = self._open.pop((self._process, compile_id, seq), None)
            if kind == m.PASS_END and opened is not None and type(t) is int:
                name, spent = opened[0], t - opened[1]
                runs = self._runs.setdefault(name, {}).setdefault(self._process, [])
                if len(runs) < RUNS_KEPT:
                    runs.append(spent)
                key = (name, self._process)
                if spent > self._longest.get(key, -1):
                    self._longest[key] = spent

    def _ended(self, process: _Key, t: int, reason: str) -> None:
        """Process ``process``'s stream ended at ``t`` (the message's own time, else the latest time
        seen, as the live tree takes it): the passes it was in end there, never finished, and the
        process is compared with the others for the time it was in them until then."""
        for key in [key for key in self._open if key[0] == process]:
            name, start = self._open.pop(key)
            self._cut.append((start, process, name, max(0, t - start), reason))

    def at_end(self) -> list[dict[str, Any]]:
        """One ``pass_behind`` map per pass a process was far behind the others in, with the
        sentence the UI shows (``summary``)."""
        found: list[PassBehind] = []
        for (process, _compile, _seq), (name, start) in sorted(self._open.items(), key=lambda item: item[1][1]):
            behind = self._behind(process, name, self.last_t_ns - start, running=True)
            if behind is not None:
                found.append(behind)
        for _start, process, name, spent, reason in sorted(self._cut, key=lambda item: item[0]):
            behind = self._behind(process, name, spent, running=False, ended=reason)
            if behind is not None:
                found.append(behind)
        for (name, process), longest in self._longest.items():
            behind = self._behind(process, name, longest, running=False)
            if behind is not None:
                found.append(behind)
        return [
            {
                "type": BEHIND_TYPE,
                "t_ns": self.last_t_ns,
                "process": behind.who,
                "name": behind.name,
                "spent_ns": behind.spent_ns,
                "others_ns": behind.others_ns,
                "running": behind.running,
                "ended": behind.ended,
                "summary": behind.text,
            }
            for behind in found
        ]

    def _behind(
        self, process: _Key, name: str, spent: int, *, running: bool, ended: str | None = None
    ) -> PassBehind | None:
        others = {other: runs for other, runs in self._runs.get(name, {}).items() if other != process}
        if not others:
            return None
        typical = int(median(ns for runs in others.values() for ns in runs))
        if spent < MIN_BEHIND_NS or spent <= STUCK_FACTOR * typical:
            return None
        everyone = len(self._compiling - {process})
        ranks = all(self._ranks.get(other) is not None for other in self._compiling)
        rank = self._ranks.get(process)
        host, pid = process
        where = f"{host}/" if host is not None else ""
        return PassBehind(
            who=f"{where}rank {rank}" if rank is not None else f"{where}pid {pid}",
            name=name,
            spent_ns=spent,
            others_ns=typical,
            finished_by=len(others),
            others=max(everyone, len(others)),
            ranks=ranks,
            running=running,
            ended=ended,
        )


def node_behind(tree: PassTree, node: PassNode, now_ns: int) -> PassBehind | None:
    """:func:`passes_behind` for one pass: how far behind the other processes it is, if it is."""
    who = tree.process_label(tree.process_of(node.compile))
    return next((found for found in passes_behind(tree, now_ns) if (found.who, found.name) == (who, node.name)), None)
