"""The questions put to a live target, answered on stdout: its threads' stacks, a pass's IR, and the live agents."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from iket_tui.cli.errors import UsageError, say
from iket_tui.cli.targets import target_source
from iket_tui.durations import duration
from iket_tui.endpoints import list_endpoints, process_argv, runtime_dir, runtime_dir_problem, uptime_seconds
from iket_tui.sources.base import SourceError
from iket_tui.sources.ssh import NATIVE_HEADING, RemoteTarget, remote_target

if TYPE_CHECKING:
    from iket_tui.sources.py_spy import NativeStacks


def cmd_stacks(args: argparse.Namespace) -> int:
    """Print the Python stacks of every thread of a target (and with ``--native`` its native
    stacks, through py-spy), to see where a compile hangs."""
    from iket_tui.sources.py_spy import NO_PY_SPY, py_spy_path
    from iket_tui.sources.stacks import INNERMOST_FIRST, fetch_stacks, fetch_stacks_and_native, stack_lines

    remote = remote_target(args.target)
    if remote is not None and remote.pid is not None and args.native:
        return _stacks_there(args, remote)  # py-spy must run on the target's machine
    if args.native and remote is None and py_spy_path() is None:
        raise UsageError(NO_PY_SPY)  # said before anything else: what --native asked for cannot come
    as_json = args.format == "json"
    source = target_source(args.target, start_agent=args.start_agent)
    native: NativeStacks | None = None
    no_python: str | None = None
    try:
        try:
            source.connect()
        except SourceError as exc:
            if not (args.native and args.target.isdigit()) or as_json:
                raise
            return _native_only(int(args.target), str(exc), args.timeout)
        if args.native:  # read by the source, of the process it verified it is connected to
            response, no_python, native = fetch_stacks_and_native(source, timeout_s=args.timeout)
        else:
            response = fetch_stacks(source, timeout_s=args.timeout)
    finally:
        source.close_and_wait("done")
    if as_json:
        return _stacks_json(source.description, response, native, no_python, include_agent=args.all)
    if response is not None:
        print(f"{source.description}: Python stacks, {INNERMOST_FIRST}")
        print("\n".join(stack_lines(response, include_agent=args.all)).rstrip())
    if native is None:
        return 0
    if native.text is None:
        if no_python is not None:
            raise SourceError(f"{no_python}; and no native stacks: {native.why}")
        raise UsageError(str(native.why))
    if response is not None:
        print()
    print(f"{source.description}{NATIVE_HEADING}")
    print(native.text.rstrip())
    if no_python is not None:  # the native stacks came, the agent did not answer (a C++ pass holding the GIL?)
        say(f"no Python stacks: {no_python}")
        return 1
    return 0


def cmd_ir(args: argparse.Namespace) -> int:
    """Print the IR before or after a pass of a recent compile of a target, or what the pass changed."""
    from iket_tui.sources.ir import view_text

    source = target_source(args.target, start_agent=args.start_agent)
    try:
        source.connect()
        text = view_text(source, args.compile, args.seq, args.view)
    finally:
        source.close_and_wait("done")
    if args.format == "json":
        fields = {"target": source.description, "compile": args.compile, "seq": args.seq, "view": args.view}
        _write_json({**fields, "text": text})
        return 0
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    """Print this user's live agents, one a line: pid, uptime, socket and command. Only agents
    that listen are listed, and none from a runtime directory that may not be trusted (why is
    said on stderr). With a HOST, the same list from that machine, through ssh."""
    as_json = args.format == "json"
    if args.host is not None:
        return _ls_remote(args.host, as_json=as_json)
    problem = runtime_dir_problem()
    if problem is not None:
        say(problem.says("its sockets are not listed"))
    endpoints = list_endpoints(listening_only=True)
    if as_json:
        _write_json(
            [
                {
                    "pid": endpoint.pid,
                    "uptime_s": round(uptime_seconds(endpoint.start_time), 2),
                    "start_time": endpoint.start_time,
                    "socket": str(endpoint.path),
                    "argv": process_argv(endpoint.pid),
                }
                for endpoint in endpoints
            ]
        )
        return 0
    if not endpoints:
        print(f"no live iket-tui agents of this user (in {runtime_dir()})")
        return 0
    rows = [("PID", "UPTIME", "SOCKET", "COMMAND")]
    for endpoint in endpoints:
        command = " ".join(" ".join(process_argv(endpoint.pid)).split()) or "?"  # one line, whatever argv holds
        uptime = duration(int(uptime_seconds(endpoint.start_time) * 1e9)).replace(" ", "")  # one column
        rows.append((str(endpoint.pid), uptime, str(endpoint.path), command))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for pid, uptime, path, command in rows:
        print(f"{pid:>{widths[0]}}  {uptime:>{widths[1]}}  {path:<{widths[2]}}  {command}")
    return 0


def _native_only(pid: int, no_python: str, timeout_s: float) -> int:
    """``stacks PID --native`` where the agent did not even greet (a C++ pass holding the GIL
    keeps its thread from answering): py-spy on the pid the user named, which is when native
    stacks matter most; exit code 1, the Python stacks being missing."""
    from iket_tui.sources.py_spy import native_stacks

    native = native_stacks(pid, timeout_s)
    if native.text is None:
        raise SourceError(f"{no_python}; and no native stacks: {native.why}")
    print(f"pid {pid}{NATIVE_HEADING}")
    print(native.text.rstrip())
    say(f"no Python stacks: {no_python}")
    return 1


def _stacks_there(args: argparse.Namespace, remote: RemoteTarget) -> int:
    """``stacks --native`` of a pid on another machine: the command run there, through ssh (in
    JSON there too with ``--format json``)."""
    from iket_tui.sources.ssh import run_remote, stacks_there

    if args.format == "json":
        flags = ["--native", "--timeout", f"{args.timeout:g}", "--format", "json", *(["--all"] if args.all else [])]
        code, out, why = run_remote(remote.host, ["stacks", str(remote.pid), *flags], work_s=args.timeout)
    else:
        code, out, why = stacks_there(remote, timeout_s=args.timeout, include_agent=args.all)
    sys.stdout.write(out)  # what came, native stacks included where the agent there did not answer
    if code != 0:
        raise UsageError(why)
    return 0


def _ls_remote(host: str, *, as_json: bool = False) -> int:
    """Print ``iket-tui ls`` as it runs on ``host``, through ssh; pids there are ``HOST:PID`` here."""
    from iket_tui.sources.ssh import run_remote

    code, out, why = run_remote(host, ["ls", "--format", "json"] if as_json else ["ls"])
    if code != 0:
        raise UsageError(why)
    sys.stdout.write(out)
    return 0


def _write_json(value: object) -> None:
    """``--format json``: one JSON document on standard output."""
    sys.stdout.write(json.dumps(value, indent=2) + "\n")


def _stacks_json(
    target: str,
    response: dict[str, Any] | None,
    native: NativeStacks | None,
    no_python: str | None,
    *,
    include_agent: bool,
) -> int:
    """``stacks --format json``: the threads with their frames (innermost first), the compiler
    processes, and with ``--native`` py-spy's dump; what is missing says why. Exit code 1 when
    the Python stacks are missing, 2 when the native stacks asked for are."""
    threads: list[dict[str, Any]] = []
    if response is not None and response.get("ok"):
        threads = [
            {
                "id": thread.get("id"),
                "name": thread.get("name"),
                "main": bool(thread.get("main")),
                "daemon": bool(thread.get("daemon")),
                "agent": bool(thread.get("agent")),
                "frames": [
                    {key: frame.get(key) for key in ("file", "line", "function", "code")}
                    for frame in reversed(thread.get("frames") or [])
                    if isinstance(frame, dict)
                ],
                "outer_frames_left_out": int(thread.get("cut") or 0),
            }
            for thread in response.get("threads") or []
            if isinstance(thread, dict) and (include_agent or not thread.get("agent"))
        ]
    elif response is not None:
        no_python = str(response.get("error") or "the target could not answer")
    processes = response.get("processes") if response is not None else None
    out: dict[str, Any] = {
        "target": target,
        "threads": threads,
        "python_error": no_python,
        "compiler_processes": processes if isinstance(processes, list) else [],
    }
    if native is not None:
        out["native"] = native.text
        out["native_error"] = native.why
    _write_json(out)
    if native is not None and native.text is None:
        say(f"no native stacks: {native.why}")
        return 2
    if no_python is not None:
        say(f"no Python stacks: {no_python}")
        return 1
    return 0
