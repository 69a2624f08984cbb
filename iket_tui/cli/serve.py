"""``iket-tui serve``: the same UI in a browser, through textual-serve, one app process per browser session."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import shlex
import signal
import socket
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from iket_tui.cli.errors import UsageError, check_writable, say
from iket_tui.cli.filters import filters_of
from iket_tui.cli.live import LiveSource, _kernel_env, _report_output, say_host
from iket_tui.cli.signals import watch_signals
from iket_tui.cli.targets import JobTargets, job_source, job_targets, target_socket, target_source
from iket_tui.sources.launch import LaunchedProgram
from iket_tui.sources.merged import ProcessStreams
from iket_tui.sources.replay import RecordingSource
from iket_tui.sources.ssh import remote_target

if TYPE_CHECKING:
    from iket_tui.cli.browser_server import BrowserServer

REFUSED_UNDER_SERVE: Final = {
    "replay": frozenset({"--record"}),
    "attach": frozenset({"--all"}),
    "run": frozenset({"--no-ui"}),
}
"""Options of a served command that serve refuses (each with its own one-line reason below),
which completion therefore never offers after ``serve``."""

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
STOP_GRACE_S = 5.0

DESCRIPTION = """\
Serve the same UI to a browser, through textual-serve, so that someone without a terminal can
look (and drive it: keys and mouse work as in a terminal). It listens on 127.0.0.1 by default
(which the other users of this machine can reach too): from another machine, forward the port
with `ssh -L 8000:127.0.0.1:8000 HOST` and open http://localhost:8000. --host 0.0.0.0 listens
on every address; anyone who can reach the port can then drive the app.

Every browser tab runs its own copy of the UI:
  replay FILE     each tab replays the file from the start.
  attach TARGET   serve keeps one connection to the target that records it; each tab attaches
                  to the target (a tab that opens late first gets the agent's backlog of recent
                  events and every open pass), and once the target has exited a new tab replays
                  the recording. TARGET is a pid, a socket path, or HOST:PID (then serve and
                  each tab reach it through ssh, as `iket-tui attach HOST:PID` does).
  attach T1 T2..  several targets as attach takes them (PID PID, HOST:, node[1-8]:,
                  @hosts.txt, --hosts FILE): serve and each tab show every process of
                  every host in one tree, through one ssh connection per host each.
  run -- CMD      serve starts CMD with the agent once, and then does as for attach.
The recording is a temporary file, removed when serve stops, unless --record FILE keeps it.
Options of replay, attach and run go after the command, as without serve; --port and --host
may go before or after it, but before the `--` that starts CMD. Ctrl-C stops serving."""

EXAMPLES = """\
examples:
  iket-tui serve replay run.msgpack --port 8000
  iket-tui serve attach 12345
  iket-tui serve attach gpu-node-3:12345 --passes 'tl.*'
  iket-tui serve attach node[1-8]:
  iket-tui serve --record run.msgpack run -- python my_kernel.py"""


def add_arguments(serve: argparse.ArgumentParser) -> None:
    """The serve command's own arguments; the command it serves keeps its own options."""
    serve.add_argument(
        "--port", type=_port, default=DEFAULT_PORT, metavar="N", help=f"the port to listen on ({DEFAULT_PORT})"
    )
    serve.add_argument(
        "--host",
        default=DEFAULT_HOST,
        metavar="ADDRESS",
        help=f"the address to listen on ({DEFAULT_HOST}); another one lets anyone who reaches it drive the app",
    )
    serve.add_argument(
        "--record", type=Path, metavar="FILE", help="with attach or run: keep the recording of the target in FILE"
    )
    serve.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        metavar="replay|attach|run ...",
        help="the command whose UI to serve, with its arguments",
    )


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve the UI of ``replay``, ``attach`` or ``run`` to browsers until Ctrl-C; for ``run``,
    the program's exit code."""
    words, host, port, record = _own_options(list(args.command), args.host, args.port, args.record)
    if importlib.util.find_spec("textual_serve") is None:
        raise UsageError("serve needs textual-serve: pip install 'iket-tui[serve]'")
    if not words:
        raise UsageError("serve needs a command: iket-tui serve replay FILE | attach TARGET | run -- CMD [ARGS...]")
    try:
        inner = _parse_inner(words)
    except SystemExit as exc:  # a usage error, said in one line, or --help
        return exc.code if isinstance(exc.code, int) else 0
    if inner.name == "replay":
        if record is not None:
            raise UsageError("serve replay needs no --record: the file is the recording")
        return _serve_replay(inner.args, host, port)
    if record is not None:
        check_writable(record)
    if inner.name == "attach":
        return _serve_attach(inner.args, host, port, record)
    if inner.args.no_ui:
        raise UsageError("serve run has no --no-ui: `iket-tui run --no-ui --record FILE -- CMD` records without a UI")
    return _serve_run(inner.args, host, port, record)


