"""The ``iket-tui`` command line: run, attach, record, replay, dump, export, repro, stacks, ir, ls, demo.

Every bad input ends in one line on stderr (``iket-tui: ...``) and exit code 2, never a
traceback; Ctrl-C ends with 130 and leaves any recording valid. Textual is imported only by
the commands that show the UI.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from iket_tui import __version__
from iket_tui.endpoints import EndpointError, list_endpoints, process_argv, resolve_target, runtime_dir, uptime_seconds
from iket_tui.sources.base import EventSource, SourceError
from iket_tui.sources.launch import LaunchedProgram
from iket_tui.sources.lines import KernelEvents, TextLines, json_line
from iket_tui.sources.reading import RecordingReader, recording_notes
from iket_tui.sources.replay import RecordingSource
from iket_tui.sources.socket import SocketSource

if TYPE_CHECKING:
    from textual.app import App

PROG = "iket-tui"
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 128 + signal.SIGINT
STOP_GRACE_S = 5.0
DEMO_MODULE = "iket_tui.demo.program"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
UI_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class UsageError(Exception):
    """The command line asks for something that cannot be done; a one-line message."""


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns the process exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 0
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:
        _say("choose a command: run, attach, record, replay, dump, export, stacks, ir, ls or demo (see --help)")
        return EXIT_BAD_INPUT
    try:
        return handler(args)
    except (SourceError, EndpointError, UsageError) as exc:
        _say(str(exc))
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except Exception as exc:
        if os.environ.get("IKET_TUI_DEBUG"):
            raise
        _say(f"internal error: {type(exc).__name__}: {exc} (IKET_TUI_DEBUG=1 shows the traceback)")
        return 1


# -- commands -------------------------------------------------------------------------------


def _cmd_run(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise UsageError("run needs a command: iket-tui run [OPTIONS] -- CMD [ARGS...]")
    if args.record is not None:
        _check_writable(args.record)
    program = LaunchedProgram(command, log_output=not args.no_ui, agent_env=_kernel_env(args))
    stopped: list[int] = []
    stop = threading.Event()

    def on_signal(signum: int) -> None:
        stopped.append(signum)
        stop.set()

    def on_slow() -> None:
        _say(f"waiting for the iket-tui agent in {command[0]} (pid {program.pid}) or a process it starts ...")

    with _watch_signals(on_signal, STOP_SIGNALS):
        path = program.find_agent(stop, on_slow=on_slow)
    if stopped:
        _say(f"interrupted; the program (pid {program.pid}): {program.stop(grace_s=STOP_GRACE_S)}")
        _report_output(program, program.wait(), show_tail=False)
        return 128 + stopped[0]
    if path is None:
        code = _exit_code(program)
        _say(f"{command[0]} exited with code {code} before an iket-tui agent started in it")
        _report_output(program, code)
        return code
    source = SocketSource(path, record_to=args.record, connect_retry_s=5.0)
    if args.no_ui:
        return _run_headless(program, source)
    return _run_with_ui(program, source, args.stuck_after, getattr(args, "sample_kernels", None))


def _kernel_env(args: argparse.Namespace) -> dict[str, str]:
    """The agent's kernel tracing settings for the program's environment (see the agent's autostart)."""
    if not args.kernels:
        return {}
    env = {"IKET_TUI_KERNELS": "1"}
    if args.drain_hz is not None:
        env["IKET_TUI_DRAIN_HZ"] = f"{args.drain_hz:g}"
    if args.ring_chunks is not None:
        env["IKET_TUI_RING_CHUNKS"] = str(args.ring_chunks)
    return env


def _run_headless(program: LaunchedProgram, source: SocketSource) -> int:
    stopped: list[int] = []

    def on_signal(signum: int) -> None:
        stopped.append(signum)
        if signum != signal.SIGINT:
            program.send(signum)
        source.close("interrupted" if signum == signal.SIGINT else "terminated")

    with _watch_signals(on_signal, STOP_SIGNALS):
        try:
            source.connect()
        except SourceError as exc:
            if not stopped:
                _say(str(exc))
        else:
            _follow(source)
    source.close_and_wait()
    if source.error:
        _say(source.error)
    _report_recording(source)
    if stopped:
        if program.wait(STOP_GRACE_S) is None:
            _say(f"the program (pid {program.pid}) still runs: {program.stop(grace_s=STOP_GRACE_S)}")
        program.wait()
        return 128 + stopped[0]
    with _watch_signals(program.send, STOP_SIGNALS):
        return _exit_code(program)


def _run_with_ui(
    program: LaunchedProgram, source: SocketSource, stuck_after_s: float, sample_kernels: Path | None = None
) -> int:
    try:
        _code, signum = _show(source, stuck_after_s, sample_kernels=sample_kernels)
    finally:
        source.close_and_wait("the UI was closed")
    stopped = program.returncode is None
    if stopped:
        _say(f"the program (pid {program.pid}) was still running: {program.stop(grace_s=STOP_GRACE_S)}")
    code = _exit_code(program)
    if source.error:
        _say(source.error)
    _report_recording(source)
    _report_output(program, code, show_tail=not stopped)
    return 128 + signum if signum is not None else code


def _target_socket(target: str, *, start_agent: bool) -> Path:
    """The socket of a pid or socket path; with ``start_agent`` a Python process without the
    agent gets one started in it."""
    try:
        return resolve_target(target)
    except EndpointError as exc:
        if not target.isdigit() or "runs no iket-tui agent" not in str(exc):
            raise
        if not start_agent:
            raise EndpointError(f"{exc}; `iket-tui attach {target}` or --start-agent starts one in it") from None
    from iket_tui.sources.inject import inject_agent

    return inject_agent(
        int(target), on_start=lambda: _say(f"process {target} runs no iket-tui agent: starting one in it ...")
    )


def _cmd_attach(args: argparse.Namespace) -> int:
    if args.record is not None:
        _check_writable(args.record)
    source = SocketSource(_target_socket(args.target, start_agent=True), record_to=args.record)
    try:
        source.connect()
        code, signum = _show(source, args.stuck_after)
    finally:
        source.close_and_wait("the UI was closed")
    _report_recording(source)
    if source.error:
        raise SourceError(source.error)
    return 128 + signum if signum is not None else code


def _cmd_stacks(args: argparse.Namespace) -> int:
    from iket_tui.sources.stacks import fetch_stacks, native_stacks, stack_lines

    source = SocketSource(_target_socket(args.target, start_agent=args.start_agent))
    try:
        hello = source.connect()
        response = fetch_stacks(source, timeout_s=args.timeout)
    finally:
        source.close_and_wait("done")
    print(f"{source.description}: Python stacks")
    print("\n".join(stack_lines(response, include_agent=args.all)).rstrip())
    if not args.native:
        return 0
    native = native_stacks(int(hello["pid"]))
    if native.text is None:
        raise UsageError(str(native.why))
    print(f"\n{source.description}: native stacks (py-spy)")
    print(native.text.rstrip())
    return 0


def _cmd_ir(args: argparse.Namespace) -> int:
    from iket_tui.sources.ir import view_text

    source = SocketSource(_target_socket(args.target, start_agent=args.start_agent))
    try:
        source.connect()
        text = view_text(source, args.compile, args.seq, args.view)
    finally:
        source.close_and_wait("done")
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def _cmd_repro(args: argparse.Namespace) -> int:
    from iket_tui.repro import ReproError, write

    reader = RecordingReader(args.file)
    messages = list(reader)
    try:
        found = write(messages, args.output, args.compile, source=reader.info.source)
    except ReproError as exc:
        raise UsageError(f"{args.file}: {exc}") from None
    except OSError as exc:
        raise UsageError(f"{args.output}: {exc.strerror or type(exc).__name__}") from None
    _say(f"wrote a reproducer of compile {found.compile} ({found.name}) to {found.directory}: {found.note}")
    return 0 if found.runnable else 2


def _cmd_record(args: argparse.Namespace) -> int:
    _check_writable(args.output)
    source = SocketSource(_target_socket(args.target, start_agent=args.start_agent), record_to=args.output)
    stopped: list[int] = []
    timed_out = threading.Event()

    def on_signal(signum: int) -> None:
        stopped.append(signum)
        source.close("interrupted" if signum == signal.SIGINT else "terminated")

    def on_duration() -> None:
        timed_out.set()
        source.close("duration reached")

    started = time.monotonic()
    with _watch_signals(on_signal, STOP_SIGNALS):
        try:
            source.connect()
        except SourceError:
            if stopped:
                return 128 + stopped[0]
            raise
        timer = threading.Timer(args.duration, on_duration) if args.duration is not None else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        try:
            _follow(source)
        finally:
            if timer is not None:
                timer.cancel()
            source.close_and_wait()
    if stopped:
        why = "interrupted" if stopped[0] == signal.SIGINT else "terminated"
    elif timed_out.is_set():
        why = f"{args.duration:g} s elapsed"
    elif source.error:
        why = "failed"
    else:
        why = "the target exited"
    recorder = source.recorder
    count = recorder.messages if recorder is not None else 0
    dropped = f"; the agent dropped {recorder.dropped} events" if recorder is not None and recorder.dropped else ""
    print(
        f"recorded {count} messages from {source.who} to {args.output} in {time.monotonic() - started:.1f} s"
        f" ({why}){dropped}",
        flush=True,
    )
    if source.error:
        raise SourceError(source.error)
    return 128 + stopped[0] if stopped else 0


def _cmd_replay(args: argparse.Namespace) -> int:
    source = RecordingSource(args.file, speed=args.speed, start_paused=args.paused)
    source.open()
    try:
        code, signum = _show(source, args.stuck_after)
    finally:
        source.close()
    if source.error:
        raise SourceError(source.error)
    return 128 + signum if signum is not None else code


def _cmd_dump(args: argparse.Namespace) -> int:
    reader = RecordingReader(args.file)
    line = json_line if args.format == "jsonl" else TextLines().line
    expander = KernelEvents() if args.records else None
    out = sys.stdout
    for msg in reader:
        out.write(line(msg) + "\n")
        if expander is not None and isinstance(msg, dict):
            for event in expander.events(msg):
                out.write(line(event) + "\n")
    out.flush()
    for note in recording_notes(reader.info, verb="read"):
        _say(f"{args.file}: {note}")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    import json

    from iket_tui.export import ExportError, events_in, export, recording_tree

    _check_writable(args.output)
    reader = RecordingReader(args.file)
    tree = recording_tree(reader)
    try:
        document = export(tree, args.format, name=args.file.name)
    except ExportError as exc:
        raise UsageError(f"{args.file}: {exc}") from None
    try:
        with open(args.output, "w", encoding="utf-8") as out:
            json.dump(document, out, separators=(",", ":"), allow_nan=False)
    except OSError as exc:
        raise UsageError(f"{args.output}: {exc.strerror or type(exc).__name__}") from None
    for note in recording_notes(reader.info, verb="read"):
        _say(f"{args.file}: {note}")
    _say(f"wrote {events_in(document)} events to {args.output}")
    return 0


def _cmd_ls(args: argparse.Namespace) -> int:
    endpoints = list_endpoints()
    if not endpoints:
        print(f"no live iket-tui agents of this user (in {runtime_dir()})")
        return 0
    rows = [("PID", "UPTIME", "SOCKET", "COMMAND")]
    for endpoint in endpoints:
        command = " ".join(process_argv(endpoint.pid)) or "?"
        uptime = _uptime(uptime_seconds(endpoint.start_time))
        rows.append((str(endpoint.pid), uptime, str(endpoint.path), command))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for pid, uptime, path, command in rows:
        print(f"{pid:>{widths[0]}}  {uptime:>{widths[1]}}  {path:<{widths[2]}}  {command}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("tilelang") is None:
        raise UsageError("the demo needs TileLang: install the tilelang extra (pip install 'iket-tui[tilelang]')")
    from iket_tui.demo.sample import sample_recording

    args.command = [sys.executable, "-m", DEMO_MODULE]
    args.sample_kernels = sample_recording()  # kernels to show where this machine has no GPU
    return _cmd_run(args)


# -- helpers --------------------------------------------------------------------------------


def _show(source: EventSource, stuck_after_s: float, *, sample_kernels: Path | None = None) -> tuple[int, int | None]:
    """The live UI over ``source`` until the user quits, or a signal (SIGINT, SIGTERM, SIGHUP)
    asks it to close; its exit code and that signal."""
    try:
        from iket_tui.ui.app import IketApp
    except ImportError as exc:
        raise UsageError(f"the UI cannot start: {exc}") from None
    app = IketApp(source, stuck_after_s=stuck_after_s, follow=True, sample_kernels=sample_kernels)
    caught: list[int] = []
    ended = threading.Event()

    def on_signal(signum: int) -> None:
        if not caught:
            caught.append(signum)
            _close_app(app, source, ended)

    with _watch_signals(on_signal, UI_STOP_SIGNALS):
        try:
            code = app.run()
        finally:
            ended.set()
    return (code if code is not None else 0), (caught[0] if caught else None)


def _close_app(app: App[int], source: EventSource, ended: threading.Event) -> None:
    """Close the source (so the app's reader thread ends), then the app; ask again every
    second until it has ended, since a request that comes while it is still starting is lost."""
    source.close()
    while not ended.is_set():
        with contextlib.suppress(Exception):  # the app may not run yet, or not any more
            app.call_from_thread(app.exit)
        ended.wait(1.0)


def _follow(source: SocketSource) -> None:
    """Read a source headless until it ends, saying its notes (its error is left to the caller)."""
    for batch in source.batches():
        for note in batch.notes:
            _say(note)


def _exit_code(program: LaunchedProgram) -> int:
    code = program.wait()
    assert code is not None
    return code


def _report_recording(source: SocketSource) -> None:
    if source.recorder is not None:
        _say(f"recorded {source.recorder.messages} messages to {source.recorder.path}")


def _report_output(program: LaunchedProgram, code: int | None, *, show_tail: bool = True) -> None:
    """Where the program's output went, and its last lines if it failed on its own."""
    log = program.log_path
    if log is None:
        return
    if program.log_is_empty():
        with contextlib.suppress(OSError):
            log.unlink()
        return
    if code and show_tail:
        _say(f"the program exited with code {code}; the end of its output ({log}):")
        for line in program.log_tail():
            print(f"  {line}", file=sys.stderr)
    else:
        _say(f"the program's output is in {log}")


def _check_writable(path: Path) -> None:
    if path.is_dir():
        raise UsageError(f"{path}: is a directory")
    parent = path.parent
    if not parent.is_dir():
        raise UsageError(f"{path}: no such directory {parent}")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"{path}: permission denied")


@contextlib.contextmanager
def _watch_signals(handler: Callable[[int], None], signals: tuple[signal.Signals, ...]) -> Iterator[None]:
    """For a while, call ``handler(signum)`` on a helper thread when one of ``signals`` arrives.

    The main thread may sit in the UI's event loop, which no Python signal handler wakes when
    the kernel delivers the signal to another thread; the signal's wakeup byte always arrives.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    receive, send = socket.socketpair()
    send.setblocking(False)
    wanted = {int(sig) for sig in signals}

    def watch() -> None:
        while data := receive.recv(64):
            for signum in data:
                if signum in wanted:
                    handler(signum)

    previous = {sig: signal.signal(sig, lambda _signum, _frame: None) for sig in signals}
    previous_fd = signal.set_wakeup_fd(send.fileno(), warn_on_full_buffer=False)
    watcher = threading.Thread(target=watch, name="iket-tui signals", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous_fd)
        for sig, old_handler in previous.items():
            signal.signal(sig, old_handler)
        send.close()
        watcher.join(1.0)
        receive.close()


def _uptime(seconds: float) -> str:
    total = int(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def _say(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


def _silence_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


# -- arguments ------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{PROG}: {message} (see `{self.prog} --help`)\n")


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: {text!r}")
    return value


def _speed(text: str) -> float:
    if text.lower() == "max":
        return 0.0
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a speed (a number, or 0 or 'max' for as fast as possible): {text!r}"
        ) from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"speed must be 0 or more: {text!r}")
    return value


def _drain_hz(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a rate in Hz: {text!r}") from None
    if not 0 < value <= 1000:
        raise argparse.ArgumentTypeError(f"the drain rate must be between 0 and 1000 Hz: {text!r}")
    return value


def _ring_chunks(text: str) -> int:
    from iket_tui.agent.kernel_options import MIN_RING_CHUNKS

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < MIN_RING_CHUNKS or value & (value - 1):
        raise argparse.ArgumentTypeError(f"ring chunks must be a power of two, at least {MIN_RING_CHUNKS}: {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Watch TileLang/TVM compiler passes live, record them, replay them.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    def ui_options(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--stuck-after",
            type=_positive,
            default=30.0,
            metavar="S",
            help="mark a pass stuck once it runs longer than S seconds (default 30)",
        )

    def start_agent(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--start-agent",
            action="store_true",
            help="a Python pid without the agent: start one in it (gdb, or sys.remote_exec), as attach does",
        )

    def kernel_options(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--drain-hz",
            type=_drain_hz,
            metavar="HZ",
            help="with kernel tracing: drain the ring HZ times a second (20)",
        )
        sub.add_argument(
            "--ring-chunks",
            type=_ring_chunks,
            metavar="N",
            help="with kernel tracing: ring chunks per warp slot, a power of two, at least 16 (32)",
        )

    run = commands.add_parser("run", help="start a program with the agent and watch it live")
    run.add_argument("--record", type=Path, metavar="FILE", help="also record the stream to FILE")
    run.add_argument("--no-ui", action="store_true", help="only record (with --record); the program keeps the terminal")
    run.add_argument(
        "--kernels", action="store_true", help="also stream the IKET events of running kernels (kernel tracing)"
    )
    kernel_options(run)
    ui_options(run)
    run.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS...]", help="the program to run")
    run.set_defaults(handler=_cmd_run)

    attach = commands.add_parser("attach", help="watch a program that already runs the agent")
    attach.add_argument("target", metavar="TARGET", help="a pid, or the path of an agent socket")
    attach.add_argument("--record", type=Path, metavar="FILE", help="also record the stream to FILE")
    ui_options(attach)
    attach.set_defaults(handler=_cmd_attach)

    record = commands.add_parser("record", help="record a running agent's stream to a file, without the UI")
    record.add_argument("target", metavar="TARGET", help="a pid, or the path of an agent socket")
    record.add_argument("-o", "--output", type=Path, required=True, metavar="FILE", help="the recording to write")
    record.add_argument("--duration", type=_positive, metavar="SECONDS", help="stop after this long")
    start_agent(record)
    record.set_defaults(handler=_cmd_record)

    replay = commands.add_parser("replay", help="the live UI over a recording")
    replay.add_argument("file", type=Path, metavar="FILE")
    replay.add_argument(
        "--speed", type=_speed, default=1.0, metavar="X", help="playback speed; 0 or 'max' for as fast as possible"
    )
    replay.add_argument("--paused", action="store_true", help="start paused")
    ui_options(replay)
    replay.set_defaults(handler=_cmd_replay)

    dump = commands.add_parser("dump", help="print a recording, one line per message")
    dump.add_argument("file", type=Path, metavar="FILE")
    dump.add_argument("--format", choices=("text", "jsonl"), default="text")
    dump.add_argument(
        "--records", action="store_true", help="also one line per kernel event after each kernel_records batch"
    )
    dump.set_defaults(handler=_cmd_dump)

    export = commands.add_parser(
        "export", help="convert a recording for Perfetto (Chrome trace JSON) or speedscope (pass timings)"
    )
    export.add_argument("file", type=Path, metavar="FILE")
    export.add_argument("-o", "--output", type=Path, required=True, metavar="OUT", help="the file to write")
    export.add_argument("--format", choices=("chrome", "speedscope"), default="chrome")
    export.set_defaults(handler=_cmd_export)

    stacks = commands.add_parser("stacks", help="print the stacks of every thread of a target that runs the agent")
    stacks.add_argument("target", metavar="TARGET", help="a pid, or the path of an agent socket")
    stacks.add_argument("--native", action="store_true", help="also native stacks, through py-spy")
    stacks.add_argument("--all", action="store_true", help="include the threads of iket-tui's own agent")
    stacks.add_argument("--timeout", type=_positive, default=10.0, metavar="S", help="wait for the answer (10)")
    start_agent(stacks)
    stacks.set_defaults(handler=_cmd_stacks)

    ir = commands.add_parser("ir", help="print the IR before or after a pass of a recent compile of a running target")
    ir.add_argument("target", metavar="TARGET", help="a pid, or the path of an agent socket")
    ir.add_argument("--compile", type=int, required=True, metavar="N", help="the compile (its number in the tree)")
    ir.add_argument("--pass", dest="seq", type=int, required=True, metavar="SEQ", help="the pass's sequence number")
    views = ir.add_mutually_exclusive_group()
    views.add_argument("--before", dest="view", action="store_const", const="before", help="the IR it was given")
    views.add_argument("--after", dest="view", action="store_const", const="after", help="the IR it returned")
    views.add_argument("--diff", dest="view", action="store_const", const="diff", help="what it changed (default)")
    start_agent(ir)
    ir.set_defaults(handler=_cmd_ir, view="diff")

    repro = commands.add_parser(
        "repro", help="write a self-contained reproducer for a failed compile (a pass or nvcc) in a recording"
    )
    repro.add_argument("file", type=Path, metavar="FILE")
    repro.add_argument("--compile", type=int, metavar="N", help="the failed compile (default: the first one)")
    repro.add_argument("-o", "--output", type=Path, required=True, metavar="DIR", help="the directory to write")
    repro.set_defaults(handler=_cmd_repro)

    ls = commands.add_parser("ls", help="list the live agents of this user")
    ls.set_defaults(handler=_cmd_ls)

    demo = commands.add_parser("demo", help="run the bundled TileLang program under the UI")
    demo.add_argument("--record", type=Path, metavar="FILE", help="also record the stream to FILE")
    demo.add_argument("--no-ui", action="store_true", help="only record (with --record)")
    demo.add_argument(
        "--no-kernels", dest="kernels", action="store_false", help="do not trace kernels (traced by default)"
    )
    kernel_options(demo)
    ui_options(demo)
    demo.set_defaults(handler=_cmd_demo)
    return parser
