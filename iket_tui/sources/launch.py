"""A program started with the agent: its socket, its output, its exit.

``iket-tui run`` starts the program with ``IKET_TUI=1`` (the agent starts at interpreter start)
and ``IKET_TUI_WAIT_CLIENT`` (the program waits until a first client has caught up, so nothing
is missed), then looks for the agent's socket in the program or any process it started.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from iket_tui.endpoints import list_endpoints, process_start_time, socket_path_for
from iket_tui.sources.base import SourceError

WAIT_CLIENT_S = 10.0
_PR_SET_PDEATHSIG = 1
_POLL_S = 0.05
_SCAN_EVERY = 4


class LaunchedProgram:
    """One started program.

    With ``log_output`` its stdout and stderr go to a log file (:attr:`log_path`) and it runs in
    its own session without the terminal, so it cannot garble a full-screen UI; otherwise it
    shares the terminal.
    """

    def __init__(
        self,
        argv: list[str],
        *,
        log_output: bool,
        wait_client_s: float = WAIT_CLIENT_S,
        agent_env: dict[str, str] | None = None,
    ) -> None:
        self.argv = argv
        self.log_path: Path | None = None
        env = dict(os.environ, IKET_TUI="1", IKET_TUI_WAIT_CLIENT=f"{wait_client_s:g}", **(agent_env or {}))
        log = None
        if log_output:
            name = Path(argv[0]).name or "program"
            fd, log_name = tempfile.mkstemp(prefix=f"iket-tui-{name}-", suffix=".log")
            log = os.fdopen(fd, "wb")
            self.log_path = Path(log_name)
        try:
            self._process = subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.DEVNULL if log_output else None,
                stdout=log,
                stderr=subprocess.STDOUT if log_output else None,
                start_new_session=log_output,
                preexec_fn=_ended_with(os.getpid()),
            )
        except FileNotFoundError:
            self._drop_log()
            raise SourceError(f"{argv[0]}: command not found") from None
        except PermissionError:
            self._drop_log()
            raise SourceError(f"{argv[0]}: permission denied") from None
        except OSError as exc:
            self._drop_log()
            raise SourceError(f"{argv[0]}: cannot start ({exc.strerror or exc})") from None
        finally:
            if log is not None:
                log.close()
        self._own_session = log_output

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.poll()

    def find_agent(
        self, stop: threading.Event, *, on_slow: Callable[[], None] | None = None, slow_after_s: float = 5.0
    ) -> Path | None:
        """The socket of the agent in this program or a process it started; ``None`` if the
        program exits first or ``stop`` is set. ``on_slow`` is called once after ``slow_after_s``."""
        started = time.monotonic()
        warned = False
        polls = 0
        while not stop.is_set():
            own = process_start_time(self.pid)
            if own is not None:
                path = socket_path_for(self.pid, own)
                if path.exists():
                    return path
            if polls % _SCAN_EVERY == 0:
                family = _descendants(self.pid)
                for endpoint in list_endpoints(clean_stale=False):
                    if endpoint.pid in family and endpoint.alive:
                        return endpoint.path
            if self._process.poll() is not None:
                return None
            if on_slow is not None and not warned and time.monotonic() - started >= slow_after_s:
                warned = True
                on_slow()
            polls += 1
            stop.wait(_POLL_S)
        return None

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit code (128 + N for a signal N), or ``None`` if still running after ``timeout``."""
        try:
            code = self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        return 128 - code if code < 0 else code

    def stop(self, *, grace_s: float = 5.0) -> str:
        """Terminate the program (SIGTERM, then SIGKILL after ``grace_s``); says how it went."""
        if self._process.poll() is not None:
            return "it had already exited"
        self.send(signal.SIGTERM)
        if self.wait(grace_s) is not None:
            return "stopped it with SIGTERM"
        self.send(signal.SIGKILL)
        self._process.wait()
        return f"killed it with SIGKILL after {grace_s:g} s"

    def log_tail(self, lines: int = 20) -> list[str]:
        """The last lines of the program's output log."""
        if self.log_path is None:
            return []
        try:
            with open(self.log_path, "rb") as file:
                file.seek(0, os.SEEK_END)
                file.seek(max(0, file.tell() - 64 * 1024))
                tail = deque(file.read().decode(errors="replace").splitlines(), maxlen=lines)
        except OSError:
            return []
        return list(tail)

    def log_is_empty(self) -> bool:
        try:
            return self.log_path is None or self.log_path.stat().st_size == 0
        except OSError:
            return True

    def send(self, signum: int) -> None:
        """Send a signal to the program (to its whole process group when it has its own session)."""
        if self._process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if self._own_session:
                os.killpg(self._process.pid, signum)
            else:
                self._process.send_signal(signum)

    def _drop_log(self) -> None:
        if self.log_path is not None:
            with contextlib.suppress(OSError):
                self.log_path.unlink()
            self.log_path = None


def _descendants(root: int) -> set[int]:
    """``root`` and every live process below it."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return {root}
    for name in entries:
        if not name.isdigit():
            continue
        try:
            raw = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        fields = raw[raw.rfind(b")") + 2 :].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(name))
    found = {root}
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _ended_with(parent: int) -> Callable[[], None]:
    """Set up a started program to receive SIGTERM when iket-tui dies, however it dies
    (``PR_SET_PDEATHSIG``), so that a killed iket-tui leaves no program running unseen."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return lambda: None

    def in_child() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)

    return in_child
