"""The questions put to a live target, answered on stdout: its threads' stacks, a pass's IR, and the live agents."""

from __future__ import annotations

import argparse
import sys

from iket_tui.cli.errors import UsageError, say
from iket_tui.cli.targets import target_source
from iket_tui.durations import duration
from iket_tui.endpoints import list_endpoints, process_argv, runtime_dir, runtime_dir_problem, uptime_seconds
from iket_tui.sources.ssh import NATIVE_HEADING, RemoteTarget, remote_target


def cmd_stacks(args: argparse.Namespace) -> int:
    """Print the Python stacks of every thread of a target (and with ``--native`` its native
    stacks, through py-spy), to see where a compile hangs."""
    from iket_tui.sources.stacks import NativeStacks, fetch_stacks, fetch_stacks_and_native, stack_lines

    remote = remote_target(args.target)
    if remote is not None and remote.pid is not None and args.native:
        return _stacks_there(args, remote)  # py-spy must run on the target's machine
    source = target_source(args.target, start_agent=args.start_agent)
    native: NativeStacks | None = None
    try:
        source.connect()
        if args.native:  # read by the source, of the process it verified it is connected to
            response, native = fetch_stacks_and_native(source, timeout_s=args.timeout)
        else:
            response = fetch_stacks(source, timeout_s=args.timeout)
    finally:
        source.close_and_wait("done")
    print(f"{source.description}: Python stacks")
    print("\n".join(stack_lines(response, include_agent=args.all)).rstrip())
    if native is None:
        return 0
    if native.text is None:
        raise UsageError(str(native.why))
    print(f"\n{source.description}{NATIVE_HEADING}")
    print(native.text.rstrip())
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
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    """Print this user's live agents, one a line: pid, uptime, socket and command. Only agents
    that listen are listed, and none from a runtime directory that may not be trusted (why is
    said on stderr). With a HOST, the same list from that machine, through ssh."""
    if args.host is not None:
        return _ls_remote(args.host)
    problem = runtime_dir_problem()
    if problem is not None:
        say(problem.says("its sockets are not listed"))
    endpoints = list_endpoints(listening_only=True)
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


def _stacks_there(args: argparse.Namespace, remote: RemoteTarget) -> int:
    """``stacks --native`` of a pid on another machine: the command run there, through ssh."""
    from iket_tui.sources.ssh import stacks_there

    code, out, why = stacks_there(remote, timeout_s=args.timeout, include_agent=args.all)
    if code != 0:
        raise UsageError(why)
    sys.stdout.write(out)
    return 0


def _ls_remote(host: str) -> int:
    """Print ``iket-tui ls`` as it runs on ``host``, through ssh; pids there are ``HOST:PID`` here."""
    from iket_tui.sources.ssh import run_remote

    code, out, why = run_remote(host, ["ls"])
    if code != 0:
        raise UsageError(why)
    sys.stdout.write(out)
    return 0
