"""The commands on a recording file: replay it in the UI, dump it as lines, export it, write a reproducer from it."""

from __future__ import annotations

import argparse
import errno
import functools
import sys
import time
from collections.abc import Callable
from pathlib import Path

from iket_tui.cli.errors import UsageError, check_stdout_takes, check_writable, say, shown
from iket_tui.cli.open_passes import OpenPasses
from iket_tui.cli.repro_output import check_repro_output, write_repro
from iket_tui.cli.show import show
from iket_tui.cli.span import nothing_in, time_span
from iket_tui.cli.unfinished import RunningLaunches
from iket_tui.model.behind import BehindInStream
from iket_tui.outputs import STDOUT, OutputError, reading
from iket_tui.protocol import messages as m
from iket_tui.sources.base import SourceError
from iket_tui.sources.lines import KernelEvents, TextLines, json_line
from iket_tui.sources.reading import RecordingReader, recording_notes
from iket_tui.sources.replay import RecordingSource
from iket_tui.sources.span import SpanCursor, Where


def reads_its_file(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A command that reads ``args.file`` and writes elsewhere, refusing to write that file
    itself, by any name, link or redirection (see :func:`iket_tui.outputs.reading`)."""

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        with reading(args.file):
            return command(args)

    return run


def cmd_replay(args: argparse.Namespace) -> int:
    """The live UI over a recording, at its speed or another, until the user quits."""
    return replay(
        args.file,
        speed=args.speed,
        paused=args.paused,
        stuck_after_s=args.stuck_after,
        kernel_stuck_after_s=args.kernel_stuck_after,
        max_passes=args.max_passes,
    )


def replay(
    path: Path,
    *,
    speed: float,
    paused: bool,
    stuck_after_s: float,
    kernel_stuck_after_s: float = 2.0,
    max_passes: int | None = None,
) -> int:
    """The live UI over the recording at ``path`` until the user quits; the exit code."""
    source = RecordingSource(path, speed=speed, start_paused=paused, seekable=True)
    source.open()
    try:
        code, signum = show(source, stuck_after_s, kernel_stuck_after_s=kernel_stuck_after_s, max_passes=max_passes)
    finally:
        source.close()
    if source.error:
        raise SourceError(source.error)
    return 128 + signum if signum is not None else code


@reads_its_file
def cmd_dump(args: argparse.Namespace) -> int:
    """Print a recording one line per message (text or JSON lines), for reading or for other
    tools; what the reader noticed about the file goes to stderr."""
    check_writable(STDOUT, stdout=True)  # closed, or the recording itself (>> FILE)
    span = time_span(args)
    cursor = SpanCursor(span)
    reader = RecordingReader(args.file)
    text = TextLines()
    line = json_line if args.format == "jsonl" else text.line
    expander = KernelEvents() if args.records else None
    running = RunningLaunches()
    behind = BehindInStream()
    passes = OpenPasses()
    out = sys.stdout
    for msg in reader:
        where = cursor.where(msg)
        if where is Where.AFTER:
            continue  # read on all the same: what the reader notices of the whole file is said
        shown = where is Where.INSIDE
        if shown:
            if cursor.t0_ns is not None:
                text.starts_at(cursor.t0_ns)
            out.write(line(msg) + "\n")
        if isinstance(msg, dict):  # before a span too: what is open at the end, the kernels' tables
            running.apply(msg)
            behind.apply(msg)
            passes.apply(msg)
            if expander is not None and (shown or msg.get("type") != m.KERNEL_RECORDS):
                for event in expander.events(msg):
                    out.write(line(event) + "\n")
    if cursor.inside == 0 and not span.whole:
        raise nothing_in(args.file, span, cursor)
    if span.to_s is None:  # what is left open where the recording ends; a span ends before that
        for incomplete in passes.at_end():
            out.write(line(incomplete) + "\n")
        for unfinished in running.at_end():
            out.write(line(unfinished) + "\n")
        for late in behind.at_end():
            out.write(line(late) + "\n")
    out.flush()
    notes = recording_notes(reader.info, verb="read") + (expander.notes() if expander is not None else ())
    for note in notes:
        say(f"{args.file}: {note}")
    return 0


@reads_its_file
def cmd_export(args: argparse.Namespace) -> int:
    """Write a recording as a Chrome trace (for Perfetto), a speedscope profile of pass
    timings or Perfetto's native protobuf trace, each while the recording is read, in bounded
    memory, with the bytes read shown on stderr when it is a terminal."""
    from iket_tui.export import BINARY_FORMATS, READ_CHUNK, ExportError, session_notes, stream_of
    from iket_tui.export.destination import open_destination

    check_writable(args.output, stdout=True)
    if args.output == STDOUT and args.format in BINARY_FORMATS:
        check_stdout_takes("a Perfetto trace", "| gzip > trace.perfetto-trace.gz")
    reader = RecordingReader(args.file, rows=True, chunk_size=READ_CHUNK)
    progress = _ReadProgress(args.file) if sys.stderr.isatty() else None
    try:
        with open_destination(args.output) as out:
            stream = stream_of(args.format, out.write, name=args.file.name)
            for chunk in reader.chunks():
                stream.feed(chunk)
                if progress is not None:
                    progress.show(reader.info.size)
            if progress is not None:
                progress.clear()
            count = stream.finish()
            session = stream.session
    except ExportError as exc:
        raise UsageError(f"{args.file}: {exc}") from None
    except OutputError as exc:
        raise UsageError(str(exc)) from None
    except SourceError:
        raise
    except OSError as exc:
        if exc.errno == errno.EPIPE and args.output == STDOUT:
            raise BrokenPipeError from None  # a reader that had enough (| head): not an error
        if exc.errno == errno.EPIPE:  # a FIFO named: what the user asked for was not written
            raise UsageError(f"{args.output}: broken pipe: its reader left before the export was written") from None
        raise UsageError(f"{args.output}: {exc.strerror or type(exc).__name__}") from None
    finally:
        if progress is not None:
            progress.clear()
    for note in recording_notes(reader.info, verb="read") + session_notes(session):
        say(f"{args.file}: {note}")
    say(f"wrote {count} events to {shown(args.output)}")
    return 0


class _ReadProgress:
    """One line on a terminal's stderr, rewritten in place: how much of the recording is read."""

    def __init__(self, path: Path) -> None:
        try:
            self._total = path.stat().st_size
        except OSError:
            self._total = 0
        self._path = path
        self._next = 0.0
        self._shown = False

    def show(self, done: int) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + 0.1
        share = f" ({100 * done / self._total:.0f}%)" if self._total else ""
        sys.stderr.write(f"\r\x1b[Kreading {self._path.name}: {done / 1e6:.1f} of {self._total / 1e6:.1f} MB{share}")
        sys.stderr.flush()
        self._shown = True

    def clear(self) -> None:
        if self._shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self._shown = False


@reads_its_file
def cmd_repro(args: argparse.Namespace) -> int:
    """Write a self-contained reproducer of a failed compile in a recording (with ``-o -`` as a
    tar archive on stdout); exit code 2 when its ``repro.py`` cannot make the failure happen by
    itself."""
    from iket_tui.repro import ReproError, write

    check_repro_output(args.output)
    reader = RecordingReader(args.file)
    messages = list(reader)
    for note in recording_notes(reader.info, verb="read"):  # damage skipped, a cut: said as dump says it
        say(f"{args.file}: {note}")
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
