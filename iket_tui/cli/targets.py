"""The agent that a command's TARGET names: a pid or a socket path here, or HOST:PID through ssh."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

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


def every_agent_on(host: str, *, record_to: Path | None, filters: Mapping[str, Any]) -> ProcessStreams:
    """``HOST:``: every live agent on ``host`` when it is asked, each through its own ssh
    bridge, in one stream as ``attach --all`` merges this machine's."""
    pids = remote_pids(host)
    if not pids:
        raise SourceError(f"{host}: no live iket-tui agents there (of the user ssh logs in as)")

    remotes = {Path(f"{host}:{pid}"): RemoteTarget(host, pid) for pid in pids}

    def reader_of(path: Path, frames_to: FramesTo | None) -> SocketSource:
        # Known by its path, never parsed back from it: a file named so here makes it local.
        return SshSource(remotes[path], frames_to=frames_to, filters=filters)

    return ProcessStreams(
        list(remotes),
        record_to=record_to,
        description=f"every agent on {host}",
        reader_of=reader_of,
    )


def target_socket(target: str, *, start_agent: bool, before_start: Callable[[], None] | None = None) -> Path:
    """The socket of a pid or socket path; with ``start_agent`` a Python process without the
    agent gets one started in it, once ``before_start`` (a last check that may refuse) passed."""
    try:
        return resolve_target(target)
    except NoAgentError as exc:
        if not start_agent:
            raise EndpointError(f"{exc}; `iket-tui attach {target}` or --start-agent starts one in it") from None
    if before_start is not None:
        before_start()
    from iket_tui.sources.inject import inject_agent

    return inject_agent(
        int(target), on_start=lambda: say(f"process {target} runs no iket-tui agent: starting one in it ...")
    )
