"""The agent that a command's TARGET names: a pid or a socket path here, or HOST:PID through ssh."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from iket_tui.cli.errors import UsageError, say
from iket_tui.endpoints import EndpointError, NoAgentError, resolve_target
from iket_tui.sources.base import SourceError
from iket_tui.sources.merged import FramesTo, ProcessStreams
from iket_tui.sources.socket import SocketSource
from iket_tui.sources.ssh import RemoteTarget, SshSource, remote_pids, remote_target


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


REMOTE_FIND_EVERY_S: Final = 2.0
"""How often ``attach HOST:`` lists the agents on HOST again, for those that started since."""


def every_agent_on(host: str, *, record_to: Path | None, filters: Mapping[str, Any]) -> ProcessStreams:
    """``HOST:``: every live agent on ``host``, each through its own ssh bridge, in one stream
    as ``attach --all`` merges this machine's, and those that start there while it watches."""
    pids = remote_pids(host)
    if not pids:
        raise SourceError(f"{host}: no live iket-tui agents there (of the user ssh logs in as)")
    agents = _RemoteAgents(host, pids)

    def reader_of(path: Path, frames_to: FramesTo | None) -> SocketSource:
        # Known by its path, never parsed back from it: a file named so here makes it local.
        return SshSource(agents.target(path), frames_to=frames_to, filters=filters)

    return ProcessStreams(
        agents.paths(),
        record_to=record_to,
        find=agents.paths,
        following=lambda: True,
        description=f"every agent on {host}",
        reader_of=reader_of,
    )


class _RemoteAgents:
    """The agents on a host, listed again through ssh every :data:`REMOTE_FIND_EVERY_S` on a
    thread of their own, so that the merged stream, which asks for them far more often, never
    waits for an ssh round trip. A listing that fails (the host went away for a while) is
    tried again; the streams already followed go on or end by themselves."""

    def __init__(self, host: str, pids: list[int]) -> None:
        self._host = host
        self._lock = threading.Lock()
        self._found: dict[Path, RemoteTarget] = {}
        self._asked = time.monotonic()  # when the merged stream last asked: it stops asking once closed
        self._add(pids)
        threading.Thread(target=self._list_again, name=f"iket-tui-agents-on-{host}", daemon=True).start()

    def paths(self) -> list[Path]:
        with self._lock:
            self._asked = time.monotonic()
            return list(self._found)

    def target(self, path: Path) -> RemoteTarget:
        with self._lock:
            return self._found[path]

    def _add(self, pids: list[int]) -> None:
        with self._lock:
            for pid in pids:
                self._found.setdefault(Path(f"{self._host}:{pid}"), RemoteTarget(self._host, pid))

    def _list_again(self) -> None:
        """List again until the merged stream has not asked for a while (it was closed)."""
        while time.monotonic() - self._asked < 5 * REMOTE_FIND_EVERY_S:
            time.sleep(REMOTE_FIND_EVERY_S)
            try:  # in batch mode: never a prompt, and the UI's terminal left alone
                self._add(remote_pids(self._host, timeout_s=4 * REMOTE_FIND_EVERY_S, batch=True))
            except SourceError:
                continue


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
