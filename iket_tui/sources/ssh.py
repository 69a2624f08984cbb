"""An agent on another machine, reached through the user's own ``ssh``: ``HOST:PID``.

``iket-tui attach HOST:PID`` runs ``ssh HOST iket-tui bridge PID`` with the user's ssh
configuration (keys, jump hosts, aliases), and the remote bridge carries the agent's socket
stream over ssh's standard input and output: nothing listens on a network port, and the remote
machine needs nothing but iket-tui. Here the pipe is one end of a socket pair, an already
connected stream that :class:`SshSource` reads exactly as :class:`SocketSource` reads a local
agent socket, requests, recording and reconnection included.

The checks that need the remote machine (the agent's uid by ``SO_PEERCRED``, the process it is
served by, its start time) are the bridge's; here the agent's hello must name the pid asked
for. The bridge's exit code says why a stream ended or never began (see the ``EXIT_*``
constants), its stderr line says it in words, and ssh's own failures (exit 255) and a remote
shell that finds no iket-tui (127) become one line each.
"""

from __future__ import annotations

import glob
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

from iket_tui import __version__
from iket_tui.protocol import messages as m
from iket_tui.sources.base import SourceBatch, SourceError
from iket_tui.sources.py_spy import NativeStacks
from iket_tui.sources.socket import SocketSource, _GoneWhileGreeting

SSH_VARIABLE = "IKET_TUI_SSH"
"""The ssh command to run (split as a shell would), ``ssh`` when unset."""
REMOTE_VARIABLE = "IKET_TUI_REMOTE"
"""The iket-tui command on the remote machine as its shell reads it (``~/venv/bin/iket-tui``); ``iket-tui`` if unset."""

EXIT_AGENT_AWAY = 3
"""The bridge's exit code when the agent closed the stream while its process runs on."""
EXIT_NO_AGENT = 4
"""The bridge's exit code when the process runs but no agent listens in it (yet)."""
EXIT_GONE = 5
"""The bridge's exit code when there is no such process (or the one asked for exited)."""
SSH_FAILED = 255
"""ssh's exit code for its own failures: the host unreachable, the login refused, the connection lost."""
COMMAND_NOT_FOUND = 127
"""A shell's exit code for a command it cannot find."""

DEFAULT_HELLO_TIMEOUT_S = 30.0  # ssh may log in through jump hosts before the bridge says anything
PROMPT_HELLO_TIMEOUT_S = 300.0  # where ssh may ask for a passphrase or a host key first
RECONNECT_WAIT_S = 2.0  # how long a reconnecting bridge waits for the agent, saving ssh logins
_EXIT_WAIT_S = 5.0  # for ssh to exit once the stream has ended


@dataclass(frozen=True)
class RemoteTarget:
    """``HOST:PID``: a process on another machine, by its ssh destination; ``HOST:`` (no pid) is every agent there."""

    host: str
    pid: int | None

    def __str__(self) -> str:
        return f"{self.host}:{'' if self.pid is None else self.pid}"


def remote_target(text: str) -> RemoteTarget | None:
    """The remote target ``text`` names (``HOST:PID`` or ``HOST:``), or ``None`` for a local one.

    A path that exists stays local whatever it holds, and only digits (or nothing) after the
    last colon make a remote target, so that socket paths with colons still work.
    """
    host, colon, pid = text.rpartition(":")
    if not colon or not host or not (pid.isdigit() or pid == "") or os.path.exists(text):
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host.startswith("-") or any(c.isspace() for c in host):
        return None
    return RemoteTarget(host, int(pid) if pid else None)


INCLUDE_DEPTH: Final = 16
"""How deep ``Include`` files are followed, as ssh itself allows."""


