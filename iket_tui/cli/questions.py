"""The questions put to a live target, answered on stdout: its threads' stacks, a pass's IR, and the live agents."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iket_tui.cli.errors import EXIT_BAD_INPUT, UsageError, say
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
    said on stderr). With a HOST, the same list from that machine, through ssh; with several
    (ranges, host lists), one table of them all with a HOST column."""
    as_json = args.format == "json"
    hosts = _ls_hosts(args.host, getattr(args, "hosts", None))
    if len(hosts) == 1 and [word.removesuffix(":") for word in args.host] == hosts:  # its own list, as it prints it
        return _ls_remote(hosts[0], as_json=as_json)
    if hosts:
        return _ls_job(hosts, as_json=as_json)
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


def _ls_hosts(words: Sequence[str], hosts_from: Path | None) -> list[str]:
    """The hosts ``ls`` lists: ``HOST`` or ``HOST:``, ranges (``node[1-8]``), ``@FILE`` and
    ``--hosts FILE`` naming one a line. Raises :class:`UsageError`."""
    from iket_tui.cli.targets import expand_hosts, hosts_file

    hosts = hosts_file(hosts_from) if hosts_from is not None else []
    for word in words:
        if word.startswith("@") and len(word) > 1:
            hosts += hosts_file(Path(word[1:]))
            continue
        host = word.removesuffix(":")
        if not host or ":" in host:
            raise UsageError(f"{word}: ls lists every agent of a host: name it as HOST or HOST:")
        hosts += expand_hosts(host)
    return list(dict.fromkeys(hosts))


def _ls_job(hosts: Sequence[str], *, as_json: bool) -> int:
    """The agents of several hosts in one table with a HOST column (or one JSON list, each with
    its host), one ssh each, all at once; a host that does not answer is one line on stderr.
    Exit code 0 when at least one host answered, 2 when none did."""
    from iket_tui.sources.ssh import run_remote

    listed: dict[str, list[dict[str, Any]]] = {}
    failed: dict[str, str] = {}

    def ask(host: str) -> None:
        try:
            code, out, why = run_remote(host, ["ls", "--format", "json"], batch=True)
        except SourceError as exc:
            failed[host] = str(exc)
            return
        if code != 0:
            failed[host] = why
            return
        try:
            agents = json.loads(out)
        except ValueError:
            agents = None
        if not isinstance(agents, list) or not all(isinstance(agent, dict) for agent in agents):
            failed[host] = f"{host}: its iket-tui's ls did not answer a JSON list of agents"
            return
        listed[host] = agents

    threads = [threading.Thread(target=ask, args=(host,), daemon=True) for host in hosts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for host in hosts:
        if host in failed:
            say(failed[host])
    if not listed:
        return EXIT_BAD_INPUT
    answered = [host for host in hosts if host in listed]
    if as_json:
        _write_json([{"host": host, **agent} for host in answered for agent in listed[host]])
        return 0
    rows = [("HOST", "PID", "UPTIME", "SOCKET", "COMMAND")]
    for host in answered:
        for agent in listed[host]:
            uptime = agent.get("uptime_s")
            argv = agent.get("argv")
            command = " ".join(" ".join(str(word) for word in argv).split()) if isinstance(argv, list) else ""
            rows.append(
                (
                    host,
                    str(agent.get("pid", "?")),
                    duration(int(uptime * 1e9)).replace(" ", "") if isinstance(uptime, int | float) else "?",
                    str(agent.get("socket", "?")),
                    command or "?",
                )
            )
    if len(rows) == 1:
        print(f"no live iket-tui agents on {', '.join(answered)} (of the user ssh logs in as)")
        return 0
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for host, pid, uptime, path, command in rows:
        print(f"{host:<{widths[0]}}  {pid:>{widths[1]}}  {uptime:>{widths[2]}}  {path:<{widths[3]}}  {command}")
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
