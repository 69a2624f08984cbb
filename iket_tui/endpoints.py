"""Where agents listen and who may talk to them.

Each agent serves one Unix socket in a per-user directory (``$XDG_RUNTIME_DIR/iket-tui/``,
else ``/tmp/iket-tui-<uid>/``, mode 0700). The file is named ``<pid>-<start_time>.sock`` so
that a reader can tell a live agent from a stale file, and a reused pid from the original
process, without connecting.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import struct
from dataclasses import dataclass
from pathlib import Path

SOCKET_SUFFIX = ".sock"


class EndpointError(Exception):
    """A target cannot be reached; the message is a one-line explanation for the user."""


def runtime_dir() -> Path:
    """The per-user directory holding agent sockets (not created)."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isdir(xdg):
        return Path(xdg) / "iket-tui"
    return Path(f"/tmp/iket-tui-{os.getuid()}")


def ensure_runtime_dir() -> Path:
    """Create the runtime directory with mode 0700 and check that it is ours and private."""
    path = runtime_dir()
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise EndpointError(f"{path} is not a directory owned by this user")
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(path, 0o700)
    return path


def process_start_time(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot, or ``None`` if there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    fields = raw[raw.rfind(b")") + 2 :].split()
    return int(fields[19])


def process_argv(pid: int) -> list[str]:
    """The command line of ``pid`` (empty if unreadable)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def uptime_seconds(start_time: int) -> float:
    """Seconds since a process with this start time (clock ticks since boot) began."""
    boot_uptime = float(Path("/proc/uptime").read_text().split()[0])
    return max(0.0, boot_uptime - start_time / os.sysconf("SC_CLK_TCK"))


def socket_path_for(pid: int, start_time: int) -> Path:
    return runtime_dir() / f"{pid}-{start_time}{SOCKET_SUFFIX}"


@dataclass(frozen=True)
class AgentEndpoint:
    """One agent socket found in the runtime directory."""

    pid: int
    start_time: int
    path: Path

    @property
    def alive(self) -> bool:
        return process_start_time(self.pid) == self.start_time


def _parse(path: Path) -> AgentEndpoint | None:
    stem = path.name.removesuffix(SOCKET_SUFFIX)
    pid, _, start = stem.partition("-")
    if not (path.name.endswith(SOCKET_SUFFIX) and pid.isdigit() and start.isdigit()):
        return None
    return AgentEndpoint(int(pid), int(start), path)


def list_endpoints(*, clean_stale: bool = True) -> list[AgentEndpoint]:
    """Live agents of this user, oldest pid first; stale socket files are removed."""
    directory = runtime_dir()
    found: list[AgentEndpoint] = []
    try:
        entries = list(directory.iterdir())
    except OSError:
        return []
    for path in entries:
        endpoint = _parse(path)
        if endpoint is None:
            continue
        if endpoint.alive:
            found.append(endpoint)
        elif clean_stale:
            with contextlib.suppress(OSError):
                path.unlink()
    return sorted(found, key=lambda e: e.pid)


def resolve_target(target: str) -> Path:
    """A pid or a socket path, as typed by the user, to the socket to connect to."""
    if target.isdigit():
        pid = int(target)
        start = process_start_time(pid)
        if start is None:
            raise EndpointError(f"no process with pid {pid}")
        path = socket_path_for(pid, start)
        if not path.exists():
            raise EndpointError(
                f"process {pid} runs no iket-tui agent (start it with `iket-tui run -- CMD` or IKET_TUI=1)"
            )
        return path
    path = Path(target)
    if not path.exists():
        raise EndpointError(f"{target}: no such pid or socket")
    if not stat.S_ISSOCK(path.stat().st_mode):
        raise EndpointError(f"{target}: not a socket")
    return path


def _peer_credentials(sock: socket.socket) -> tuple[int, int]:
    """The pid and uid of the process at the other end of a connected Unix socket
    (``SO_PEERCRED``: as they were when it connected, or for a listener when it listened)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    return int(pid), int(uid)


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a connected Unix socket."""
    return _peer_credentials(sock)[1]


def peer_pid(sock: socket.socket) -> int:
    """The pid of the process at the other end of a connected Unix socket; 0 when it lives in
    another pid namespace."""
    return _peer_credentials(sock)[0]


def check_peer(sock: socket.socket) -> None:
    """Refuse a peer that runs as another user."""
    uid = peer_uid(sock)
    if uid != os.getuid():
        raise EndpointError(f"peer runs as uid {uid}, not as this user (uid {os.getuid()}); refusing")
