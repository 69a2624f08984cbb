"""Starting the agent inside a Python process that runs without it, so that ``attach``,
``stacks`` and ``ir`` work on a program nobody started under iket-tui.

Python 3.14 and later can run code in another interpreter (``sys.remote_exec``); elsewhere gdb
attaches, takes the GIL and runs the same one line, then lets go. Both need permission to trace
the process (same user, and ptrace not restricted); where that is impossible one line says why
and how to start the program with the agent instead. From then on every new compile is
observed; compiles already under way are not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from iket_tui import endpoints
from iket_tui.sources.base import SourceError

GDB_TIMEOUT_S = 60.0
WAIT_SOCKET_S = 30.0
INSTEAD = "start it with `iket-tui run -- CMD` or IKET_TUI=1 instead"


def agent_code() -> str:
    """The line the target runs: find this iket-tui, start its agent."""
    package_root = str(Path(__file__).resolve().parents[2])
    return (
        "import sys\n"
        f"sys.path.append({package_root!r}) if {package_root!r} not in sys.path else None\n"
        "import iket_tui.agent\n"
        "iket_tui.agent.start()\n"
    )


def inject_agent(pid: int, on_start: Callable[[], None] | None = None) -> Path:
    """Start the agent in process ``pid`` and return its socket; :class:`SourceError` (one line) if
    impossible. ``on_start`` runs once the process is known to be Python, before it is touched."""
    start = check_python(pid)
    path = endpoints.socket_path_for(pid, start)
    if on_start is not None:
        on_start()
    if sys.version_info >= (3, 14) and hasattr(sys, "remote_exec"):
        _remote_exec(pid)
    else:
        _with_gdb(pid)
    deadline = time.monotonic() + WAIT_SOCKET_S
    while not path.exists():
        if time.monotonic() > deadline:
            raise SourceError(f"started the agent in process {pid}, but it serves no socket after {WAIT_SOCKET_S:g} s")
        if endpoints.process_start_time(pid) != start:
            raise SourceError(f"process {pid} ended while the agent was starting in it")
        time.sleep(0.05)
    return path


def check_python(pid: int) -> int:
    """Refuse, in one line (:class:`SourceError`), a process that no agent could be started in:
    none, one that has ended (a zombie), one that is not Python, or one this user may not look
    at; returns its start time. ``attach`` asks before starting an agent, and the commands
    that only connect before suggesting it."""
    start = endpoints.process_start_time(pid)
    if start is None:
        raise SourceError(f"no process with pid {pid}")
    if not endpoints.process_alive(pid, start):
        raise SourceError(f"process {pid} has ended (a zombie its parent has not reaped yet): nothing runs there")
    name = _program(pid)
    if "python" not in name:
        raise SourceError(f"process {pid} ({name}) is not a Python program; {INSTEAD}")
    return start


def _program(pid: int) -> str:
    """The name of the program ``pid`` runs: its executable's, or where that cannot be read (a
    process this user may not trace, such as pid 1) the one its command line starts with, when
    that names no Python (a script's command line starts with its interpreter)."""
    try:
        return Path(os.readlink(f"/proc/{pid}/exe")).name
    except OSError as exc:
        argv = endpoints.process_argv(pid)
        named = Path(argv[0]).name if argv else ""
        if named and "python" not in named:
            return named
        raise SourceError(f"cannot look at process {pid}: {exc.strerror or exc}; {INSTEAD}") from None


def _remote_exec(pid: int) -> None:  # pragma: no cover - Python 3.14 and later
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as script:
        script.write(agent_code())
    try:
        sys.remote_exec(pid, script.name)  # type: ignore[attr-defined]
    except Exception as exc:
        raise SourceError(f"cannot start the agent in process {pid} ({exc}); {INSTEAD}") from None


def _with_gdb(pid: int) -> None:
    gdb = shutil.which("gdb")
    if gdb is None:
        raise SourceError(f"process {pid} runs no iket-tui agent, and gdb is not installed to start one; {INSTEAD}")
    code = agent_code().replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    commands = [
        "set confirm off",
        "call (int) PyGILState_Ensure()",
        f'call (int) PyRun_SimpleString("{code}")',
        "call (void) PyGILState_Release($1)",
        "detach",
    ]
    args = [gdb, "-nx", "-batch", "-p", str(pid)]
    for command in commands:
        args += ["-ex", command]
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=GDB_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise SourceError(
            f"gdb did not finish starting the agent in process {pid} within {GDB_TIMEOUT_S:g} s"
        ) from None
    output = done.stdout + done.stderr
    if "ptrace" in output and ("not permitted" in output or "Operation not permitted" in output):
        raise SourceError(
            f"gdb may not trace process {pid} (ptrace not permitted: kernel.yama.ptrace_scope, "
            f"or another user); {INSTEAD}"
        )
    if "$2 = -1" in output:
        raise SourceError(
            f"process {pid} could not start the agent: its Python failed to import iket_tui or start it "
            f"(its stderr says why; is iket-tui installed in its environment?); {INSTEAD}"
        )
    if "$2 = 0" not in output:
        last = next((line for line in reversed(output.splitlines()) if line.strip()), "no output")
        raise SourceError(f"starting the agent in process {pid} through gdb failed ({last}); {INSTEAD}")
