"""The commands on a live program: run (start it under the agent), attach, record, and demo."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from iket_tui.cli.errors import (
    EXIT_BAD_INPUT,
    UsageError,
    check_stdout_takes,
    check_writable,
    reader_of,
    say,
    shown,
)
from iket_tui.cli.files import replay
from iket_tui.cli.filters import filters_of
from iket_tui.cli.show import require_terminal, show
from iket_tui.cli.signals import watch_signals
from iket_tui.cli.targets import job_source, job_targets, target_socket, target_source
from iket_tui.demo.sample import NAME as SAMPLE_NAME
from iket_tui.demo.sample import sample_recording
from iket_tui.durations import duration
from iket_tui.endpoints import NoAgentError, list_endpoints, resolve_target
from iket_tui.outputs import STDOUT
from iket_tui.sources.base import HostState, SourceError
from iket_tui.sources.descendants import agents_below
from iket_tui.sources.launch import LaunchedProgram
from iket_tui.sources.merged import ProcessStreams
from iket_tui.sources.socket import SocketSource

LiveSource = SocketSource | ProcessStreams
"""One process's agent, or the agents of several merged into one stream."""
CHILD_WAIT_S = 10.0
"""How long each child of a program ``run`` follows waits for the UI to attach (see the agent's
``IKET_TUI_CHILD_WAIT``), so that nothing of a short-lived worker is missed."""

STOP_GRACE_S = 5.0
DEMO_MODULE = "iket_tui.demo.program"
TVM_DEMO_MODULE = "iket_tui.demo.tvm_program"
DEMO_STUCK_AFTER_S = 5.0
"""The demo's --stuck-after: its stuck compile is marked stuck within seconds."""
DEMO_TOUR = ("--hang", "--stay")
"""What the live demo's program is asked for under the UI: a compile stuck until aborted, and a
program that lives until the UI closes, so that every key can be tried on a live target."""
DEMO_HINT = (
    "stuck_gemm is stuck in demo.WaitForAbort: on its row, i shows the IR it was given, R writes a reproducer,"
    " A aborts it (the program lives on). S: stacks (n adds native ones). layout_conflict and nvcc_error fail:"
    " their details say how to reproduce them. T: timing, K: kernels, ?: every key."
)
"""What the live demo suggests trying, as the UI starts."""
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def cmd_run(args: argparse.Namespace) -> int:
    """Start a program with the agent and watch it, in the UI or (``--no-ui``) only recording;
    ends with the program's exit code, or 128 + the signal that stopped it."""
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise UsageError("run needs a command: iket-tui run [OPTIONS] -- CMD [ARGS...]")
    if args.record is not None:
        check_writable(args.record)
    follow = not getattr(args, "no_follow", False)
    by_rank = getattr(args, "ranks", False)
    if by_rank and not follow:
        raise UsageError("--ranks watches the ranks the program starts: it cannot go with --no-follow")
    if not args.no_ui:
        require_terminal()  # before the program starts, not once it has run
    with reader_of(args.record):  # a FIFO that nobody reads is refused before the program starts
        return _start(args, command, follow=follow, by_rank=by_rank)


def _start(args: argparse.Namespace, command: list[str], *, follow: bool, by_rank: bool) -> int:
    """``run`` once its arguments are known to be good: start the program and watch it."""
    agent_env = _kernel_env(args)
    if follow:
        agent_env["IKET_TUI_CHILD_WAIT"] = f"{CHILD_WAIT_S:g}"
    program = LaunchedProgram(command, log_output=not args.no_ui, agent_env=agent_env)
    stopped: list[int] = []
    stop = threading.Event()

    def on_signal(signum: int) -> None:
        stopped.append(signum)
        stop.set()

    def on_slow() -> None:
        say(f"waiting for the iket-tui agent in {command[0]} (pid {program.pid}) or a process it starts ...")

    with watch_signals(on_signal, STOP_SIGNALS):
        path = program.find_agent(stop, on_slow=on_slow)
    if stopped:
        say(f"interrupted; the program (pid {program.pid}): {program.stop(grace_s=STOP_GRACE_S)}")
        _report_output(program, program.wait(), show_tail=False)
        return 128 + stopped[0]
    if path is None:
        code = _exit_code(program)
        say(f"{command[0]} exited with code {code} before an iket-tui agent started in it")
        _report_output(program, code)
        return code
    source: LiveSource
    if follow:
        source = ProcessStreams(
            [path],
            record_to=args.record,
            find=lambda: [found.path for found in agents_below(program.pid)],
            following=lambda: program.returncode is None,
            description=f"pid {program.pid}: {' '.join(command)}",
            reader_options={"connect_retry_s": 5.0, "filters": filters_of(args)},
        )
    else:
        source = SocketSource(path, record_to=args.record, connect_retry_s=5.0, filters=filters_of(args))
    if args.no_ui:
        return _run_headless(program, source)
    return _run_with_ui(
        program,
        source,
        args.stuck_after,
        getattr(args, "sample_kernels", None),
        by_rank=by_rank,
        hint=getattr(args, "hint", None),
        stays=getattr(args, "program_stays", False),
        kernel_stuck_after_s=args.kernel_stuck_after,
        max_passes=args.max_passes,
        recording=args.record,
    )


