"""Stacks of a live target: its Python stacks fetched through the agent, and its native stacks
through py-spy where it is installed and may trace the target.

A thread stopped inside a C++ pass shows the Python frames that called into it; the native
stack (py-spy ``--native``) shows the C++ frames too, which is what tells one pass's loop from
another's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iket_tui.protocol import messages as m
from iket_tui.sources.requests import DEFAULT_TIMEOUT_S, ask
from iket_tui.sources.socket import SocketSource

NATIVE_TIMEOUT_S = 30.0


def fetch_stacks(source: SocketSource, timeout_s: float = DEFAULT_TIMEOUT_S) -> m.Message:
    """Ask a connected target for its stacks and wait for the answer (a ``response`` message)."""
    return ask(source, m.WHAT_STACKS, timeout_s)


def stack_lines(response: m.Message, *, include_agent: bool = False) -> list[str]:
    """A stacks response as text, one thread after the other, innermost frame last."""
    if not response.get("ok"):
        return [f"the target could not answer: {response.get('error') or 'unknown error'}"]
    threads: list[dict[str, Any]] = [t for t in response.get("threads") or [] if isinstance(t, dict)]
    hidden = [t for t in threads if t.get("agent")] if not include_agent else []
    lines: list[str] = []
    for thread in threads:
        if thread in hidden:
            continue
        tags = [tag for tag, on in (("main", thread.get("main")), ("daemon", thread.get("daemon"))) if on]
        lines.append(f"Thread {thread.get('name')} ({thread.get('id')}{', ' + ', '.join(tags) if tags else ''}):")
        if thread.get("cut"):
            lines.append(f"  ... {thread['cut']} outer frames left out")
        for frame in thread.get("frames") or []:
            lines.append(f'  File "{frame.get("file")}", line {frame.get("line")}, in {frame.get("function")}')
            if frame.get("code"):
                lines.append(f"    {frame['code']}")
        lines.append("")
    if hidden:
        lines.append(f"({len(hidden)} threads of the iket-tui agent not shown)")
    return lines


@dataclass(frozen=True)
class NativeStacks:
    """py-spy's dump of the target (``text``), or why there is none (``why``)."""

    text: str | None
    why: str | None


def native_stacks(pid: int, timeout_s: float = NATIVE_TIMEOUT_S) -> NativeStacks:
    """The native and Python stacks of every thread of ``pid``, from ``py-spy dump --native``."""
    py_spy = py_spy_path()
    if py_spy is None:
        return NativeStacks(None, "native stacks need py-spy: pip install py-spy")
    try:
        done = subprocess.run(
            [py_spy, "dump", "--pid", str(pid), "--native"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return NativeStacks(None, f"py-spy did not finish within {timeout_s:g} s")
    except OSError as exc:
        return NativeStacks(None, f"cannot run py-spy: {exc.strerror or exc}")
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["failed"])[-1]
        return NativeStacks(None, f"py-spy could not read pid {pid}: {last}; {_how_to_permit()}")
    return NativeStacks(done.stdout, None)


def py_spy_path() -> str | None:
    """py-spy beside this Python (a virtual environment's), or on the PATH."""
    beside = Path(sys.executable).with_name("py-spy")
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("py-spy")


def _how_to_permit() -> str:
    scope = Path("/proc/sys/kernel/yama/ptrace_scope")
    if scope.is_file() and scope.read_text().strip() not in ("", "0"):
        return (
            "tracing another process is restricted (kernel.yama.ptrace_scope); start the program under "
            "`iket-tui run`, or run `sudo sysctl kernel.yama.ptrace_scope=0`, or run iket-tui with sudo"
        )
    return "py-spy needs permission to trace the target (same user, or root; in a container, CAP_SYS_PTRACE)"
