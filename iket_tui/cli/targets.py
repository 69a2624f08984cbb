"""The agent socket that a command's TARGET (a pid or a socket path) names."""

from __future__ import annotations

from pathlib import Path

from iket_tui.cli.errors import say
from iket_tui.endpoints import EndpointError, NoAgentError, resolve_target


def target_socket(target: str, *, start_agent: bool) -> Path:
    """The socket of a pid or socket path; with ``start_agent`` a Python process without the
    agent gets one started in it."""
    try:
        return resolve_target(target)
    except NoAgentError as exc:
        if not start_agent:
            raise EndpointError(f"{exc}; `iket-tui attach {target}` or --start-agent starts one in it") from None
    from iket_tui.sources.inject import inject_agent

    return inject_agent(
        int(target), on_start=lambda: say(f"process {target} runs no iket-tui agent: starting one in it ...")
    )
