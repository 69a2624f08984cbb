"""The ``iket-tui`` arguments: every command, its options, and the command function it runs."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from iket_tui import __version__
from iket_tui.cli import serve as serving
from iket_tui.cli.bridge import cmd_bridge
from iket_tui.cli.completion import SHELLS, cmd_completion
from iket_tui.cli.config import cmd_config, config_path
from iket_tui.cli.cut import cmd_cut
from iket_tui.cli.diff import cmd_diff
from iket_tui.cli.errors import EXIT_BAD_INPUT, PROG
from iket_tui.cli.files import cmd_dump, cmd_export, cmd_replay
from iket_tui.cli.filters import add_filter_arguments
from iket_tui.cli.hangs import cmd_abort, cmd_repro
from iket_tui.cli.help_text import HelpText
from iket_tui.cli.live import DEMO_STUCK_AFTER_S, cmd_attach, cmd_demo, cmd_record, cmd_run
from iket_tui.cli.questions import cmd_ir, cmd_ls, cmd_stacks
from iket_tui.model.pass_bound import DEFAULT_MAX_PASSES
from iket_tui.outputs import STDOUT


def build_parser() -> argparse.ArgumentParser:
    """The parser; each command sets ``handler`` to the function that runs it, and every
    command's ``--help`` says what it does, with examples."""
    parser = _Parser(
        prog=PROG,
        description="Watch TileLang/TVM compiler passes live, record them, replay them.\n\n"
        f"Defaults of the options (--stuck-after, --max-passes, ...) and the theme are read from {config_path()}"
        " where it exists: `iket-tui config` lists its keys.",
        epilog=_examples(
            "iket-tui run -- python my_kernel.py",
            "iket-tui attach 12345",
            "iket-tui replay run.msgpack",
            "iket-tui ls",
        ),
        formatter_class=HelpText,
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}", help="print the version")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    def command(name: str, help: str, description: str, *examples: str) -> argparse.ArgumentParser:
        return commands.add_parser(
            name,
            help=help,
            description=description,
            epilog=_examples(*examples),
            formatter_class=HelpText,
        )

    def target(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "target",
            metavar="TARGET",
            help="a pid (see `iket-tui ls`), the path of an agent socket, or HOST:PID for a pid on HOST through ssh",
        )

    def recording(sub: argparse.ArgumentParser, help: str = "a recording (record -o, --record)") -> None:
        sub.add_argument("file", type=Path, metavar="FILE", help=help)

    def span_options(sub: argparse.ArgumentParser, verb: str) -> None:
        sub.add_argument(
            "--from",
            dest="from_s",
            type=_seconds,
            metavar="T",
            help=f"{verb} from T seconds after the recording's start, as dump's time column reads",
        )
        sub.add_argument("--to", dest="to_s", type=_seconds, metavar="T", help=f"{verb} up to T seconds")

    def ui_options(sub: argparse.ArgumentParser, stuck_after_s: float = 30.0) -> None:
        sub.add_argument(
            "--stuck-after",
            type=_positive,
            default=stuck_after_s,
            metavar="S",
            help=f"mark a pass stuck once it runs longer than S seconds (default {stuck_after_s:g})",
        )
        sub.add_argument(
            "--kernel-stuck-after",
            type=_positive,
            default=2.0,
            metavar="S",
            help="mark a kernel launch quiet once one of its unfinished warps has run no event for S s (default 2)",
        )
        sub.add_argument(
            "--max-passes",
            type=_max_passes,
            default=DEFAULT_MAX_PASSES,
            metavar="N",
            help=f"keep at most N passes in the tree (default {DEFAULT_MAX_PASSES:,}): past them the oldest finished"
            " compiles keep their row and timings and let their passes go; failed, stuck and running ones keep theirs",
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
            help="with kernel tracing: the ring's region, what one warp of one block keeps, in 256-byte units of"
            " 16 records, a power of two (32: 512 events)",
        )
        sub.add_argument(
            "--ring-size",
            type=_ring_size,
            metavar="SIZE",
            help="with kernel tracing: the ring's records in all, e.g. 256M or 1G (128M: 8,388,608 events, 16,384"
            " warps of a block at once)",
        )

    run = command(
        "run",
        "start a program with the agent and watch it live",
        """\
Start CMD with the iket-tui agent in it and watch its compiles live. The program waits up to
10 s for the UI to attach, so that nothing is missed; its output goes to a log file, named
when it exits, and iket-tui exits with its exit code. Quitting the UI stops a program that
still runs. The processes it starts that run Python (multiprocessing workers, subprocesses,
the ranks of torchrun) start their own agent and are watched too, each under its parent in the
tree, unless --no-follow.""",
        "iket-tui run -- python my_kernel.py",
        "iket-tui run --record run.msgpack --kernels -- python my_kernel.py",
        "iket-tui run --no-ui --record run.msgpack -- python my_kernel.py",
        "iket-tui run --ranks -- torchrun --nproc-per-node 8 train.py",
    )
    run.add_argument("--record", type=Path, metavar="FILE", help="also record the stream to FILE")
    run.add_argument("--no-ui", action="store_true", help="only record (with --record); the program keeps the terminal")
    run.add_argument(
        "--no-follow",
        action="store_true",
        help="watch only the program, not the processes it starts (followed by default, each under its parent)",
    )
    run.add_argument(
        "--ranks",
        action="store_true",
        help="the processes it starts are ranks (torchrun): named and ordered by rank, a pass compared across ranks",
    )
    run.add_argument(
        "--kernels", action="store_true", help="also stream the IKET events of running kernels (kernel tracing)"
    )
    kernel_options(run)
    ui_options(run)
    run.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS...]", help="the program to run")
    add_filter_arguments(run)
    run.set_defaults(handler=cmd_run)

    attach = command(
        "attach",
        "watch a program that already runs the agent",
        """\
Watch a program that runs the agent (started by `iket-tui run`, IKET_TUI=1 or
iket_tui.agent.start()) until you quit; the program goes on. A Python program without the
agent gets one started in it (through gdb, or sys.remote_exec on Python 3.14) where this user
may trace it. A client that attaches late first gets a backlog of recent events and every
pass still open. `iket-tui ls` lists the live agents of this user. HOST:PID watches a pid on
another machine through your own ssh (`iket-tui ls HOST` lists them), with iket-tui installed
there: nothing listens on a network port. HOST: watches every agent there in one tree, and
those that start there while it watches. Several hosts (node1: node2:, node[1-8]:, @hosts.txt
or --hosts FILE, mixed with local pids) show every rank of the job in one tree, named by host
and rank, through one ssh connection per host; a host that drops, or cannot be reached as
attach starts, is said in the header and logged in to again while the others go on.""",
        "iket-tui attach 12345",
        "iket-tui attach gpu-box:12345",
        "iket-tui attach gpu-box:",
        "iket-tui attach 12345 --record run.msgpack",
        "iket-tui attach /tmp/gpu-box.sock",
        "iket-tui attach 12345 12346 12347    # several processes in one tree",
        "iket-tui attach --all",
        "iket-tui attach node[1-8]:    # every rank of a job on eight machines, one ssh each",
        "iket-tui attach @hosts.txt 12345",
    )
    attach.add_argument(
        "target",
        nargs="*",
        metavar="TARGET",
        help="a pid (see `iket-tui ls`), the path of an agent socket, or HOST:PID for a pid on HOST through ssh;"
        " HOST: for every agent there (node[1-8]: and node[01-08]: for several hosts, @FILE for those a file"
        " names); several targets, here and on other machines, show their processes in one tree",
    )
    attach.add_argument(
        "--hosts",
        type=Path,
        metavar="FILE",
        help="watch every agent on each host FILE names (one a line, # comments), as HOST: targets",
    )
    attach.add_argument(
        "--all",
        action="store_true",
        help="every live agent of this user, and those that start while it watches, in one tree",
    )
    attach.add_argument("--record", type=Path, metavar="FILE", help="also record the stream to FILE")
    ui_options(attach)
    add_filter_arguments(attach)
    attach.set_defaults(handler=cmd_attach)

    record = command(
        "record",
        "record a running agent's stream to a file, without the UI",
        """\
Record what a running agent sends, without the UI, until the target exits, --duration
passes, or Ctrl-C; one line then says how many messages were written and why it stopped.
The file replays (`iket-tui replay`) and dumps (`iket-tui dump`), even one whose recorder was
killed. `-o -` writes the recording to standard output, for a pipe; the line goes to stderr.
Several targets take what attach takes (PID PID, HOST:, node[1-8]:, @hosts.txt or --hosts
FILE, mixed with local pids): every process is kept apart in the file, by host and pid, through
one ssh connection per host, and agents that start there meanwhile are recorded too; with hosts, it
runs until --duration passes or Ctrl-C (several pids here alone: until every one exited). A
host that cannot be reached as it starts, or drops, is said on stderr and logged in to again
while the others are recorded.""",
        "iket-tui record 12345 -o run.msgpack",
        "iket-tui record 12345 -o run.msgpack --duration 60",
        "iket-tui record 12345 -o - | ssh host 'cat > run.msgpack'",
        "iket-tui record node[1-8]: -o job.msgpack --duration 600",
    )
    record.add_argument(
        "target",
        nargs="*",
        metavar="TARGET",
        help="a pid (see `iket-tui ls`), the path of an agent socket, or HOST:PID for a pid on HOST through ssh;"
        " HOST: for every agent there (node[1-8]: for several hosts, @FILE for those a file names)",
    )
    record.add_argument(
        "--hosts",
        type=Path,
        metavar="FILE",
        help="record every agent on each host FILE names (one a line, # comments), as HOST: targets",
    )
    record.add_argument(
        "-o",
        "--output",
        type=_output,
        required=True,
        metavar="FILE",
        help="the recording to write; - for standard output",
    )
    record.add_argument("--duration", type=_positive, metavar="SECONDS", help="stop after this long")
    start_agent(record)
    add_filter_arguments(record)
    record.set_defaults(handler=cmd_record)

    replay = command(
        "replay",
        "the live UI over a recording",
        """\
The same UI as attach, over a recording, at the pace it was recorded (or --speed X). In the
UI, space pauses, s steps one message, [ and ] change the speed. The bar under the header is the
recording's timeline, its failures, stuck passes, quiet warps and process events marked: a click
jumps there, x X, w W, u U, o O and g G jump to the next or previous failure, stuck pass, quiet
warp, process event or compile, and backspace goes back; a jump shows what a replay from the
start shows at that time.""",
        "iket-tui replay run.msgpack",
        "iket-tui replay run.msgpack --speed max",
        "iket-tui replay run.msgpack --paused --stuck-after 5",
    )
    recording(replay)
    replay.add_argument(
        "--speed", type=_speed, default=1.0, metavar="X", help="playback speed; 0 or 'max' for as fast as possible"
    )
    replay.add_argument("--paused", action="store_true", help="start paused")
    ui_options(replay)
    replay.set_defaults(handler=cmd_replay)

    dump = command(
        "dump",
        "print a recording, one line per message",
        """\
Print a recording one line per message, as text or as JSON lines (one object per message,
for jq and scripts). Batches of kernel events are summarised; --records adds one line per
kernel event. A file cut short dumps every complete frame and says on stderr where it was
cut.""",
        "iket-tui dump run.msgpack",
        "iket-tui dump run.msgpack --records | less",
        "iket-tui dump run.msgpack --format jsonl | jq -c 'select(.type == \"pass_end\") | [.name, .duration_ns]'",
    )
    recording(dump)
    dump.add_argument(
        "--format",
        choices=("text", "jsonl"),
        default="text",
        help="text lines (default), or one JSON object a line",
    )
    dump.add_argument(
        "--records", action="store_true", help="also one line per kernel event after each kernel_records batch"
    )
    span_options(dump, "print")
    dump.set_defaults(handler=cmd_dump)

    cut = command(
        "cut",
        "write the stretch of a recording between two times as a shorter recording",
        """\
Write the messages of a recording between --from and --to (seconds from its start, as dump's
time column reads) to a new recording, after what a reader of that stretch needs of what came
before it: each process's hello, the kernel event tables, and every message so far of the
compiles still running at --from. The cut replays, dumps and exports as the original does over
that stretch. A recording cut short or damaged gives what it holds intact.""",
        "iket-tui cut run.msgpack --from 12 --to 20 -o failure.msgpack",
        "iket-tui cut run.msgpack --from 300 -o tail.msgpack",
    )
    recording(cut)
    cut.add_argument("-o", "--output", type=_output, required=True, metavar="OUT", help="the recording to write")
    span_options(cut, "keep")
    cut.set_defaults(handler=cmd_cut)

    export = command(
        "export",
        "convert a recording for Perfetto (Chrome trace JSON or its own protobuf) or speedscope",
        """\
Write a recording for other viewers: a Chrome trace JSON that Perfetto (ui.perfetto.dev)
opens, with a process per kernel launch, a thread per block and warp, and the compiles'
passes on their own track; Perfetto's native protobuf trace (--format perfetto), with a track
per compile holding its passes as nested slices and a track per kernel launch, block and
warp; or a speedscope profile of the process, its compiles as top frames holding their passes
and codegen steps (nvcc included). Every format is written while the recording is read, in
bounded memory (kernel events wait in a temporary file, under TMPDIR, until the launches are
written), with the bytes read shown on a terminal; a name ending in .gz is written gzipped,
and `-o -` writes to standard output.""",
        "iket-tui export run.msgpack -o trace.json.gz",
        "iket-tui export run.msgpack -o trace.perfetto-trace --format perfetto",
        "iket-tui export run.msgpack -o passes.speedscope.json --format speedscope",
        "iket-tui export run.msgpack -o - | jq '.traceEvents | length'",
    )
    recording(export)
    export.add_argument(
        "-o", "--output", type=_output, required=True, metavar="OUT", help="the file to write; - for standard output"
    )
    export.add_argument(
        "--format",
        choices=("chrome", "speedscope", "perfetto"),
        default="chrome",
        help="chrome: a Chrome trace for Perfetto (default); speedscope: compiles, passes and codegen "
        "steps as a profile; perfetto: Perfetto's native protobuf trace (e.g. -o trace.perfetto-trace)",
    )
    export.set_defaults(handler=cmd_export)

    diff = command(
        "diff",
        "what changed between the compiles and kernel launches of two recordings, or two of one",
        """\
Compare the compiles of two recordings, matched by process (its rank where it has one),
kernel and label, in order; or two compiles of one recording (--compile N --compile M). For
each pair: passes added, removed or moved, each pass's own time before and after (the largest
change first; flagged with ! when at least --slower percent and --min-ms slower), a failure
new or fixed, and codegen time. Kernel launches are matched by process, kernel and grid, in
order (or --launch N --launch M): per event name, the count per launch and the own time of its
ranges at p50 and p99 (the largest change of time spent first; flagged with ! when at least
--range-slower percent and --range-min-ns slower), payload ranges that changed, and the blocks
whose time changed most. What has no match is listed. Exit code 1 when anything --fail-on
names is flagged, 0 when not, 2 for bad input.""",
        "iket-tui diff before.msgpack after.msgpack",
        "iket-tui diff run.msgpack --compile 3 --compile 7",
        "iket-tui diff run.msgpack --launch 5 --launch 6 --fail-on range-slower,count-changed",
        "iket-tui diff a.msgpack b.msgpack --fail-on slower,failed,unmatched --slower 50 --min-ms 5",
        "iket-tui diff a.msgpack b.msgpack --format json | jq '.pairs[].passes[0]'",
    )
    recording(diff, "the recording to compare from (A)")
    diff.add_argument("other", nargs="?", type=Path, metavar="FILE", help="the recording to compare with (B)")
    diff.add_argument(
        "--compile",
        type=int,
        action="append",
        metavar="N",
        help="twice: compare compile N of A with compile M (of B, or of A when there is no B)",
    )
    diff.add_argument(
        "--launch",
        type=int,
        action="append",
        metavar="N",
        help="twice: compare launch N of A with launch M (of B, or of A when there is no B)",
    )
    diff.add_argument(
        "--slower",
        type=_non_negative,
        default=20.0,
        metavar="PCT",
        help="flag a pass this much slower, in percent (default 20) ...",
    )
    diff.add_argument(
        "--min-ms", type=_non_negative, default=1.0, metavar="MS", help="... and at least this many ms (default 1)"
    )
    diff.add_argument(
        "--range-slower",
        type=_non_negative,
        default=20.0,
        metavar="PCT",
        help="flag a kernel's range whose own p50 or p99 is this much slower, in percent (default 20) ...",
    )
    diff.add_argument(
        "--range-min-ns",
        type=_non_negative,
        default=100.0,
        metavar="NS",
        help="... and at least this many ns (default 100)",
    )
    diff.add_argument(
        "--fail-on",
        type=_flags,
        default=("slower", "failed", "range-slower"),
        metavar="FLAGS",
        help="what makes the exit code 1, comma-separated among slower, failed, added, removed, moved, "
        "unmatched, range-slower, count-changed, payload-changed (default slower,failed,range-slower); "
        "none for never",
    )
    diff.add_argument(
        "--passes", type=int, default=5, metavar="K", help="passes listed per compile besides those flagged (5)"
    )
    diff.add_argument("--format", choices=("text", "json"), default="text", help="aligned text (default), or JSON")
    diff.set_defaults(handler=cmd_diff)

    stacks = command(
        "stacks",
        "print the stacks of every thread of a target that runs the agent",
        """\
Print the Python stack of every thread of a running target, through its agent: the frame a
stuck pass hangs in. --native adds the native frames (C++ passes included) through py-spy,
where it is installed and may trace the target.""",
        "iket-tui stacks 12345",
        "iket-tui stacks 12345 --native",
    )
    target(stacks)
    stacks.add_argument("--native", action="store_true", help="also native stacks, through py-spy")
    stacks.add_argument("--all", action="store_true", help="include the threads of iket-tui's own agent")
    stacks.add_argument("--timeout", type=_positive, default=10.0, metavar="S", help="wait for the answer (10)")
    start_agent(stacks)
    json_format(stacks, "the threads and their frames, innermost first (keys in docs/commands.md)")
    stacks.set_defaults(handler=cmd_stacks)

    ir = command(
        "ir",
        "print the IR before or after a pass of a recent compile of a running target",
        """\
Print the IR a pass of a recent compile of a running target was given (--before), the IR it
returned (--after), or what it changed (--diff, the default). N and SEQ are the numbers the
UI shows for the compile and the pass. The agent keeps the running compile and the last 8.""",
        "iket-tui ir 12345 --compile 3 --pass 17",
        "iket-tui ir 12345 --compile 3 --pass 17 --before > before.py",
    )
    target(ir)
    ir.add_argument("--compile", type=int, required=True, metavar="N", help="the compile (its number in the tree)")
    ir.add_argument("--pass", dest="seq", type=int, required=True, metavar="SEQ", help="the pass's sequence number")
    views = ir.add_mutually_exclusive_group()
    views.add_argument("--before", dest="view", action="store_const", const="before", help="the IR it was given")
    views.add_argument("--after", dest="view", action="store_const", const="after", help="the IR it returned")
    views.add_argument("--diff", dest="view", action="store_const", const="diff", help="what it changed (default)")
    start_agent(ir)
    json_format(ir, "the text in a JSON object with the target, compile, pass and view (docs/commands.md)")
    ir.set_defaults(handler=cmd_ir, view="diff")

    repro = command(
        "repro",
        "write a self-contained reproducer for a failed compile (a pass or nvcc) in a recording, "
        "or with --stuck for a pass that hangs",
        """\
Write a directory that makes a failure of a recording happen again without the original
program: `python DIR/repro.py` runs the failed pass on the module it was given, or nvcc on the
source it rejected, and raises the same error. With --stuck, a reproducer of a pass that hangs,
from a live TARGET or a recording that holds a capture of one: repro.py runs that pass alone
and says after a timeout whether it still runs (exit 3). `-o -` writes the directory as a tar
archive to standard output (`| tar -t` lists it, `| tar -x` unpacks it).""",
        "iket-tui repro run.msgpack -o repro && python repro/repro.py",
        "iket-tui repro run.msgpack --compile 5 -o repro",
        "iket-tui repro 12345 --stuck -o hang && python hang/repro.py --timeout 60",
        "iket-tui repro run.msgpack -o - | tar -t",
    )
    repro.add_argument(
        "file",
        type=Path,
        metavar="FILE",
        help="a recording; with --stuck also a live TARGET (a pid, a socket path or HOST:PID)",
    )
    repro.add_argument("--compile", type=int, metavar="N", help="the failed compile (default: the first one)")
    repro.add_argument(
        "-o",
        "--output",
        type=_output,
        required=True,
        metavar="DIR",
        help="the directory to write; - for a tar archive of it on standard output",
    )
    repro.add_argument(
        "--stuck",
        action="store_true",
        help="the pass running now in a live TARGET (the longest running, or that of --compile N), "
        "or the capture of one a recording holds",
    )
    repro.set_defaults(handler=cmd_repro)

    abort = command(
        "abort",
        "make a running compile of a target fail with CompileAborted; the program goes on",
        """\
Make a running compile fail with iket_tui.agent.CompileAborted (an Exception), so the compile
fails like any failing compile (its failure captured for `iket-tui repro`) and the program goes
on. A wait of the main thread is interrupted; the compiler's processes a codegen step waits on
(nvcc, ptxas) are ended, and the compile fails with what they printed. Exit 0 once the compile
failed; 1 when the thread is inside native code (a C++ pass, or a wait on another thread), which
it says, with where and the child processes it waits on (the exception waits until the thread
runs Python again).""",
        "iket-tui abort 12345",
        "iket-tui abort 12345 --compile 3",
    )
    target(abort)
    abort.add_argument(
        "--compile", type=int, metavar="N", help="the compile to abort (default: the one whose pass runs longest)"
    )
    abort.set_defaults(handler=cmd_abort)

    ls = command(
        "ls",
        "list the live agents of this user",
        """\
List the live agents of this user, one a line: pid, uptime, socket and command. The pid is
what attach, record, stacks, ir and abort take as TARGET. With HOST, those on that machine,
through ssh (attach and record take HOST:PID). Several hosts (node1 node2, node[1-8]:,
@hosts.txt or --hosts FILE) are listed in one table with a HOST column, one ssh each; a host
that cannot be reached is one line on stderr while the others are listed. Exit code 0 when
at least one host answered, 2 when none did.""",
        "iket-tui ls",
        "iket-tui ls gpu-box",
        "iket-tui ls node[1-8]:",
    )
    ls.add_argument(
        "host",
        nargs="*",
        metavar="HOST",
        help="list the agents on HOST (an ssh destination) instead; node[1-8] for several, @FILE for a file's",
    )
    ls.add_argument(
        "--hosts", type=Path, metavar="FILE", help="list the agents on each host FILE names (one a line, # comments)"
    )
    json_format(ls, "a JSON list of the agents: pid, uptime_s, start_time, socket, argv (docs/commands.md)")
    ls.set_defaults(handler=cmd_ls)

    bridge = command(
        "bridge",
        "carry a local agent's stream over stdin and stdout (what attach HOST:PID runs through ssh)",
        """\
Connect to the agent of PID on this machine, with the checks attach makes (same user, the
process named serves it, its start time), and copy its stream to stdout and stdin to it until
either side ends. `iket-tui attach HOST:PID` runs it through ssh; it is not meant for a
terminal. Exit codes: 0 the stream ended, 3 the agent stopped while its process runs on, 4 no
agent listens in that process, 5 no such process, 2 anything else (one line on stderr).""",
        "iket-tui bridge 12345    # what `iket-tui attach gpu-box:12345` runs on gpu-box, through ssh",
        "iket-tui bridge 12345 --start-time 987654 --wait 2",
        "iket-tui bridge --all    # what `iket-tui attach gpu-box:` runs on gpu-box",
    )
    bridge.add_argument("pid", type=_pid, nargs="?", metavar="PID", help="the process whose agent to connect to")
    bridge.add_argument(
        "--all",
        action="store_true",
        help="every agent here, each on a channel of one stream (what `attach HOST:` runs through ssh)",
    )
    bridge.add_argument(
        "--start-time",
        type=int,
        metavar="TICKS",
        help="only the process of that pid that started then (clock ticks since boot, as its hello says)",
    )
    bridge.add_argument(
        "--wait", type=_seconds, default=0.0, metavar="S", help="wait up to S seconds for its agent to listen (0)"
    )
    bridge.set_defaults(handler=cmd_bridge)

    demo = command(
        "demo",
        "run the bundled TileLang program under the UI, or replay its recording",
        """\
Run the bundled TileLang program under the UI, with kernel tracing: good kernels, a pass slowed
to seconds, a tl.LayoutInference failure, a kernel nvcc rejects, and a GEMM with IKET events
(launched where there is a GPU; elsewhere the kernels screen shows a recording from an H200).
A compile waits in a pass of the demo's own until aborted, and is marked stuck after 5 s; the
program lives until the UI closes, so that IR, stacks, reproducers and abort can be tried on it.
Without TileLang, or with --recording, it replays that H200 recording of the same program
instead, passes and kernels.""",
        "iket-tui demo",
        "iket-tui demo --recording",
        "iket-tui demo --no-kernels --record demo.msgpack",
        "iket-tui demo --tvm",
    )
    demo.add_argument(
        "--recording",
        action="store_true",
        help="replay the bundled H200 recording of the demo (what it does without TileLang)",
    )
    demo.add_argument(
        "--tvm",
        action="store_true",
        help="the bundled plain Apache TVM program instead (needs the tvm extra, in a venv without TileLang)",
    )
    demo.add_argument("--record", type=Path, metavar="FILE", help="also record the stream to FILE")
    demo.add_argument("--no-ui", action="store_true", help="only record (with --record)")
    demo.add_argument(
        "--no-kernels", dest="kernels", action="store_false", help="do not trace kernels (traced by default)"
    )
    kernel_options(demo)
    ui_options(demo, stuck_after_s=DEMO_STUCK_AFTER_S)
    demo.set_defaults(handler=cmd_demo)

    serve = commands.add_parser(
        "serve",
        help="serve the UI of replay, attach or run to a browser (textual-serve)",
        description=serving.DESCRIPTION,
        epilog=serving.EXAMPLES,
        formatter_class=HelpText,
    )
    serving.add_arguments(serve)
    serve.set_defaults(handler=serving.cmd_serve)

    completion = command(
        "completion",
        "print the shell completion script for bash, zsh or fish",
        """\
Print a script that completes iket-tui's commands and options in bash, zsh or fish, the pids
of this user's live agents where a command takes a TARGET (and for a word that starts with a
letter, the hosts of ~/.ssh/config as HOST:), and recordings (*.msgpack) where it takes a FILE.
Load it in the shell's startup file, or save it where the shell looks.""",
        "iket-tui completion bash > ~/.local/share/bash-completion/completions/iket-tui",
        "iket-tui completion zsh > ~/.zfunc/_iket-tui    # with fpath+=~/.zfunc before compinit",
        "iket-tui completion fish > ~/.config/fish/completions/iket-tui.fish",
    )
    completion.add_argument("shell", nargs="?", choices=SHELLS, metavar="SHELL", help="bash, zsh or fish")
    completion.add_argument(
        "--list-targets",
        action="store_true",
        help="print the live agents of this user, a pid and its command a line (what the scripts offer as TARGET)",
    )
    completion.add_argument(
        "--list-hosts",
        action="store_true",
        help="print the hosts of ~/.ssh/config as HOST:, a line each (offered as TARGET for a word that starts"
        " with a letter)",
    )
    completion.set_defaults(handler=cmd_completion)

    config = command(
        "config",
        "say where the config file is read from, what it sets, and the keys it may hold",
        """\
Say where the config file is read from ($XDG_CONFIG_HOME/iket-tui/config.toml, else
~/.config/iket-tui/config.toml), what it sets, and the keys it may hold. Its keys are named as
the flags they give a default to (stuck-after = 10, max-passes = 500000, ring-size = "256M"),
and theme names the UI's colours (theme = "nord"); a flag given on the command line wins. A
file with bad TOML, an unknown key or a bad value stops the commands that read it with one line
saying which.""",
        "iket-tui config",
    )
    config.set_defaults(handler=cmd_config)
    return parser


