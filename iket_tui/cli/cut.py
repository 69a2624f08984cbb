"""``iket-tui cut``: a shorter recording of the stretch between two times of another, which
replays, dumps and exports like the original over that stretch."""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterable
from pathlib import Path

from iket_tui.cli.errors import check_writable, say, shown
from iket_tui.cli.files import reads_its_file
from iket_tui.cli.span import nothing_in, time_span
from iket_tui.cli.unfinished import RunningLaunches
from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import encode_batch
from iket_tui.sources.reading import RecordingInfo, RecordingReader, recording_notes
from iket_tui.sources.recorder import RecordingWriter
from iket_tui.sources.span import SpanContext, SpanCursor, TimeSpan, Where

_RUN = 1000
"""Messages written together in one batch frame at most."""
_OWN_FRAMES = frozenset({m.HELLO, m.PROCESS, m.BYE})
"""Messages a cut writes in frames of their own, as a recorder receives them."""
_REWRITTEN = frozenset({m.RECORDING, m.CHECKPOINT, m.END})
"""The recording's own frames: the cut writes its own header, checkpoints and end."""


@reads_its_file
def cmd_cut(args: argparse.Namespace) -> int:
    """Write the messages of a recording between ``--from`` and ``--to`` (seconds from its start,
    as dump's time column reads) to a new recording, after what the reader of that stretch
    needs of what came before it; what the reader noticed about the original goes to stderr."""
    span = time_span(args)
    check_writable(args.output)
    inside, written = cut(args.file, args.output, span)
    before = f", and {written - inside} from before it that they need," if written > inside else ""
    say(f"wrote {inside} messages {span.said()}{before} to {shown(args.output)}")
    return 0


def cut(path: Path, output: Path, span: TimeSpan) -> tuple[int, int]:
    """Cut ``path`` to ``span`` into ``output``; the messages of the span, and all those
    written. A recording cut short or damaged gives what it holds intact; its notes are said
    on stderr."""
    reader = RecordingReader(path, rows=True)
    cursor = SpanCursor(span)
    context = SpanContext()
    launches = RunningLaunches()  # what runs on the GPU where the span starts
    out: _CutWriter | None = None
    running = 0
    opened = False  # a file that is no recording at all has no notes to say, only its error
    try:
        for chunk in reader.chunks():
            opened = True
            for item in chunk:
                where = cursor.where(item)
                if where is Where.BEFORE:
                    context.take(item)
                    if isinstance(item, dict):
                        launches.apply(item)
                elif where is Where.INSIDE:
                    if out is None:
                        out = _CutWriter(output, reader.info, m.t_ns_of(item))
                        out.extend(context.messages())
                        running = sum(len(timeline.running()) for timeline in launches.kernels.timelines.values())
                    out.add(item)
        if out is None:
            raise nothing_in(path, span, cursor)
        out.close(f"cut {span.said()} of {path.name}")
        written = out.written
    finally:
        if out is not None:
            out.close("cut stopped")
        for note in recording_notes(reader.info, verb="read") if opened else ():
            say(f"{path}: {note}")
        if running:
            were, its = ("launch was", "its") if running == 1 else ("launches were", "their")
            say(f"{running} kernel {were} running at {span.from_s:g} s: the cut holds {its} events from there on")
    return cursor.inside, written


class _CutWriter:
    """Writes a cut's messages: pass rows and other messages in batch frames, each ``hello``,
    ``process`` and ``bye`` in a frame of its own."""

    def __init__(self, output: Path, info: RecordingInfo, from_ns: int | None) -> None:
        # The stretch's first time in the header: a replay passes the context before it at once.
        self._writer = RecordingWriter(
            output, source=info.source, checkpoint_interval_s=math.inf, context_until_ns=from_ns
        )
        self._run: list[m.Item] = []

    @property
    def written(self) -> int:
        """Stream messages written (the header, checkpoints and end not counted)."""
        return self._writer.messages

    def extend(self, items: Iterable[m.Item]) -> None:
        for item in items:
            self.add(item)

    def add(self, item: m.Item) -> None:
        if isinstance(item, dict):
            kind = item.get("type")
            if kind in _REWRITTEN:
                return
            if kind in _OWN_FRAMES:
                self._flush()
                self._writer.write(item)
                return
        self._run.append(item)
        if len(self._run) >= _RUN:
            self._flush()

    def _flush(self) -> None:
        if self._run:
            self._writer.write_frames(encode_batch(self._run), self._run)
            self._run = []

    def close(self, reason: str) -> None:
        if self._writer.closed:
            return
        self._flush()
        self._writer.close(reason)