class _Inner:
    """The command under serve, parsed by its own parser."""

    def __init__(self, name: str, args: argparse.Namespace) -> None:
        self.name = name
        self.args = args


def _parse_inner(words: list[str]) -> _Inner:
    from iket_tui.cli.files import cmd_replay
    from iket_tui.cli.live import cmd_attach, cmd_run
    from iket_tui.cli.parser import build_parser

    names = {cmd_replay: "replay", cmd_attach: "attach", cmd_run: "run"}
    if words[0] not in names.values():
        raise UsageError(f"serve shows replay, attach or run, not {words[0]!r} (see `iket-tui serve --help`)")
    args = build_parser().parse_args(words)
    return _Inner(names[args.handler], args)


def _own_options(
    words: list[str], host: str, port: int, record: Path | None
) -> tuple[list[str], str, int, Path | None]:
    """Take serve's options out of the command it serves (those before a ``--``: after it, they
    are the program's)."""
    end = words.index("--") if "--" in words else len(words)
    own = argparse.ArgumentParser(prog="iket-tui serve", add_help=False, allow_abbrev=False, exit_on_error=False)
    own.add_argument("--port", type=_port, default=port)
    own.add_argument("--host", default=host)
    own.add_argument("--record", type=Path, default=record)
    try:
        found, rest = own.parse_known_args(words[:end])
    except argparse.ArgumentError as exc:
        raise UsageError(str(exc)) from None
    return rest + words[end:], found.host, found.port, found.record


def _serve_replay(args: argparse.Namespace, host: str, port: int) -> int:
    source = RecordingSource(args.file, speed=args.speed, start_paused=args.paused)
    source.open()  # a missing or broken file is said here, once, rather than in every browser tab
    source.close()
    argv = ["replay", str(args.file.resolve()), "--speed", str(args.speed), *_ui_options(args)]
    if args.paused:
        argv.append("--paused")
    server = _make_server(
        argv,
        host=host,
        port=port,
        title=f"iket-tui replay {args.file.name}",
        what=f"each browser tab replays {args.file}",
    )
    _listen(server)
    return 0


def _serve_attach(args: argparse.Namespace, host: str, port: int, record: Path | None) -> int:
    if args.all:
        raise UsageError("serve attach has no --all: name the TARGETs (pids, HOST:PID, HOST: or node[1-8]:)")
    targets: list[str] = list(args.target)
    job = job_targets(targets, getattr(args, "hosts", None))
    if len(targets) != 1 or job.across_hosts:
        return _serve_several(args, job, host, port, record)
    (named,) = targets
    remote = remote_target(named)
    tab_target = named if remote is not None else str(target_socket(named, start_agent=True))
    target = _Target(tab_target, args, record, host=host, port=port)
    try:
        _listen(target.server)
    finally:
        target.stop()
    return 0


