"""Start the agent at interpreter start when ``IKET_TUI=1`` (imported by the installed ``.pth`` file).

Knobs, all optional:

- ``IKET_TUI_WAIT_CLIENT=<seconds>``: block until a first client has received its catch-up,
  for at most that long, so that ``iket-tui run`` sees the program from its first event. It
  is removed from the environment once read, so child processes do not wait again.
- ``IKET_TUI_CHILD_WAIT=<seconds>``: the same for every process started from this one (and from
  those), which start their own agent from the ``IKET_TUI=1`` they inherit: ``iket-tui run``
  sets it while it follows a program's children (:mod:`iket_tui.agent.lifecycle`).
- ``IKET_TUI_BACKLOG=<events>``, ``IKET_TUI_QUEUE=<events>``: the backlog and per-client queue
  bounds.
- ``IKET_TUI_KERNELS=1``: trace kernels (:mod:`iket_tui.agent.kernels`), with
  ``IKET_TUI_DRAIN_HZ=<rate>`` (default 20), ``IKET_TUI_RING_CHUNKS=<units>`` (the ring's region,
  what one warp of one block writes into, in 256-byte units of 16 records: a power of two; default
  32, 512 records or 8 KiB), ``IKET_TUI_RING_SIZE=<size>`` (the ring's records in all, e.g.
  ``256M``; default 128 MiB; see :mod:`iket_tui.agent.kernel_options`) and
  ``IKET_TUI_RING_FILE=<path>`` (drain a ring file written by another process instead of a GPU
  ring).
- ``IKET_TUI_IR_COMPILES=<compiles>``, ``IKET_TUI_IR_MEMORY=<size>``: how much IR of recent
  compiles the agent holds for ``ir`` requests (:mod:`iket_tui.agent.ir_store`); it holds it only
  while a client is attached, unless ``IKET_TUI_IR=always``.
- ``IKET_TUI_SOCKET_DIR=<directory>``: where the agent's socket goes, rather than the user's
  runtime directory (:mod:`iket_tui.endpoints`); clients look there too when it is set.

Nothing here may stop the program: any problem is one line on stderr and the program runs on
without the agent (or with the default for a bad knob).
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from iket_tui.agent.registry import DEFAULT_BACKLOG, DEFAULT_QUEUE

if TYPE_CHECKING:
    from iket_tui.agent.kernel_options import KernelOptions

WAIT_CLIENT = "IKET_TUI_WAIT_CLIENT"
BACKLOG = "IKET_TUI_BACKLOG"
QUEUE = "IKET_TUI_QUEUE"
KERNELS = "IKET_TUI_KERNELS"
DRAIN_HZ = "IKET_TUI_DRAIN_HZ"
RING_CHUNKS = "IKET_TUI_RING_CHUNKS"
RING_SIZE = "IKET_TUI_RING_SIZE"
RING_FILE = "IKET_TUI_RING_FILE"


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


def _reason(exc: ValueError) -> str:
    text = str(exc)
    return text if "must be" in text else "not a number"


def _kernel_options() -> KernelOptions | None:
    if os.environ.get(KERNELS, "") in ("", "0"):
        return None
    from iket_tui.agent.kernel_options import KernelOptions

    options = KernelOptions()
    hz, chunks = os.environ.get(DRAIN_HZ), os.environ.get(RING_CHUNKS)
    try:
        if hz:
            options = replace(options, drain_hz=float(hz))
    except ValueError as exc:
        _warn(f"{DRAIN_HZ}={hz!r}: {_reason(exc)}; using the default")
    try:
        if chunks:
            options = replace(options, chunks_per_region=int(chunks))
    except ValueError as exc:
        _warn(f"{RING_CHUNKS}={chunks!r}: {_reason(exc)}; using the default")
    size = os.environ.get(RING_SIZE)
    try:
        if size:
            from iket_tui.agent.ir_store import parse_size

            parsed = parse_size(size)
            if parsed is None:
                raise ValueError("not a size")
            options = replace(options, ring_bytes=parsed)
    except ValueError as exc:
        _warn(f"{RING_SIZE}={size!r}: {_reason(exc)}; using the default")
    ring_file = os.environ.get(RING_FILE)
    if ring_file:
        options = replace(options, ring_file=Path(ring_file))
    return options


def _autostart() -> None:
    try:
        from iket_tui.agent import start
        from iket_tui.agent.lifecycle import child_wait_s, env_seconds

        backlog = _count(BACKLOG)
        queue = _count(QUEUE)
        kernels = _kernel_options()
        wait = env_seconds(WAIT_CLIENT, keep=False)
        if wait is None:
            wait = child_wait_s()
        agent = start(
            backlog=backlog if backlog is not None else DEFAULT_BACKLOG,
            queue=queue if queue is not None else DEFAULT_QUEUE,
            kernels=kernels or False,
        )
        if wait is not None and not agent.wait_for_client(wait):
            _warn(f"no client attached within {wait:g} s; running on")
    except Exception as exc:
        _warn(f"not started: {exc}")


_autostart()