def configured_hosts(config: Path) -> list[str]:
    """The hosts an ssh client configuration names (``Host`` lines, patterns left out), in order,
    those of the files it includes (``Include``, globs, relative to the configuration's directory
    as ssh reads ``~/.ssh/config``'s) where they are included: what completion offers as
    ``HOST:``. A file that cannot be read names none; a file included again is not read again,
    so includes that loop end."""
    hosts: list[str] = []
    _read_hosts(config, config.parent, hosts, set(), 0)
    return hosts


def _read_hosts(config: Path, base: Path, hosts: list[str], seen: set[Path], depth: int) -> None:
    try:
        real = config.resolve()
        if real in seen or depth > INCLUDE_DEPTH:
            return
        seen.add(real)
        text = config.read_text(errors="replace")
    except (OSError, RuntimeError):  # RuntimeError: a loop of symbolic links
        return
    for line in text.splitlines():
        words = line.replace("=", " ", 1).split()
        if len(words) < 2 or words[0].lower() not in ("host", "include"):
            continue
        include = words[0].lower() == "include"
        for name in words[1:]:
            if name.startswith("#"):
                break
            if include:
                pattern = os.path.expanduser(name)
                for path in sorted(glob.glob(pattern if os.path.isabs(pattern) else str(base / pattern))):
                    _read_hosts(Path(path), base, hosts, seen, depth + 1)
            elif not any(c in name for c in "*?!") and name not in hosts:
                hosts.append(name)


def ssh_command(host: str, remote: list[str], *, batch: bool) -> list[str]:
    """The command that runs iket-tui with ``remote`` arguments on ``host``; ``batch`` where a
    password or host key prompt would hang (no terminal, or the UI already owns it)."""
    ssh = shlex.split(os.environ.get(SSH_VARIABLE) or "ssh")
    iket = os.environ.get(REMOTE_VARIABLE) or "iket-tui"  # words for the remote shell: ~ expands there
    options = ["-T", "-o", "BatchMode=yes"] if batch else ["-T"]
    return [*ssh, *options, host, " ".join([iket, *(shlex.quote(part) for part in remote)])]


def run_remote(
    host: str, remote: list[str], *, timeout_s: float | None = None, work_s: float = 0.0, batch: bool | None = None
) -> tuple[int, str, str]:
    """Run iket-tui on ``host`` with ``remote`` arguments to its end: exit code, stdout, and the
    one line saying why it failed ("" when it did not). Raises :class:`SourceError` without ssh,
    and when it has not ended within ``timeout_s`` (by default :data:`DEFAULT_HELLO_TIMEOUT_S`,
    or :data:`PROMPT_HELLO_TIMEOUT_S` where ssh may ask at the terminal first) plus ``work_s``,
    what the remote command may take itself: a host that swallows the connection would
    otherwise hang ``ls HOST`` and ``attach HOST:`` for good. ``batch`` (by default, where
    standard input is no terminal) never prompts and leaves the terminal and standard input
    alone: what a request made while the UI owns the terminal needs."""
    if batch is None:
        batch = not sys.stdin.isatty()
    if timeout_s is None:
        timeout_s = DEFAULT_HELLO_TIMEOUT_S if batch else PROMPT_HELLO_TIMEOUT_S
    timeout_s += work_s
    try:
        done = subprocess.run(
            ssh_command(host, remote, batch=batch),
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL if batch else None,
            start_new_session=batch,
        )
    except OSError as exc:
        raise SourceError(_no_ssh(exc)) from None
    except subprocess.TimeoutExpired:  # ssh was killed and waited for
        raise SourceError(f"{host}: no answer through ssh within {timeout_s:g} s (is the host reachable?)") from None
    why = "" if done.returncode == 0 else failure_line(host, done.returncode, done.stderr)
    return done.returncode, done.stdout, why


NATIVE_HEADING = ": native stacks (py-spy)"
"""What ends the line above the native stacks in ``iket-tui stacks --native``'s output."""


