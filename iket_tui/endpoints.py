"""Where agents listen and who may talk to them.

Each agent serves one Unix socket in a per-user directory (``$IKET_TUI_SOCKET_DIR`` when set,
else ``$XDG_RUNTIME_DIR/iket-tui/``, else ``/tmp/iket-tui-<uid>/``; mode 0700). The file is
named ``<pid>-<start_time>.sock`` so that a reader can tell a live agent from a stale file,
and a reused pid from the original process, without connecting. A directory that another user
owns, or that others may write to, is not trusted with this user's sockets. A process of
another user is out of reach whatever its socket: both ends check the peer's uid.
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
SOCKET_DIR_VARIABLE = "IKET_TUI_SOCKET_DIR"
MAX_SOCKET_PATH = 107
"""The longest path, in bytes, that a Unix socket may be bound or connected at (Linux)."""
_SHORTER_DIR = f"set {SOCKET_DIR_VARIABLE} (or XDG_RUNTIME_DIR) to a shorter directory"
_ELSEWHERE = f"remove it, or set {SOCKET_DIR_VARIABLE} to a directory of yours"
_LISTENING = 0x10000  # __SO_ACCEPTCON in /proc/net/unix: the socket listens


class EndpointError(Exception):
    """A target cannot be reached; the message is a one-line explanation for the user."""


class NoAgentError(EndpointError):
    """The process the user named runs no agent (one could be started in it)."""


class ForeignPeerError(EndpointError):
    """The other end of a connection runs as another user."""

    def __init__(self, uid: int) -> None:
        super().__init__(f"runs as uid {uid}, not as this user (uid {os.getuid()})")
        self.uid = uid


def must_run_as() -> str:
    """The end of a message about an agent of another user: what the user can do about it."""
    return f"iket-tui must run as that user to reach it (this is uid {os.getuid()})"


@dataclass(frozen=True)
class DirProblem:
    """Why the runtime directory may not be trusted with this user's sockets, and the fix."""

    why: str
    fix: str

    def says(self, consequence: str) -> str:
        """One line: why, what follows from it, and the fix."""
        return f"{self.why}: {consequence} ({self.fix})"


def runtime_dir() -> Path:
    """The per-user directory holding agent sockets (not created)."""
    chosen = os.environ.get(SOCKET_DIR_VARIABLE)
    if chosen:
        return Path(chosen)
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isdir(xdg):
        return Path(xdg) / "iket-tui"
    return Path(f"/tmp/iket-tui-{os.getuid()}")


def ensure_runtime_dir(path: Path | None = None) -> Path:
    """Create the runtime directory (or ``path``) with mode 0700 and check that it is ours and
    private. iket-tui's own directory is made private if it is not; a directory the user named
    (``IKET_TUI_SOCKET_DIR``) that others may enter is refused, never changed."""
    path = path or runtime_dir()
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.lstat()
    if not stat.S_ISDIR(st.st_mode):
        raise EndpointError(f"{path} is not a directory")
    if st.st_uid != os.getuid():
        raise EndpointError(f"{_foreign_dir(path, st.st_uid)} ({_ELSEWHERE})")
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        if os.environ.get(SOCKET_DIR_VARIABLE):
            raise EndpointError(
                f"{path} is open to other users (mode {mode:o}):"
                f" set {SOCKET_DIR_VARIABLE} to a directory that only this user may enter"
            )
        os.chmod(path, 0o700)
    return path


def _foreign_dir(path: Path, uid: int) -> str:
    return f"{path} belongs to uid {uid}, not to this user (uid {os.getuid()})"


def runtime_dir_problem() -> DirProblem | None:
    """Why the runtime directory may not be trusted with this user's sockets (another user owns
    it, or others may write to it); ``None`` when it may be, or does not exist yet. Its sockets
    are then neither listed nor connected to by pid."""
    path = runtime_dir()
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return DirProblem(f"{path}: cannot look at it ({exc.strerror or exc})", _ELSEWHERE)
    if not stat.S_ISDIR(st.st_mode):
        return DirProblem(f"{path} is not a directory", _ELSEWHERE)
    if st.st_uid != os.getuid():
        return DirProblem(_foreign_dir(path, st.st_uid), _ELSEWHERE)
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        return DirProblem(f"{path} is open to other users (mode {mode:o})", f"chmod 700 {path}, or remove it")
    return None


