"""The agent that a command's TARGET names: a pid or a socket path here, or HOST:PID through ssh;
and a job across machines (``node1: node2:``, ``node[1-8]:``, ``@hosts.txt``), one ssh connection
per host."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from iket_tui.cli.errors import UsageError, say
from iket_tui.endpoints import EndpointError, NoAgentError, resolve_target
from iket_tui.sources.base import HostState, SourceError
from iket_tui.sources.host_link import HostAgentSource, HostLink
from iket_tui.sources.merged import FramesTo, ProcessStreams
from iket_tui.sources.socket import SocketSource
from iket_tui.sources.ssh import SshSource, remote_target


def target_source(
    target: str, *, start_agent: bool, before_start: Callable[[], None] | None = None, **options: Any
) -> SocketSource:
    """The source of a TARGET: a local agent's socket (see :func:`target_socket`), or for
    ``HOST:PID`` the agent of PID on HOST through ssh; ``options`` are the source's."""
    remote = remote_target(target)
    if remote is None:
        return SocketSource(target_socket(target, start_agent=start_agent, before_start=before_start), **options)
    if remote.pid is None:
        raise UsageError(
            f"{target}: name a pid there (HOST:PID; `iket-tui ls {remote.host}` lists them); attach takes HOST: for all"
        )
    return SshSource(remote, **options)


def target_socket(target: str, *, start_agent: bool, before_start: Callable[[], None] | None = None) -> Path:
    """The socket of a pid or socket path; with ``start_agent`` a Python process without the
    agent gets one started in it, once ``before_start`` (a last check that may refuse) passed:
    after the checks that it can be, before the process is touched."""
    from iket_tui.sources.inject import check_python, inject_agent

    try:
        return resolve_target(target)
    except NoAgentError as exc:
        if not start_agent:
            check_python(int(target))  # no advice to start an agent where none can be: said as attach says it
            raise EndpointError(f"{exc}; `iket-tui attach {target}` or --start-agent starts one in it") from None

    def on_start() -> None:  # the process is known to be Python, and not touched yet
        if before_start is not None:
            before_start()
        say(f"process {target} runs no iket-tui agent: starting one in it ...")

    return inject_agent(int(target), on_start=on_start)


MAX_HOSTS: Final = 4096
"""The most hosts one attach watches: a range past it is a typing slip."""
_RANGE = re.compile(r"\[([^\[\]]*)\]")


def expand_hosts(text: str) -> list[str]:
    """The hosts ``text`` names: itself, or for a ``[...]`` part (``node[1-8]``, ``node[01-08]``
    zero-padded, ``node[1,3,5]``, ``node[1-3,7]``) one host per number, in order. Raises
    :class:`UsageError` for a range that cannot be read."""
    found = _RANGE.search(text)
    if found is None:
        if "[" in text or "]" in text:
            raise UsageError(f"{text}: an unclosed host range (write node[1-8] or node[1,3,5])")
        return [text]
    numbers: list[str] = []
    for part in found.group(1).split(","):
        first, dash, last = part.strip().partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            raise UsageError(f"{text}: {part.strip() or 'an empty part'} is not a number or a range like 1-8")
        if not dash:
            numbers.append(first)
            continue
        low, high = int(first), int(last)
        if high < low:
            raise UsageError(f"{text}: the range {part.strip()} runs backwards")
        if high - low >= MAX_HOSTS:
            raise UsageError(f"{text}: the range {part.strip()} names more than {MAX_HOSTS} hosts")
        width = len(first) if first.startswith("0") and len(first) > 1 else 0
        numbers.extend(str(n).zfill(width) for n in range(low, high + 1))
    head, tail = text[: found.start()], text[found.end() :]
    hosts = [host for number in numbers for host in expand_hosts(head + number + tail)]
    if len(hosts) > MAX_HOSTS:
        raise UsageError(f"{text}: names more than {MAX_HOSTS} hosts")
    return hosts


def hosts_file(path: Path) -> list[str]:
    """The hosts a file names, one a line (``node3``, ``node3:``, ``node[1-8]``); blank lines and
    ``#`` comments skipped. Raises :class:`UsageError` when it cannot be read or names none."""
    try:
        text = path.read_bytes().decode()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the host list ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not a host list (byte {exc.start} is not UTF-8 text)") from None
    hosts: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        word = line.split("#", 1)[0].strip()
        if not word:
            continue
        if any(c.isspace() or not c.isprintable() for c in word) or word.startswith("-"):
            raise UsageError(f"{path}:{number}: {word!r} is not a host (one host a line)")
        hosts.extend(expand_hosts(word.removesuffix(":")))
    if not hosts:
        raise UsageError(f"{path}: names no host (one a line, # for comments)")
    return hosts


@dataclass
class JobTargets:
    """What attach's TARGETs name once host lists and ranges are read: local pids and sockets,
    and the hosts to watch, each with the pids named there (``None``: every agent there)."""

    local: list[str] = field(default_factory=list)
    hosts: dict[str, set[int] | None] = field(default_factory=dict)

    @property
    def across_hosts(self) -> bool:
        """Whether it takes more than one ``HOST:PID`` through its own ssh: a job's view."""
        return (
            len(self.hosts) > 1
            or (bool(self.hosts) and bool(self.local))
            or any(pids is None for pids in self.hosts.values())
        )


