"""The questions put to a live target, answered on stdout: its threads' stacks, a pass's IR, and the live agents."""

from __future__ import annotations

import argparse
import sys

from iket_tui.cli.errors import UsageError, say
from iket_tui.cli.targets import target_socket
from iket_tui.durations import duration
from iket_tui.endpoints import list_endpoints, process_argv, runtime_dir, runtime_dir_problem, uptime_seconds
from iket_tui.sources.socket import SocketSource


def cmd_stacks(args: argparse.Namespace) -> int:
    """Print the Python stacks of every thread of a target (and with ``--native`` its native
    stacks, through py-spy), to see where a compile hangs."""
    from iket_tui.sources.stacks import fetch_stacks, native_stacks, stack_lines

    source = SocketSource(target_socket(args.target, start_agent=args.start_agent))
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


def cmd_ir(args: argparse.Namespace) -> int:
    """Print the IR before or after a pass of a recent compile of a target, or what the pass changed."""
    from iket_tui.sources.ir import view_text

    source = SocketSource(target_socket(args.target, start_agent=args.start_agent))
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
    said on stderr)."""
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