def stacks_there(
    target: RemoteTarget, *, timeout_s: float, include_agent: bool = False, batch: bool | None = None
) -> tuple[int, str, str]:
    """``iket-tui stacks PID --native`` run on the target's machine through ssh, as
    :func:`run_remote` runs it: py-spy must run where the process runs."""
    flags = ["--native", "--timeout", f"{timeout_s:g}", *(["--all"] if include_agent else [])]
    return run_remote(target.host, ["stacks", str(target.pid), *flags], work_s=timeout_s, batch=batch)


def native_stacks_there(target: RemoteTarget, timeout_s: float) -> NativeStacks:
    """The native stacks of a process on another machine, from :func:`stacks_there` run in
    batch mode (never prompting), or why there are none in one line."""
    try:
        _code, out, why = stacks_there(target, timeout_s=timeout_s, batch=True)
    except SourceError as exc:
        return NativeStacks(None, str(exc))
    _, heading, native = out.partition(NATIVE_HEADING + "\n")
    if heading:  # also where the agent there did not answer: that is when native stacks matter
        return NativeStacks(native, None)
    return NativeStacks(None, why or f"{target}: the remote iket-tui printed no native stacks")


def remote_pids(host: str, *, timeout_s: float | None = None, batch: bool | None = None) -> list[int]:
    """The pids of the live agents on ``host`` (of the user ssh logs in as), through ssh.
    Raises :class:`SourceError` with the one-line reason when they cannot be had (within
    ``timeout_s``, as :func:`run_remote` bounds it; ``batch`` as there)."""
    code, out, why = run_remote(host, ["completion", "--list-targets"], timeout_s=timeout_s, batch=batch)
    if code != 0:
        raise SourceError(why)
    return [int(line.split("\t", 1)[0]) for line in out.splitlines() if line.split("\t", 1)[0].isdigit()]


def ssh_exit(process: subprocess.Popen[bytes] | None, wait_s: float) -> int | None:
    """``process``'s exit code, waiting up to ``wait_s`` for it; ``None`` while it runs (or none)."""
    if process is None:
        return None
    try:
        return process.wait(wait_s)
    except subprocess.TimeoutExpired:
        return None


def ssh_stderr_text(stderr: IO[bytes] | None) -> str:
    """What an ssh wrote to the file its stderr went to (its first 64 KiB)."""
    try:
        if stderr is None:
            return ""
        stderr.seek(0)
        return stderr.read(64 * 1024).decode(errors="replace")
    except (OSError, ValueError):  # closed meanwhile by a close from another thread
        return ""