def _serve_several(args: argparse.Namespace, job: JobTargets, host: str, port: int, record: Path | None) -> int:
    """serve attach of several processes in one view, as attach shows them: pids here, and
    the agents of other machines through one ssh connection per host (``node[1-8]:``,
    ``@hosts.txt``, ``--hosts FILE``); each tab attaches to the same targets."""
    if not job.local and not job.hosts:
        raise UsageError(
            "serve attach needs a TARGET: a pid, a socket path, HOST:PID or HOST: (node[1-8]: for several)"
        )
    local = [target_socket(target, start_agent=True) for target in job.local]
    tab_targets = [str(path) for path in local]
    for name, pids in job.hosts.items():  # host lists and ranges read once, here
        tab_targets += [f"{name}:"] if pids is None else [f"{name}:{pid}" for pid in sorted(pids)]

    def source_of(recording: Path, filters: dict[str, Any]) -> LiveSource:
        if job.hosts:
            return job_source(job, record_to=recording, filters=filters, local_paths=local)
        return ProcessStreams(
            local,
            record_to=recording,
            description="pids " + ", ".join(job.local),
            reader_options={"filters": filters},
        )

    target = _Target(tab_targets, args, record, host=host, port=port, source_of=source_of)
    try:
        _listen(target.server)
    finally:
        target.stop()
    return 0


def _serve_run(args: argparse.Namespace, host: str, port: int, record: Path | None) -> int:
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise UsageError("serve run needs a command: iket-tui serve run [OPTIONS] -- CMD [ARGS...]")
    _check_port(host, port)  # before the program starts, not after
    program = LaunchedProgram(command, log_output=True, agent_env=_kernel_env(args))
    stopped: list[int] = []
    stop = threading.Event()

    def on_signal(signum: int) -> None:
        stopped.append(signum)
        stop.set()

    with watch_signals(on_signal, (signal.SIGINT, signal.SIGTERM)):
        path = program.find_agent(
            stop, on_slow=lambda: say(f"waiting for the iket-tui agent in {command[0]} (pid {program.pid}) ...")
        )
    if path is None:
        if stopped:
            say(f"interrupted; the program (pid {program.pid}): {program.stop(grace_s=STOP_GRACE_S)}")
        code = program.wait()
        if not stopped:
            say(f"{command[0]} exited with code {code} before an iket-tui agent started in it")
        _report_output(program, code, show_tail=not stopped)
        return 128 + stopped[0] if stopped else (code or 0)
    target = _Target(str(path), args, record, host=host, port=port, program=program)
    try:
        _listen(target.server)
    finally:
        target.stop()
        if program.returncode is None:
            say(f"the program (pid {program.pid}) was still running: {program.stop(grace_s=STOP_GRACE_S)}")
        code = program.wait()
        _report_output(program, code)
    return code or 0


