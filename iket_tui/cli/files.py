"""The commands on a recording file: replay it in the UI, dump it as lines, export it, write a reproducer from it."""

from __future__ import annotations

import argparse
import sys

from iket_tui.cli.errors import UsageError, check_directory_writable, check_writable, say
from iket_tui.cli.show import show
from iket_tui.outputs import OutputError, write_file
from iket_tui.sources.base import SourceError
from iket_tui.sources.lines import KernelEvents, TextLines, json_line
from iket_tui.sources.reading import RecordingReader, recording_notes
from iket_tui.sources.replay import RecordingSource


def cmd_replay(args: argparse.Namespace) -> int:
    """The live UI over a recording, at its speed or another, until the user quits."""
    source = RecordingSource(args.file, speed=args.speed, start_paused=args.paused)
    source.open()
    try:
        code, signum = show(source, args.stuck_after)
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
    for note in recording_notes(reader.info, verb="read"):
        say(f"{args.file}: {note}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Write a recording as a Chrome trace (for Perfetto) or a speedscope profile of pass timings."""
    import json

    from iket_tui.export import ExportError, events_in, export, recording_session

    check_writable(args.output)
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
        raise UsageError(f"{args.output}: {exc.strerror or type(exc).__name__}") from None
    for note in recording_notes(reader.info, verb="read"):
        say(f"{args.file}: {note}")
    say(f"wrote {events_in(document)} events to {args.output}")
    return 0


def cmd_repro(args: argparse.Namespace) -> int:
    """Write a self-contained reproducer of a failed compile in a recording; exit code 2 when
    its ``repro.py`` cannot make the failure happen by itself."""
    from iket_tui.repro import ReproError, write

    check_directory_writable(args.output)
    reader = RecordingReader(args.file)
    messages = list(reader)
    try:
        found = write(messages, args.output, args.compile, source=reader.info.source)
    except ReproError as exc:
        raise UsageError(f"{args.file}: {exc}") from None
    except OutputError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"{args.output}: {exc.strerror or type(exc).__name__}") from None
    say(f"wrote a reproducer of compile {found.compile} ({found.name}) to {found.directory}: {found.note}")
    return 0 if found.runnable else 2