def json_format(sub: argparse.ArgumentParser, what: str) -> None:
    """``--format text|json``, for scripts; ``what``: what the JSON holds."""
    sub.add_argument("--format", choices=("text", "json"), default="text", help=f"text (default), or JSON: {what}")


def _examples(*lines: str) -> str:
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line, pointing to the help of the command they are about."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{PROG}: {message} (see `{self.prog} --help`)\n")

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        """As argparse does, except that words left over after a command (``replay a b``) point
        to that command's help, not the program's."""
        words = list(sys.argv[1:] if args is None else args)
        parsed, extra = self.parse_known_args(words, namespace)
        if extra:
            chosen = next((word for word in words if not word.startswith("-")), None)
            where = f"{self.prog} {chosen}" if chosen in _commands_of(self) else self.prog
            self.exit(EXIT_BAD_INPUT, f"{PROG}: unrecognized arguments: {' '.join(extra)} (see `{where} --help`)\n")
        return parsed


def _commands_of(parser: argparse.ArgumentParser) -> set[str]:
    """The names of a parser's commands."""
    return {
        name for action in parser._actions if isinstance(action, argparse._SubParsersAction) for name in action.choices
    }


def _output(text: str) -> Path:
    """A file to write; ``-`` is standard output."""
    return STDOUT if text == "-" else Path(text)


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of at least 0: {text!r}")
    return value


