"""The commands for a compile that hangs: a reproducer of the stuck pass (``repro --stuck``,
from a live target or a recording), and ``abort``, which makes the compile fail while the
program goes on."""

from __future__ import annotations

import argparse
from pathlib import Path

from iket_tui.cli.errors import UsageError, say
from iket_tui.cli.files import cmd_repro as cmd_repro_failure
from iket_tui.cli.files import reads_its_file
from iket_tui.cli.repro_output import check_repro_output, write_repro
from iket_tui.cli.targets import target_source
from iket_tui.durations import duration
from iket_tui.outputs import OutputError
from iket_tui.protocol import messages as m
from iket_tui.sources.reading import RecordingReader
from iket_tui.sources.requests import ask
from iket_tui.ui.abort_text import abort_lines

ABORT_TIMEOUT_S = 30.0
"""How long ``abort`` waits for the agent's answer (the agent waits up to about 11 s itself)."""
EXIT_NOT_ABORTED = 1
"""``abort``'s exit code when the compile has not failed (yet): its thread is inside native code, say."""


@reads_its_file
def cmd_repro(args: argparse.Namespace) -> int:
    """``repro``: a reproducer of a failed compile in a recording, or with ``--stuck`` of a pass
    that hangs (from a live target, or a recording that holds a capture of one)."""
    if not args.stuck:
        return cmd_repro_failure(args)
    from iket_tui.repro import ReproError, stuck_in, write_hang

    target = str(args.file)
    check_repro_output(args.output)
    try:
        if Path(target).is_file():
            reader = RecordingReader(Path(target))
            capture, source = stuck_in(list(reader), args.compile), reader.info.source
        else:
            capture, source = _stuck_now(target, args.compile)
        found, where = write_repro(
            args.output,
            lambda directory: write_hang(capture, directory, source=source),
            lambda found: f"iket-repro-c{found.compile}-p{capture.get('seq')}",
        )
    except ReproError as exc:
        raise UsageError(f"{target}: {exc}") from None
    except OutputError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"{args.output}: {exc.strerror or type(exc).__name__}") from None
    running = capture.get("running_ns")
    ran = f", running for {duration(running)}" if isinstance(running, int) else ""
    say(
        f"wrote a reproducer of the stuck pass {found.name} (pass {capture.get('seq')} of compile "
        f"{found.compile}{ran}) to {where}: {found.note}"
    )
    return 0 if found.runnable else 2


def _stuck_now(target: str, compile_id: int | None) -> tuple[m.Message, str]:
    """The capture of the pass running now in a live target, and the target's description."""
    source = target_source(target, start_agent=False)
    try:
        source.connect()
        fields = {"compile": compile_id} if compile_id is not None else {}
        answer = ask(source, m.WHAT_STUCK, **fields)
    finally:
        source.close_and_wait("done")
    if not answer.get("ok"):
        raise UsageError(f"{source.description}: {answer.get('error') or 'no capture'}")
    return answer, source.description


def cmd_abort(args: argparse.Namespace) -> int:
    """Make a running compile of a target fail with ``CompileAborted``, raised in its thread; the
    program goes on. Exit code 0 once the compile failed, 1 while it has not (its thread is inside
    native code, which the exception waits for)."""
    source = target_source(args.target, start_agent=False)
    try:
        source.connect()
        fields = {"compile": args.compile} if args.compile is not None else {}
        answer = ask(source, m.WHAT_ABORT, ABORT_TIMEOUT_S, **fields)
    finally:
        source.close_and_wait("done")
    if not answer.get("ok"):
        raise UsageError(f"{source.description}: {answer.get('error') or 'cannot abort'}")
    lines = abort_lines(answer)
    print("\n".join(lines))
    return 0 if answer.get("state") == m.ABORT_ABORTED else EXIT_NOT_ABORTED