def failure_line(host: str, code: int | None, stderr: str) -> str:
    """One line saying why ssh or the remote iket-tui ended with ``code`` before the stream began."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not line.startswith("Warning:")]
    last = lines[-1] if lines else ""
    ours = [line.removeprefix("iket-tui: ") for line in lines if line.startswith("iket-tui: ")]
    if code == COMMAND_NOT_FOUND:
        return (
            f"{host}: no iket-tui there ({last or 'command not found'}):"
            f" install it on that machine's PATH, or name it with {REMOTE_VARIABLE}"
        )
    if code == SSH_FAILED or code is None or code < 0:
        if "Permission denied" in last or "Too many authentication failures" in last:
            return f"{host}: ssh could not log in ({last})"
        return f"{host}: ssh cannot reach it ({last or f'ssh ended with code {code}'})"
    if any("invalid choice: 'bridge'" in line for line in lines):
        return f"{host}: its iket-tui has no bridge command (older than this {__version__}): upgrade it there"
    if ours:
        return f"{host}: {ours[-1]}"
    return f"{host}: the remote iket-tui ended with code {code}{f' ({last})' if last else ''}"


def _no_ssh(exc: OSError) -> str:
    command = os.environ.get(SSH_VARIABLE) or "ssh"
    return f"cannot run {command!r} ({exc.strerror or exc}): install OpenSSH's client, or name one with {SSH_VARIABLE}"


class SshSource(SocketSource):
    """:class:`SocketSource` over ``ssh HOST iket-tui bridge PID`` instead of a local socket.

    Each connection (the first, and each reconnection after the agent went away while its
    process ran on) starts its own ssh, whose exit code after the stream says whether the
    process still runs (:data:`EXIT_AGENT_AWAY`). Reconnecting never prompts: ssh runs in batch
    mode there, and the remote bridge waits a moment for the agent itself.
    """

    native_margin_s = DEFAULT_HELLO_TIMEOUT_S + 5.0
    """ssh logs in (in batch mode) before py-spy runs over there."""

    def __init__(
        self,
        target: RemoteTarget,
        *,
        record_to: Path | None = None,
        hello_timeout_s: float = DEFAULT_HELLO_TIMEOUT_S,
        batch_interval_s: float = 0.03,
        reconnect_s: float = 30.0,
        filters: Mapping[str, Any] | None = None,
        frames_to: Callable[[bytes, list[m.Item]], None] | None = None,
    ) -> None:
        if target.pid is None:
            raise SourceError(f"{target}: name a pid there (HOST:PID; `iket-tui ls {target.host}` lists them)")
        super().__init__(
            Path(str(target)),
            record_to=record_to,
            hello_timeout_s=hello_timeout_s,
            batch_interval_s=batch_interval_s,
            reconnect_s=reconnect_s,
            filters=filters,
            frames_to=frames_to,
        )
        self.target = target
        self.host = target.host
        self.description = f"{target}"
        self._batch_hello_timeout_s = hello_timeout_s
        self._ssh: subprocess.Popen[bytes] | None = None
        self._ssh_stderr: IO[bytes] | None = None

    @property
    def who(self) -> str:
        """The peer in the user's words: ``HOST:PID``."""
        return str(self.target)

    # -- hooks of SocketSource ------------------------------------------------------------

    def _open_socket(self) -> socket.socket:
        return self._connect_once()

    def _connect_once(self) -> socket.socket:
        """Start ssh running the bridge, its stdin and stdout one end of a socket pair; this is
        the other. Whatever goes wrong over there shows when no hello comes (:meth:`_greet`)."""
        self._reap()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        remote = ["bridge", str(self.target.pid)]
        first = self.agent_hello
        if first is not None:  # the same process again, its agent given a moment to listen
            remote += ["--start-time", str(first["start_time"]), "--wait", f"{RECONNECT_WAIT_S:g}"]
        batch = first is not None or not sys.stdin.isatty()
        self._hello_timeout_s = self._batch_hello_timeout_s if batch else PROMPT_HELLO_TIMEOUT_S
        self._ssh_stderr = tempfile.TemporaryFile()  # noqa: SIM115 (read and closed once ssh has ended)
        try:
            self._ssh = subprocess.Popen(
                ssh_command(self.target.host, remote, batch=batch),
                stdin=theirs.fileno(),
                stdout=theirs.fileno(),
                stderr=self._ssh_stderr,
                start_new_session=batch,  # a prompt needs the terminal; in batch mode Ctrl-C is ours alone
            )
        except OSError as exc:
            ours.close()
            raise SourceError(_no_ssh(exc)) from None
        finally:
            theirs.close()
        return ours

    def _greet(self, sock: socket.socket, resume: int | None = None) -> m.Message:
        try:
            return super()._greet(sock, resume)
        except SourceError as exc:
            if self._ssh is None:
                raise
            code = self._ssh_exit(_EXIT_WAIT_S if isinstance(exc, _GoneWhileGreeting) else 0.2)
            if code is None and not isinstance(exc, _GoneWhileGreeting) and "no hello within" not in str(exc):
                raise  # the stream came, and is not an agent's of this protocol
            if code is None:
                self._ssh.kill()
                self._ssh.wait()
                raise SourceError(
                    f"{self.target.host}: no answer through ssh within {self._hello_timeout_s:g} s"
                    " (is the host reachable?)"
                ) from None
            if self.agent_hello is not None and code in (EXIT_AGENT_AWAY, EXIT_NO_AGENT, EXIT_GONE):
                raise _GoneWhileGreeting(f"{self.who}: the agent does not listen (yet)") from None  # asked again
            raise SourceError(failure_line(self.target.host, code, self._stderr_text())) from None

    def _check_identity(self, sock: socket.socket, hello: m.Message) -> None:
        """The agent must be the process asked for (its start time and uid the bridge checked),
        and after a reconnection the same one as before."""
        why = "refusing it"
        first = self.agent_hello
        if first is not None and (hello["pid"], hello["start_time"]) != (first["pid"], first["start_time"]):
            raise SourceError(f"{self.who}: pid {hello['pid']} answers now, not pid {first['pid']} that did; {why}")
        if hello["pid"] != self.target.pid:
            raise SourceError(f"{self.who}: the agent there says it is pid {hello['pid']}; {why}")

    def _describe(self, hello: m.Message) -> str:
        """The process with the machine it runs on: ``HOST: pid N: COMMAND``."""
        return f"{self.target.host}: {super()._describe(hello)}"

    def _served_by_agent(self, sock: socket.socket, hello: m.Message) -> bool:
        return True  # the bridge checked, over there, that the process named serves the socket

    def _native_stacks(self, hello: m.Message, timeout_s: float) -> NativeStacks:
        """py-spy's dump of the remote process, run on its machine through ssh."""
        return native_stacks_there(self.target, timeout_s)

    def _still_runs(self, pid: int, start_time: int) -> bool:
        """Whether the remote process still runs, as the last bridge said by its exit code."""
        return self._ssh_exit(_EXIT_WAIT_S) in (EXIT_AGENT_AWAY, EXIT_NO_AGENT)

    def _hang_up(self) -> Iterator[SourceBatch]:
        """The stream ended without a bye: the ssh connection lost (everything received is kept),
        or the agent gone as for a local one."""
        code = None if self._closed else self._ssh_exit(_EXIT_WAIT_S)
        if self._closed:
            return  # closed here meanwhile (Ctrl-C reaches ssh too): the stream ends as the caller asked
        if code is None or code == SSH_FAILED or code < 0:
            lines = [line.strip() for line in self._stderr_text().splitlines() if line.strip()]
            why = lines[-1] if lines else f"ssh ended with code {code}"
            yield from self._fail(
                f"lost the connection to {self.target.host} ({why});"
                f" {self.received} complete messages from {self.who} were received"
            )
            return
        yield from super()._hang_up()

    def _shutdown(self) -> None:
        super()._shutdown()
        self._reap()

    # -- ssh ------------------------------------------------------------------------------

    def _ssh_exit(self, wait_s: float) -> int | None:
        """The current ssh's exit code, waiting up to ``wait_s`` for it; ``None`` while it runs."""
        return ssh_exit(self._ssh, wait_s)

    def _stderr_text(self) -> str:
        return ssh_stderr_text(self._ssh_stderr)

    def _reap(self) -> None:
        """Let the current ssh end on its own (its stdin closed, the bridge exits), or end it."""
        process, self._ssh = self._ssh, None
        if self._ssh_stderr is not None:
            self._ssh_stderr.close()
            self._ssh_stderr = None
        if process is None or process.poll() is not None:
            return
        # A daemon: an ssh slow to end must not hold up this program's exit (up to twice
        # _EXIT_WAIT_S); ssh ends anyway once its stdin, our end of the pair, is gone with us.
        threading.Thread(target=_reap, args=(process,), name="iket-tui ssh reaper", daemon=True).start()


def _reap(process: subprocess.Popen[bytes]) -> None:
    try:
        process.wait(_EXIT_WAIT_S)
    except subprocess.TimeoutExpired:
        process.terminate()
        try:
            process.wait(_EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