def cmd_attach(args: argparse.Namespace) -> int:
    """Watch a program that already runs the agent (or gets one started in it), until the UI closes;
    exit code 2 when its recording stopped early (the disk filled up: the header said so)."""
    if args.record is not None:
        check_writable(args.record)
    source = _attached(args)
    try:
        source.connect()
        code, signum = show(
            source,
            args.stuck_after,
            by_rank=isinstance(source, ProcessStreams) and source.by_rank,
            kernel_stuck_after_s=args.kernel_stuck_after,
            max_passes=args.max_passes,
            recording=args.record,
        )
    finally:
        source.close_and_wait("the UI was closed")
    stopped_recording = _report_recording(source)
    if source.error:
        raise SourceError(source.error)
    if signum is not None:
        return 128 + signum
    return EXIT_BAD_INPUT if stopped_recording else code


def _attached(args: argparse.Namespace) -> LiveSource:
    """The source ``attach`` watches: one TARGET's agent, or several merged (``PID PID ...``,
    or ``--all``: every live agent of this user, and those that start while it watches)."""
    targets: list[str] = list(args.target)
    options: dict[str, Any] = {"record_to": args.record, "filters": filters_of(args)}
    if args.all:
        if targets:
            raise UsageError("attach --all watches every agent of this user: name no TARGET with it")
        found = [endpoint.path for endpoint in list_endpoints(listening_only=True)]
        if not found:
            raise SourceError(
                "no live iket-tui agents of this user (start one with `iket-tui run -- CMD` or IKET_TUI=1)"
            )
        return ProcessStreams(
            found,
            record_to=args.record,
            find=lambda: [endpoint.path for endpoint in list_endpoints()],
            following=lambda: True,
            description="every agent of this user",
            reader_options={"filters": filters_of(args)},
        )
    job = job_targets(targets, getattr(args, "hosts", None))
    if job.across_hosts:  # every agent of each host through one ssh connection per host
        local = [target_socket(target, start_agent=False) for target in job.local]
        return job_source(job, record_to=args.record, filters=filters_of(args), local_paths=local)
    if not targets:
        raise UsageError("attach needs a TARGET (a pid, a socket path or HOST:PID), several pids, or --all")
    if len(targets) == 1:
        return target_source(targets[0], start_agent=True, before_start=require_terminal, **options)
    if len(set(targets)) != len(targets):
        raise UsageError("a TARGET is named twice: name each process once")
    without_agent = []
    for target in targets:  # every target checked before an agent is started in any of them
        try:
            resolve_target(target)
        except NoAgentError:
            without_agent.append(target)
    paths = [
        target_socket(target, start_agent=target in without_agent, before_start=require_terminal) for target in targets
    ]
    return ProcessStreams(
        paths,
        record_to=args.record,
        description="pids " + ", ".join(targets),
        reader_options={"filters": filters_of(args)},
    )


def cmd_record(args: argparse.Namespace) -> int:
    """Record a running agent's stream to a file without the UI, until the target exits, the
    duration passes, a signal stops it or the file cannot take more (the disk is full: one line
    says where it was cut, exit code 2); says how many messages it wrote and why it stopped."""
    to_stdout = args.output == STDOUT
    check_writable(args.output, stdout=True)
    if to_stdout:
        check_stdout_takes("a recording", "| ssh host 'cat > run.msgpack'")
    source = _recorded(args)
    stopped: list[int] = []
    timed_out = threading.Event()

    def on_signal(signum: int) -> None:
        stopped.append(signum)
        source.close("interrupted" if signum == signal.SIGINT else "terminated")

    def on_duration() -> None:
        timed_out.set()
        source.close("duration reached")

    started = time.monotonic()
    with watch_signals(on_signal, STOP_SIGNALS):
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
            _follow(source, stop_recording=True)
        finally:
            if timer is not None:
                timer.cancel()
            source.close_and_wait()
    full = _recording_stopped(source)
    if stopped:
        why = "interrupted" if stopped[0] == signal.SIGINT else "terminated"
    elif timed_out.is_set():
        why = f"{args.duration:g} s elapsed"
    elif full:
        why = "recording stopped"
    elif source.error:
        why = "failed"
    else:
        why = "every target exited" if isinstance(source, ProcessStreams) else "the target exited"
    recorder = source.recorder
    count = recorder.messages if recorder is not None else 0
    dropped = f"; the agent dropped {recorder.dropped} events" if recorder is not None and recorder.dropped else ""
    took = duration(int((time.monotonic() - started) * 1e9))
    summary = f"recorded {count} messages from {source.who} to {shown(args.output)} in {took} ({why}){dropped}"
    if to_stdout:
        say(summary)  # the recording has standard output
    else:
        print(summary, flush=True)
    if full and stopped:
        say(full)
    elif full:
        raise SourceError(full)
    if source.error:
        raise SourceError(source.error)
    return 128 + stopped[0] if stopped else 0


