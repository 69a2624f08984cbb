"""The commands on a recording file: replay it in the UI, dump it as lines, export it, write a reproducer from it."""

from __future__ import annotations

import argparse
import errno
import sys
from pathlib import Path

from iket_tui.cli.errors import UsageError, check_writable, say, shown
from iket_tui.cli.repro_output import check_repro_output, write_repro
from iket_tui.cli.show import show
from iket_tui.outputs import OutputError, write_file
from iket_tui.sources.base import SourceError
from iket_tui.sources.lines import KernelEvents, TextLines, json_line
from iket_tui.sources.reading import RecordingReader, recording_notes
from iket_tui.sources.replay import RecordingSource


def cmd_replay(args: argparse.Namespace) -> int:
    """The live UI over a recording, at its speed or another, until the user quits."""
    return replay(args.file, speed=args.speed, paused=args.paused, stuck_after_s=args.stuck_after)


def replay(path: Path, *, speed: float, paused: bool, stuck_after_s: float) -> int:
    """The live UI over the recording at ``path`` until the user quits; the exit code."""
    source = RecordingSource(path, speed=speed, start_paused=paused)
    source.open()
    try:
        code, signum = show(source, stuck_after_s)
    finally:
        source.close()
    if source.error:
        raise SourceError(source.error)
    return 128 + signum if signum is not None else code


def cmd_dump(args: argparse.Namespace) -> int:
    """Print a recording one line per message (text or JSON lines), for reading or for other
    tools; what the reader noticed about the file goes to stderr."""
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
    notes = recording_notes(reader.info, verb="read") + (expander.notes() if expander is not None else ())
    for note in notes:
        say(f"{args.file}: {note}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Write a recording as a Chrome trace (for Perfetto) or a speedscope profile of pass timings."""
    import json

    from iket_tui.export import ExportError, events_in, export, recording_session, session_notes

    check_writable(args.output, stdout=True)
    reader = RecordingReader(args.file)
    session = recording_session(reader)
    try:
        document = export(session, args.format, name=args.file.name)
    except ExportError as exc:
        raise UsageError(f"{args.file}: {exc}") from None
    data = json.dumps(document, separators=(",", ":"), allow_nan=False).encode("utf-8")
    try:
        write_file(args.output, data)  # under a private name, then renamed onto it: see iket_tui.outputs
    except OutputError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            raise BrokenPipeError from None  # a reader that had enough (| head): not an error
        raise UsageError(f"{args.output}: {exc.strerror or type(exc).__name__}") from None
    for note in recording_notes(reader.info, verb="read") + session_notes(session):
        say(f"{args.file}: {note}")
    say(f"wrote {events_in(document)} events to {shown(args.output)}")
    return 0


def cmd_repro(args: argparse.Namespace) -> int:
    """Write a self-contained reproducer of a failed compile in a recording (with ``-o -`` as a
    tar archive on stdout); exit code 2 when its ``repro.py`` cannot make the failure happen by
    itself."""
    from iket_tui.repro import ReproError, write

    check_repro_output(args.output)
    reader = RecordingReader(args.file)
    messages = list(reader)
    try:
        found, where = write_repro(
            args.output,
            lambda directory: write(messages, directory, args.compile, source=reader.info.source),
            lambda found: f"iket-repro-c{found.compile}",
        )
    except ReproError as exc:
        raise UsageError(f"{args.file}: {exc}") from None
    except OutputError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"{args.output}: {exc.strerror or type(exc).__name__}") from None
    say(f"wrote a reproducer of compile {found.compile} ({found.name}) to {where}: {found.note}")
    return 0 if found.runnable else 2