def check_socket_path(path: Path) -> None:
    """Refuse an agent socket path too long for a Unix socket, saying how to make it shorter."""
    size = len(os.fsencode(path))
    if size > MAX_SOCKET_PATH:
        raise EndpointError(
            f"the socket path {path} is {size} bytes, longer than a Unix socket path may be ({MAX_SOCKET_PATH}):"
            f" {_SHORTER_DIR}"
        )


def too_long_to_connect(path: Path) -> str | None:
    """Why a socket path the user gave cannot be connected to as it is, with the fix; ``None`` if it can."""
    size = len(os.fsencode(path))
    if size <= MAX_SOCKET_PATH:
        return None
    return (
        f"{path}: {size} bytes, longer than a Unix socket path may be ({MAX_SOCKET_PATH}):"
        " connect through a shorter path (a symbolic link to its directory, say)"
    )


def process_start_time(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot, or ``None`` if there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    fields = raw[raw.rfind(b")") + 2 :].split()
    return int(fields[19])


def process_alive(pid: int, start_time: int) -> bool:
    """Whether the process ``pid`` that started at ``start_time`` still runs (a zombie does not)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    fields = raw[raw.rfind(b")") + 2 :].split()
    return fields[0] not in (b"Z", b"X") and int(fields[19]) == start_time


def process_uid(pid: int) -> int | None:
    """The effective uid of ``pid``, or ``None`` if there is no such process."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[2])
    return None


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


def binding_path_for(path: Path) -> Path:
    """Where an agent binds its socket before renaming it to ``path`` (shorter than ``path``)."""
    return path.with_name(f".{path.name.removesuffix(SOCKET_SUFFIX)}.b")


@dataclass(frozen=True)
class AgentEndpoint:
    """One agent socket found in the runtime directory."""

    pid: int
    start_time: int
    path: Path

    @property
    def alive(self) -> bool:
        return process_start_time(self.pid) == self.start_time


def endpoint_of(path: Path) -> AgentEndpoint | None:
    """The process a socket's file name says serves it (``<pid>-<start_time>.sock``), if it says."""
    stem = path.name.removesuffix(SOCKET_SUFFIX)
    pid, _, start = stem.partition("-")
    if not (path.name.endswith(SOCKET_SUFFIX) and pid.isdigit() and start.isdigit()):
        return None
    return AgentEndpoint(int(pid), int(start), path)


def in_runtime_dir(path: Path) -> bool:
    """Whether ``path`` lies in this user's runtime directory, where only local agents listen."""
    return os.path.abspath(path.parent) == os.path.abspath(runtime_dir())


def listening(path: Path) -> bool:
    """Whether something accepts connections at the socket ``path``: connects and hangs up at once
    (an agent takes that for a client that left before its hello)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.setblocking(False)
    try:
        probe.connect(str(path))
    except BlockingIOError:
        return True  # its backlog is full: it listens, and is busy
    except OSError:
        return False
    finally:
        probe.close()
    return True


def list_endpoints(*, clean_stale: bool = True, listening_only: bool = False) -> list[AgentEndpoint]:
    """Live agents of this user, oldest pid first; socket files of processes gone are removed.

    Nothing is listed from a runtime directory that may not be trusted (see
    :func:`runtime_dir_problem`). With ``listening_only``, a socket of a live process that
    nothing listens on is left out too (it is left in place: its process may bind it again).

    Stale sockets come chiefly from children made by ``fork`` that then ``exec`` (``pty.fork``,
    daemonising code): the agent started in the child at the fork leaves its socket when the
    exec drops it. Such a socket goes once its ``<pid>-<start time>`` process is gone, a zombie
    that nobody waited for included; what is not a socket stays, whatever its name.
    """
    if runtime_dir_problem() is not None:
        return []
    directory = runtime_dir()
    found: list[AgentEndpoint] = []
    try:
        entries = list(directory.iterdir())
    except OSError:
        return []
    for path in entries:
        endpoint = endpoint_of(path)
        if endpoint is None:
            continue
        if process_alive(endpoint.pid, endpoint.start_time):
            if not listening_only or listening(path):
                found.append(endpoint)
        elif clean_stale and _is_socket(path):
            with contextlib.suppress(OSError):
                path.unlink()
    return sorted(found, key=lambda e: e.pid)


def _is_socket(path: Path) -> bool:
    """Whether ``path`` itself (not what a link there names) is a socket."""
    try:
        return stat.S_ISSOCK(path.lstat().st_mode)
    except OSError:
        return False


def resolve_target(target: str) -> Path:
    """A pid or a socket path, as typed by the user, to the socket to connect to."""
    if target.isdigit():
        return _socket_of_pid(int(target))
    path = Path(target)
    try:
        st = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        raise EndpointError(f"{target}: no such pid or socket") from None
    except PermissionError:
        owner = owner_out_of_reach(path)
        if owner is None or owner == os.getuid():
            raise EndpointError(f"{target}: permission denied") from None
        raise EndpointError(f"{target}: permission denied: the agent belongs to uid {owner}; {must_run_as()}") from None
    except OSError as exc:
        raise EndpointError(f"{target}: {exc.strerror or exc}") from None
    if not stat.S_ISSOCK(st.st_mode):
        raise EndpointError(f"{target}: not a socket")
    return path


def _socket_of_pid(pid: int) -> Path:
    start = process_start_time(pid)
    if start is None:
        raise EndpointError(f"no process with pid {pid}")
    owner = process_uid(pid)
    if owner is not None and owner != os.getuid():
        if _listening_agent_of(pid, start):
            raise EndpointError(f"the iket-tui agent of process {pid} belongs to uid {owner}; {must_run_as()}")
        raise EndpointError(
            f"process {pid} belongs to uid {owner} and runs no iket-tui agent this user can see;"
            f" iket-tui must run as that user to watch it (this is uid {os.getuid()})"
        )
    problem = runtime_dir_problem()
    if problem is not None:
        raise EndpointError(problem.says("its sockets are not used"))
    path = socket_path_for(pid, start)
    try:
        check_socket_path(path)
    except EndpointError:
        size = len(os.fsencode(path))
        raise EndpointError(
            f"process {pid}: its socket path {path} would be {size} bytes, longer than a Unix socket path may be"
            f" ({MAX_SOCKET_PATH}): {_SHORTER_DIR}"
        ) from None
    if not path.exists():
        raise NoAgentError(f"process {pid} runs no iket-tui agent (start it with `iket-tui run -- CMD` or IKET_TUI=1)")
    return path


def _listening_agent_of(pid: int, start_time: int) -> bool:
    """Whether an agent socket of process ``pid`` listens, wherever it lies and whoever may open
    it: ``/proc/net/unix`` lists every listening socket's path to every user."""
    names = {f"{pid}-{start_time}{SOCKET_SUFFIX}", f".{pid}-{start_time}.b"}
    try:
        lines = Path("/proc/net/unix").read_text(errors="replace").splitlines()[1:]
    except OSError:
        return False
    for line in lines:
        fields = line.split(None, 7)
        if len(fields) == 8 and int(fields[3], 16) & _LISTENING and os.path.basename(fields[7]) in names:
            return True
    return False


def owner_out_of_reach(path: Path) -> int | None:
    """Who owns what keeps this user from ``path``: the socket file if it can be looked at, else
    the outermost directory on the way that this user may not search; ``None`` if unknown."""
    try:
        return path.stat().st_uid
    except OSError:
        pass
    for parent in reversed(Path(os.path.abspath(path)).parents):
        try:
            st = parent.stat()
        except OSError:
            return None
        if not os.access(parent, os.X_OK):
            return st.st_uid
    return None


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
    """Refuse a peer that runs as another user (:class:`ForeignPeerError`)."""
    uid = peer_uid(sock)
    if uid != os.getuid():
        raise ForeignPeerError(uid)