def job_targets(targets: Sequence[str], hosts_from: Path | None = None) -> JobTargets:
    """Read attach's TARGETs: ``HOST:`` and ``HOST:PID`` with host ranges, ``@FILE`` (and
    ``hosts_from``) naming one host a line, local pids and sockets. Raises :class:`UsageError`."""
    job = JobTargets()

    def every_agent_on(host: str) -> None:
        job.hosts[host] = None

    if hosts_from is not None:
        for host in hosts_file(hosts_from):
            every_agent_on(host)
    for target in targets:
        if target.startswith("@") and len(target) > 1:
            for host in hosts_file(Path(target[1:])):
                every_agent_on(host)
            continue
        remote = remote_target(target)
        if remote is None:
            if "[" in target and not Path(target).exists():
                raise UsageError(f"{target}: a host range needs a colon after it (node[1-8]: for every agent there)")
            if target in job.local:
                raise UsageError(f"{target}: a TARGET is named twice: name each process once")
            job.local.append(target)
            continue
        for host in expand_hosts(remote.host):
            if remote.pid is None:
                every_agent_on(host)
                continue
            pids = job.hosts.setdefault(host, set())
            if pids is not None:
                pids.add(remote.pid)
    return job


class HostLinks:
    """The ssh connections of a job across machines, one per host, and the agents they carry."""

    def __init__(self, job: JobTargets, *, filters: Mapping[str, Any]) -> None:
        self.job = job
        self.links = {host: HostLink(host) for host in job.hosts}
        self._filters = dict(filters)
        self._paths: dict[Path, tuple[HostLink, int, int]] = {}
        self._taken: dict[str, int] = {}  # agents of each link already looked at

    def start(self, *, others: bool = False) -> dict[str, str]:
        """Log in to every host at once. A host that cannot be reached is lost from the start
        and logged in to again as one that dropped is, while another target answered (a host,
        or ``others``: local agents); returns why each such host could not be had, one line
        each. When none answered, raises :class:`SourceError` naming the first host (every
        link is closed then)."""
        errors: dict[str, str] = {}

        def start(link: HostLink) -> None:
            try:
                link.start()
            except SourceError as exc:
                errors[link.host] = str(exc)

        threads = [threading.Thread(target=start, args=(link,), daemon=True) for link in self.links.values()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        failed = [host for host in self.links if host in errors]
        if failed and len(failed) == len(self.links) and not others:
            self.close()
            more = f" (and {len(failed) - 1} more hosts)" if len(failed) > 1 else ""
            raise SourceError(errors[failed[0]] + more)
        for host in failed:
            self.links[host].start_lost(errors[host])
        for host, pids in self.job.hosts.items():
            if host in errors:
                continue  # its pids are looked for once it answers
            there = {pid for pid, _ in self.links[host].agents()}
            for pid in sorted(pids or ()):
                if pid not in there:
                    self.close()
                    raise SourceError(
                        f"{host}:{pid}: no iket-tui agent of that pid there (`iket-tui ls {host}` lists them)"
                    )
        return {host: errors[host] for host in failed}

    def paths(self) -> list[Path]:
        """Each agent to watch on every host, as ``HOST:PID``, those announced since included
        (asked for ten times a second: only the newly announced are looked at)."""
        for host, link in self.links.items():
            wanted = self.job.hosts[host]
            agents = link.agents()
            for pid, start in agents[self._taken.get(host, 0) :]:
                if wanted is None or pid in wanted:
                    self._paths.setdefault(Path(f"{host}:{pid}"), (link, pid, start))
            self._taken[host] = len(agents)
        return list(self._paths)

    def is_remote(self, path: Path) -> bool:
        return path in self._paths

    def source(self, path: Path, frames_to: FramesTo | None) -> HostAgentSource:
        link, pid, start = self._paths[path]
        return HostAgentSource(link, pid, start, frames_to=frames_to, filters=self._filters)

    def states(self) -> tuple[HostState, ...]:
        return tuple(link.state for link in self.links.values())

    def close(self) -> None:
        for link in self.links.values():
            link.close()


def job_source(
    job: JobTargets, *, record_to: Path | None, filters: Mapping[str, Any], local_paths: Sequence[Path] = ()
) -> ProcessStreams:
    """A job across machines in one stream: every agent on each host through that host's one
    ssh connection (and those that start there while it watches), with the local ones."""
    links = HostLinks(job, filters=filters)
    unreachable = links.start(others=bool(local_paths))
    remote = links.paths()
    if not remote and not local_paths:
        links.close()
        reached = [host for host in job.hosts if host not in unreachable]
        why = f"; and {next(iter(unreachable.values()))}" if unreachable else ""
        raise SourceError(f"no live iket-tui agents on {', '.join(reached)} (of the user ssh logs in as){why}")

    def reader_of(path: Path, frames_to: FramesTo | None) -> SocketSource:
        if links.is_remote(path):  # known by its path, never parsed back from it
            return links.source(path, frames_to)
        return SocketSource(path, frames_to=frames_to, filters=filters)

    hosts = list(job.hosts)
    named = ", ".join(hosts[:3]) + (f" and {len(hosts) - 3} more" if len(hosts) > 3 else "")
    streams = ProcessStreams(
        [*local_paths, *remote],
        record_to=record_to,
        find=links.paths,
        following=lambda: True,
        description=f"{len(hosts)} host{'s' if len(hosts) != 1 else ''}: {named}",
        reader_of=reader_of,
        hosts=links.states,
        on_close=links.close,
        first_notes=[f"{why}; logging in again while the others stream" for why in unreachable.values()],
    )
    streams.by_rank = True
    return streams
