"""Start the agent at interpreter start when ``IKET_TUI=1`` (imported by the installed ``.pth`` file).

Knobs, all optional:

- ``IKET_TUI_WAIT_CLIENT=<seconds>``: block until a first client has received its catch-up,
  for at most that long, so that ``iket-tui run`` sees the program from its first event. It
  is removed from the environment once read, so child processes do not wait again.
- ``IKET_TUI_BACKLOG=<events>``, ``IKET_TUI_QUEUE=<events>``: the backlog and per-client queue
  bounds.

Nothing here may stop the program: any problem is one line on stderr and the program runs on
without the agent (or with the default for a bad knob).
"""

from __future__ import annotations

import os
import sys

WAIT_CLIENT = "IKET_TUI_WAIT_CLIENT"
BACKLOG = "IKET_TUI_BACKLOG"
QUEUE = "IKET_TUI_QUEUE"


def _warn(text: str) -> None:
    print(f"iket-tui agent: {text}", file=sys.stderr)


def _count(name: str) -> int | None:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        _warn(f"{name} must be a positive whole number, got {raw!r}; using the default")
        return None
    return value


def _seconds(name: str) -> float | None:
    raw = os.environ.pop(name, None)
    if raw is None or raw == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:
        _warn(f"{name} must be a number of seconds, got {raw!r}; not waiting for a client")
        return None
    return value


def _autostart() -> None:
    try:
        from iket_tui.agent import start

        options: dict[str, int] = {}
        backlog = _count(BACKLOG)
        if backlog is not None:
            options["backlog"] = backlog
        queue = _count(QUEUE)
        if queue is not None:
            options["queue"] = queue
        wait = _seconds(WAIT_CLIENT)
        agent = start(**options)
        if wait is not None and not agent.wait_for_client(wait):
            _warn(f"no client attached within {wait:g} s; running on")
    except Exception as exc:
        _warn(f"not started: {exc}")


_autostart()
