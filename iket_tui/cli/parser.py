"""The ``iket-tui`` arguments: every command, its options, and the command function it runs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import NoReturn

from iket_tui import __version__
from iket_tui.cli import serve as serving
from iket_tui.cli.errors import EXIT_BAD_INPUT, PROG
from iket_tui.cli.files import cmd_dump, cmd_export, cmd_replay
from iket_tui.cli.hangs import cmd_abort, cmd_repro
from iket_tui.cli.live import cmd_attach, cmd_demo, cmd_record, cmd_run
from iket_tui.cli.questions import cmd_ir, cmd_ls, cmd_stacks
from iket_tui.outputs import STDOUT


def build_parser() -> argparse.ArgumentParser:
    """The parser; each command sets ``handler`` to the function that runs it."""
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
    run.set_defaults(handler=cmd_run)

    attach = commands.add_parser("attach", help="watch a program that already runs the agent")
    attach.add_argument("target", metavar="TARGET", help="a pid, or the path of an agent socket")
    attach.add_argument("--record", type=Path, metavar="FILE", help="also record the stream to FILE")
    ui_options(attach)
    attach.set_defaults(handler=cmd_attach)

    record = commands.add_parser("record", help="record a running agent's stream to a file, without the UI")
    record.add_argument("target", metavar="TARGET", help="a pid, or the path of an agent socket")
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
    record.set_defaults(handler=cmd_record)

    replay = commands.add_parser("replay", help="the live UI over a recording")
    replay.add_argument("file", type=Path, metavar="FILE")
    replay.add_argument(
        "--speed", type=_speed, default=1.0, metavar="X", help="playback speed; 0 or 'max' for as fast as possible"
    )
    replay.add_argument("--paused", action="store_true", help="start paused")
    ui_options(replay)
    replay.set_defaults(handler=cmd_replay)

    dump = commands.add_parser("dump", help="print a recording, one line per message")
    dump.add_argument("file", type=Path, metavar="FILE")
    dump.add_argument("--format", choices=("text", "jsonl"), default="text")
    dump.add_argument(
        "--records", action="store_true", help="also one line per kernel event after each kernel_records batch"
    )
    dump.set_defaults(handler=cmd_dump)

    export = commands.add_parser(
        "export", help="convert a recording for Perfetto (Chrome trace JSON) or speedscope (pass timings)"
    )
    export.add_argument("file", type=Path, metavar="FILE")
    export.add_argument(
        "-o", "--output", type=_output, required=True, metavar="OUT", help="the file to write; - for standard output"
    )
    export.add_argument("--format", choices=("chrome", "speedscope"), default="chrome")
    export.set_defaults(handler=cmd_export)

    stacks = commands.add_parser("stacks", help="print the stacks of every thread of a target that runs the agent")
    stacks.add_argument("target", metavar="TARGET", help="a pid, or the path of an agent socket")
    stacks.add_argument("--native", action="store_true", help="also native stacks, through py-spy")
    stacks.add_argument("--all", action="store_true", help="include the threads of iket-tui's own agent")
    stacks.add_argument("--timeout", type=_positive, default=10.0, metavar="S", help="wait for the answer (10)")
    start_agent(stacks)
    stacks.set_defaults(handler=cmd_stacks)

    ir = commands.add_parser("ir", help="print the IR before or after a pass of a recent compile of a running target")
    ir.add_argument("target", metavar="TARGET", help="a pid, or the path of an agent socket")
    ir.add_argument("--compile", type=int, required=True, metavar="N", help="the compile (its number in the tree)")
    ir.add_argument("--pass", dest="seq", type=int, required=True, metavar="SEQ", help="the pass's sequence number")
    views = ir.add_mutually_exclusive_group()
    views.add_argument("--before", dest="view", action="store_const", const="before", help="the IR it was given")
    views.add_argument("--after", dest="view", action="store_const", const="after", help="the IR it returned")
    views.add_argument("--diff", dest="view", action="store_const", const="diff", help="what it changed (default)")
    start_agent(ir)
    ir.set_defaults(handler=cmd_ir, view="diff")

    repro = commands.add_parser(
        "repro",
        help="write a self-contained reproducer for a failed compile (a pass or nvcc) in a recording, "
        "or with --stuck for a pass that hangs",
    )
    repro.add_argument(
        "file", type=Path, metavar="FILE", help="a recording; with --stuck also a live TARGET (a pid or socket path)"
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

    abort = commands.add_parser(
        "abort", help="make a running compile of a target fail with CompileAborted; the program goes on"
    )
    abort.add_argument("target", metavar="TARGET", help="a pid, or the path of an agent socket")
    abort.add_argument(
        "--compile", type=int, metavar="N", help="the compile to abort (default: the one whose pass runs longest)"
    )
    abort.set_defaults(handler=cmd_abort)

    ls = commands.add_parser("ls", help="list the live agents of this user")
    ls.set_defaults(handler=cmd_ls)

    demo = commands.add_parser("demo", help="run the bundled TileLang program under the UI, or replay its recording")
    demo.add_argument(
        "--recording",
        action="store_true",
        help="replay the bundled H200 recording of the demo (what it does without TileLang)",
    )
    demo.add_argument("--record", type=Path, metavar="FILE", help="also record the stream to FILE")
    demo.add_argument("--no-ui", action="store_true", help="only record (with --record)")
    demo.add_argument(
        "--no-kernels", dest="kernels", action="store_false", help="do not trace kernels (traced by default)"
    )
    kernel_options(demo)
    ui_options(demo)
    demo.set_defaults(handler=cmd_demo)

    serve = commands.add_parser(
        "serve",
        help="serve the UI of replay, attach or run to a browser (textual-serve)",
        description=serving.DESCRIPTION,
        epilog=serving.EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serving.add_arguments(serve)
    serve.set_defaults(handler=serving.cmd_serve)
    return parser


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{PROG}: {message} (see `{self.prog} --help`)\n")


def _output(text: str) -> Path:
    """A file to write; ``-`` is standard output."""
    return STDOUT if text == "-" else Path(text)


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