class _Target:
    """A live target under serve: one connection of serve's own keeps its recording, so that a
    tab opened after the target exits replays it; until then each tab attaches to ``target``
    (a socket path here, or ``HOST:PID``: then serve and every tab each reach it through ssh;
    or several targets, whose source ``source_of`` makes from the recording and the filters)."""

    def __init__(
        self,
        target: str | list[str],
        args: argparse.Namespace,
        record: Path | None,
        *,
        host: str,
        port: int,
        program: LaunchedProgram | None = None,
        source_of: Callable[[Path, dict[str, Any]], LiveSource] | None = None,
    ) -> None:
        self._kept = record
        self._stopping = False
        if record is None:
            fd, name = tempfile.mkstemp(prefix="iket-tui-serve-", suffix=".msgpack")
            os.close(fd)
            record = Path(name)
        self.recording = record
        self._ui = _ui_options(args)
        self._program = program
        filters = filters_of(args)
        retry: dict[str, Any] = {"connect_retry_s": 5.0} if program is not None else {}
        targets = [target] if isinstance(target, str) else target
        self.source: LiveSource
        if source_of is not None:
            self.source = source_of(record, filters)
        else:
            self.source = target_source(targets[0], start_agent=False, record_to=record, filters=filters, **retry)
        try:
            self.source.connect()
        except BaseException:
            self._drop_recording()
            raise
        self.who = self.source.who
        self.server = _make_server(
            ["attach", *targets, *self._ui, *_filter_options(filters)],
            host=host,
            port=port,
            title=f"iket-tui {self.source.description}",
            what=f"each browser tab attaches to {self.who}",
        )
        self._follower = threading.Thread(target=self._follow, name="iket-tui-serve-recorder", daemon=True)
        self._follower.start()

    def _follow(self) -> None:
        lost: dict[str, bool] = {}  # the machines of a job across machines known lost
        first = True
        for batch in self.source.batches():
            for note in batch.notes:
                say(note)
            for machine in batch.hosts or ():
                say_host(machine, lost, first=first)
            first = first and batch.hosts is None
        if self.source.error and not self._stopping:
            say(self.source.error)
        if self._stopping:
            return
        ended = f"{self.who} exited"
        if self._program is not None:
            ended = f"{self._program.argv[0]} exited with code {self._program.wait()}"
        self.server.command = _session_command(["replay", str(self.recording), "--speed", "max", *self._ui])
        say(f"{ended}; tabs open now keep their view, and a new tab replays the recording")

    def stop(self) -> None:
        """Close serve's connection and its recording; say where the recording is if it is kept."""
        self._stopping = True
        self.source.close_and_wait("serve stopped")
        self._follower.join(timeout=STOP_GRACE_S)
        recorder = self.source.recorder
        if self._kept is not None and recorder is not None:
            say(f"recorded {recorder.messages} messages to {recorder.path}")
        self._drop_recording()

    def _drop_recording(self) -> None:
        if self._kept is None:
            with contextlib.suppress(OSError):
                self.recording.unlink()


def _ui_options(args: argparse.Namespace) -> list[str]:
    return [
        "--stuck-after",
        str(args.stuck_after),
        "--kernel-stuck-after",
        str(args.kernel_stuck_after),
        "--max-passes",
        str(args.max_passes),
    ]


def _filter_options(filters: dict[str, Any]) -> list[str]:
    """The ``--passes`` and ``--depth`` options that ask an agent for ``filters`` again: each tab
    shows what serve's own connection records, and a tab opened after the target exits replays
    that recording."""
    options = [word for glob in filters.get("passes", ()) for word in ("--passes", glob)]
    if "depth" in filters:
        options += ["--depth", str(filters["depth"])]
    return options


def _session_command(argv: list[str]) -> str:
    """The shell command textual-serve runs for each browser tab: this iket-tui, in the same
    Python, in place of the shell (so that stopping the tab stops the app)."""
    return "exec " + shlex.join([sys.executable, "-m", "iket_tui", *argv])


def _make_server(argv: list[str], *, host: str, port: int, title: str, what: str) -> BrowserServer:
    from iket_tui.cli.browser_server import BrowserServer

    return BrowserServer(_session_command(argv), host=host, port=port, title=title, what=what)


def _listen(server: BrowserServer) -> None:
    """Serve until Ctrl-C or SIGTERM, after one line saying where and what."""
    from iket_tui.cli.browser_server import is_loopback

    _check_port(server.host, server.port)
    if not is_loopback(server.host):
        say(f"listening on {server.host}, not loopback: anyone who can reach port {server.port} here can drive the app")
    try:
        server.serve()
    except OSError as exc:
        raise UsageError(f"cannot listen on {server.host}:{server.port}: {exc.strerror or exc}") from None


def _check_port(host: str, port: int) -> None:
    """Fail in one line when the address cannot be listened on (a port in use, an unknown host)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise UsageError(f"cannot listen on {host}: {exc.strerror}") from None
    family, kind, proto, _name, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 < value < 65536:
        raise argparse.ArgumentTypeError(f"a port is between 1 and 65535: {text!r}")
    return value