def _flags(text: str) -> tuple[str, ...]:
    """What ``diff --fail-on`` names: comma-separated flags, or ``none``."""
    from iket_tui.model.compare import FLAGS

    if text == "none":
        return ()
    words = tuple(word.strip() for word in text.split(",") if word.strip())
    unknown = [word for word in words if word not in FLAGS]
    if unknown or not words:
        raise argparse.ArgumentTypeError(
            f"unknown flag {(unknown or [text])[0]!r}; choose among {', '.join(FLAGS)} or none"
        )
    return words


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: {text!r}")
    return value


def _pid(text: str) -> int:
    if not text.isdigit() or int(text) == 0:
        raise argparse.ArgumentTypeError(f"not a pid: {text!r}")
    return int(text)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be 0 or more seconds: {text!r}")
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


def _ring_size(text: str) -> int:
    from iket_tui.agent.ir_store import parse_size
    from iket_tui.agent.kernel_options import MAX_RING_BYTES, MIN_RING_BYTES

    value = parse_size(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"not a size (such as 256M or 1G): {text!r}")
    if not MIN_RING_BYTES <= value <= MAX_RING_BYTES:
        raise argparse.ArgumentTypeError(f"the ring size must be between 1M and 64G: {text!r}")
    return value


def _max_passes(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def _ring_chunks(text: str) -> int:
    from iket_tui.agent.kernel_options import MIN_RING_CHUNKS

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < MIN_RING_CHUNKS or value & (value - 1):
        raise argparse.ArgumentTypeError(f"ring chunks must be a power of two, at least {MIN_RING_CHUNKS}: {text!r}")
    if value > 1 << 16:
        raise argparse.ArgumentTypeError(f"ring chunks must be at most {1 << 16}: {text!r}")
    return value