def _recorded(args: argparse.Namespace) -> LiveSource:
    """The source ``record`` writes: one TARGET's agent, or as attach takes them, several
    processes here and on other machines merged, each kept apart in the file."""
    targets: list[str] = list(args.target)
    filters = filters_of(args)
    job = job_targets(targets, getattr(args, "hosts", None))
    if job.across_hosts:
        local = [target_socket(target, start_agent=args.start_agent) for target in job.local]
        return job_source(job, record_to=args.output, filters=filters, local_paths=local)
    if not targets:
        raise UsageError("record needs a TARGET (a pid, a socket path or HOST:PID), several pids, or --hosts FILE")
    if len(targets) == 1:
        return target_source(targets[0], start_agent=args.start_agent, record_to=args.output, filters=filters)
    if len(set(targets)) != len(targets):
        raise UsageError("a TARGET is named twice: name each process once")
    paths = [target_socket(target, start_agent=args.start_agent) for target in targets]
    return ProcessStreams(
        paths, record_to=args.output, description="pids " + ", ".join(targets), reader_options={"filters": filters}
    )


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the bundled TileLang program as ``run`` would, with sample kernels to show where
    this machine has no GPU; under the UI, with a compile stuck until aborted, the program living
    until the UI closes, and a hint of what to try; without TileLang (or with ``--recording``), replay the recording
    of that program on an H200 instead."""
    if args.tvm:
        if importlib.util.find_spec("tvm") is None or importlib.util.find_spec("tilelang") is not None:
            raise UsageError(
                "the TVM demo needs Apache TVM without TileLang: pip install 'iket-tui[tvm]' in a venv of its own"
            )
        args.command, args.sample_kernels = [sys.executable, "-m", TVM_DEMO_MODULE], None
        return cmd_run(args)
    live = not args.recording and importlib.util.find_spec("tilelang") is not None
    sample = sample_recording()
    if live:
        tour = () if args.no_ui else DEMO_TOUR  # without the UI, the program must end by itself
        args.command = [sys.executable, "-m", DEMO_MODULE, *tour]
        args.sample_kernels = sample  # kernels to show where this machine has no GPU
        args.hint, args.program_stays = (None, False) if args.no_ui else (DEMO_HINT, True)
        if args.record is None and not args.no_ui:
            args.record = _demo_recording()
        return cmd_run(args)
    why = "" if args.recording else "TileLang is not installed, so "
    if args.record is not None or args.no_ui:
        raise UsageError(
            f"{why}the demo replays a recording, which --record and --no-ui have nothing to add to: "
            "they need the live demo (pip install 'iket-tui[tilelang]')"
        )
    if sample is None:
        raise UsageError(f"{why}the demo replays its H200 recording, which this install lacks ({SAMPLE_NAME})")
    code = replay(
        sample,
        speed=1.0,
        paused=False,
        stuck_after_s=args.stuck_after,
        kernel_stuck_after_s=args.kernel_stuck_after,
        max_passes=args.max_passes,
    )
    if not args.recording:
        say("that was the demo recorded on an H200: pip install 'iket-tui[tilelang]' runs it live here")
    return code


def _demo_recording() -> Path:
    """A new file in the temporary directory for the live demo's recording, which ``iket-tui repro``
    needs for the reproducer of a failed compile (its name is said as the demo ends)."""
    fd, name = tempfile.mkstemp(prefix="iket-tui-demo-", suffix=".msgpack")
    os.close(fd)
    return Path(name)


def _kernel_env(args: argparse.Namespace) -> dict[str, str]:
    """The agent's kernel tracing settings for the program's environment (see the agent's autostart)."""
    if not args.kernels:
        return {}
    env = {"IKET_TUI_KERNELS": "1"}
    if args.drain_hz is not None:
        env["IKET_TUI_DRAIN_HZ"] = f"{args.drain_hz:g}"
    if args.ring_chunks is not None:
        env["IKET_TUI_RING_CHUNKS"] = str(args.ring_chunks)
    if args.ring_size is not None:
        env["IKET_TUI_RING_SIZE"] = str(args.ring_size)
    return env


def _run_headless(program: LaunchedProgram, source: LiveSource) -> int:
    stopped: list[int] = []

    def on_signal(signum: int) -> None:
        stopped.append(signum)
        if signum != signal.SIGINT:
            program.send(signum)
        source.close("interrupted" if signum == signal.SIGINT else "terminated")

    with watch_signals(on_signal, STOP_SIGNALS):
        try:
            source.connect()
        except SourceError as exc:
            if not stopped:
                say(str(exc))
        else:
            _follow(source, say_recording_stopped=True)
    source.close_and_wait()
    if source.error:
        say(source.error)
    _report_recording(source, stop_said=True)
    if stopped:
        if program.wait(STOP_GRACE_S) is None:
            say(f"the program (pid {program.pid}) still runs: {program.stop(grace_s=STOP_GRACE_S)}")
        program.wait()
        return 128 + stopped[0]
    with watch_signals(program.send, STOP_SIGNALS):
        return _exit_code(program)


def _run_with_ui(
    program: LaunchedProgram,
    source: LiveSource,
    stuck_after_s: float,
    sample_kernels: Path | None = None,
    *,
    by_rank: bool = False,
    hint: str | None = None,
    stays: bool = False,
    kernel_stuck_after_s: float = 2.0,
    max_passes: int | None = None,
    recording: Path | None = None,
) -> int:
    try:
        _code, signum = show(
            source,
            stuck_after_s,
            sample_kernels=sample_kernels,
            by_rank=by_rank,
            hint=hint,
            kernel_stuck_after_s=kernel_stuck_after_s,
            max_passes=max_passes,
            recording=recording,
        )
    finally:
        source.close_and_wait("the UI was closed")
    stopped = program.returncode is None
    if stopped and stays:
        say(f"the demo program (pid {program.pid}) ends with the UI: {program.stop(grace_s=STOP_GRACE_S)}")
    elif stopped:
        say(f"the program (pid {program.pid}) was still running: {program.stop(grace_s=STOP_GRACE_S)}")
    code = _exit_code(program)
    if stopped and stays:
        code = 0  # the program was waiting for the UI to close: its end is the demo's end
    if source.error:
        say(source.error)
    _report_recording(source)
    _report_output(program, code, show_tail=not stopped)
    return 128 + signum if signum is not None else code


def _follow(source: LiveSource, *, stop_recording: bool = False, say_recording_stopped: bool = False) -> None:
    """Read a source headless until it ends, saying its notes (its error is left to the caller).

    When its recording stops (the disk is full), ``stop_recording`` ends the reading there (the
    recording was the point; the caller says why), and ``say_recording_stopped`` says why at
    once and reads on (the program goes on too).
    """
    lost: dict[str, bool] = {}  # the hosts known lost
    first = True
    for batch in source.batches():
        for note in batch.notes:
            say(note)
        for host in batch.hosts or ():
            say_host(host, lost, first=first)
        first = first and batch.hosts is None
        if batch.recording_stopped is not None:
            if say_recording_stopped:
                say(batch.recording_stopped)
            if stop_recording:
                source.close("recording stopped")


def say_host(host: HostState, lost: dict[str, bool], *, first: bool) -> None:
    """Say a machine of a job across machines lost, once, and back, where no header shows it;
    one lost in the ``first`` state said was said as the stream began (it could not be reached)."""
    if host.lost_at_s is None:
        if lost.pop(host.host, False):
            say(f"{host.host}: back; its agents' streams taken up again")
        return
    if host.host not in lost and not first:
        say(f"{host.host}: lost ({host.why or 'the connection was lost'}); logging in again while the others go on")
    lost[host.host] = True


def _exit_code(program: LaunchedProgram) -> int:
    code = program.wait()
    assert code is not None
    return code


def _report_recording(source: LiveSource, *, stop_said: bool = False) -> str | None:
    """Say how many messages were recorded, or instead why recording stopped early (the disk
    is full) where that was not said yet (``stop_said``, or it is the source's error, which
    the caller says); returns that reason."""
    recorder = source.recorder
    if recorder is None:
        return None
    if recorder.stopped is None or stop_said:
        say(f"recorded {recorder.messages} messages to {recorder.path}")
    elif recorder.stopped != source.error:
        say(recorder.stopped)
    return recorder.stopped


def _recording_stopped(source: LiveSource) -> str | None:
    """Why the source's recording stopped before the stream ended (the disk is full), if it did."""
    return source.recorder.stopped if source.recorder is not None else None


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
        say(f"the program exited with code {code}; the end of its output ({log}):")
        for line in program.log_tail():
            print(f"  {line}", file=sys.stderr)
    else:
        say(f"the program's output is in {log}")
