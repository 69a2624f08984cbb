"""Native stacks of a process on this machine, read by py-spy where it is installed and may
trace the process.

A thread stopped inside a C++ pass shows the Python frames that called into it; the native
stack (py-spy ``--native``) shows the C++ frames too, which is what tells one pass's loop from
another's. Only a source runs this, for the process it verified it is connected to: the UI asks
its source (:data:`~iket_tui.sources.base.NATIVE_STACKS`), never a pid of its own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

NATIVE_TIMEOUT_S = 30.0
NO_PY_SPY = "native stacks need py-spy: pip install 'iket-tui[native]'"
"""Why there are no native stacks where py-spy is not installed."""


@dataclass(frozen=True)
class NativeStacks:
    """py-spy's dump of the target (``text``), or why there is none (``why``, one line)."""

    text: str | None
    why: str | None


def native_stacks(pid: int, timeout_s: float = NATIVE_TIMEOUT_S) -> NativeStacks:
    """The native and Python stacks of every thread of ``pid``, from ``py-spy dump --native``."""
    py_spy = py_spy_path()
    if py_spy is None:
        return NativeStacks(None, NO_PY_SPY)
    try:
        done = subprocess.run(
            [py_spy, "dump", "--pid", str(pid), "--native"],
            capture_output=True,
            text=True,
            errors="replace",  # a frame's name in another encoding must not lose the whole dump
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
