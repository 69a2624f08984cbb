"""``iket-tui diff``: what changed between the compiles and kernel launches of two recordings (or
two compiles, or two launches, of one), as aligned text or as JSON, with an exit code a CI job can
gate on."""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iket_tui.cli.errors import UsageError, check_writable, say
from iket_tui.export import READ_CHUNK
from iket_tui.export.common import launch_process
from iket_tui.export.stream import CompileStream, forget, grid_of
from iket_tui.model.compare import (
    Comparison,
    CompileSummary,
    PairChange,
    Shapes,
    compare,
    compare_pair,
    process_name,
    summarize,
)
from iket_tui.model.compare_kernels import (
    EventSummary,
    LaunchComparison,
    LaunchSummary,
    block_words,
    compare_launch,
    compare_launches,
    summarize_launch,
)
from iket_tui.model.compare_text import comparison_lines
from iket_tui.model.nodes import CompileNode, ProcessNode
from iket_tui.outputs import STDOUT
from iket_tui.sources.reading import RecordingReader, recording_notes


@dataclass
class Summaries:
    """A recording as a comparison reads it: its compiles and its kernel launches, summarised,
    and what the reader noticed about the file (a cut, damage skipped), as ``dump`` says it."""

    compiles: list[CompileSummary] = field(default_factory=list)
    launches: list[LaunchSummary] = field(default_factory=list)
    notes: tuple[str, ...] = ()


class _Summaries(CompileStream):
    """A recording's compiles summarised as each ends, then let go: memory stays bounded by the
    compiles open at once, whatever the size of the recording. Kernel events wait in the stream's
    spool until the end, when each launch is summarised in turn."""

    def __init__(self, shapes: Shapes) -> None:
        super().__init__(keep_kernels=True)
        self.summaries = Summaries()
        self._shapes = shapes

    def _process(self, process: ProcessNode | None) -> str:
        processes = self.session.tree.processes
        order = processes.index(process) + 1 if process is not None and process in processes else 1
        return process_name(process.rank if process is not None else None, order)

    def _ended(self, comp: CompileNode) -> None:
        self.summaries.compiles.append(summarize(comp, self._process(comp.process), self._shapes))
        forget(comp)

    def _finish(self) -> int:
        for launch in self._close():
            events = self.kernel_events.events(launch)
            process = self._process(launch_process(self.session, launch))
            self.summaries.launches.append(summarize_launch(launch, process, events, grid_of(events)))
        return len(self.summaries.compiles)


def read_summaries(path: Path, shapes: Shapes | None = None) -> Summaries:
    """Every compile and kernel launch of the recording at ``path``, summarised (the compiles'
    pass sequences shared through ``shapes``), and what the reader noticed about the file."""
    reader = RecordingReader(path, rows=True, chunk_size=READ_CHUNK)
    stream = _Summaries({} if shapes is None else shapes)
    try:
        for chunk in reader.chunks():
            stream.feed(chunk)
        stream.finish()
    finally:
        stream.kernel_events.close()
    stream.summaries.notes = recording_notes(reader.info, verb="compared")
    return stream.summaries


def _read_both(first: Path, second: Path) -> tuple[Summaries, Summaries]:
    """Both recordings summarised, the second in a forked process while this one reads the first:
    reading is most of a diff's time, and the two readings share nothing. An error of either
    is raised here, the first recording's first."""
    with multiprocessing.get_context("fork").Pool(1) as pool:
        pending = pool.apply_async(read_summaries, (second,))
        read_first = read_summaries(first)
        return read_first, pending.get()


def cmd_diff(args: argparse.Namespace) -> int:
    """Compare two recordings' compiles and launches, or two compiles (``--compile N --compile
    M``) or two launches (``--launch N --launch M``); exit 1 when anything named by
    ``--fail-on`` is flagged."""
    check_writable(STDOUT, stdout=True)
    chosen: list[int] = args.compile or []
    launches: list[int] = args.launch or []
    if len(chosen) not in (0, 2):
        raise UsageError("--compile is given twice or not at all: --compile N --compile M")
    if len(launches) not in (0, 2):
        raise UsageError("--launch is given twice or not at all: --launch N --launch M")
    if args.other is None and not chosen and not launches:
        raise UsageError("diff needs two recordings, or one and --compile N --compile M (or --launch N --launch M)")
    if args.other is not None:
        a, b = _read_both(args.file, args.other)
        notes_a, notes_b = a.notes, b.notes
    else:
        a = b = read_summaries(args.file)
        notes_a, notes_b = a.notes, ()
    min_ns = round(args.min_ms * 1_000_000)
    ranges = {"slower_pct": args.range_slower, "min_ns": round(args.range_min_ns)}
    if chosen or launches:
        pairs: tuple[PairChange, ...] = ()
        if chosen:
            first = _compile(a.compiles, chosen[0], args.file)
            second = _compile(b.compiles, chosen[1], args.other or args.file)
            pairs = (compare_pair(first, second, slower_pct=args.slower, min_ns=min_ns),)
        launched = LaunchComparison()
        if launches:
            before = _launch(a.launches, launches[0], args.file)
            after = _launch(b.launches, launches[1], args.other or args.file)
            launched = LaunchComparison((compare_launch(before, after, **ranges),))
        comparison = Comparison(pairs, (), (), launches=launched)
    else:
        comparison = compare(a.compiles, b.compiles, slower_pct=args.slower, min_ns=min_ns)
        comparison = Comparison(
            comparison.pairs,
            comparison.only_a,
            comparison.only_b,
            comparison.incomplete,
            launches=compare_launches(a.launches, b.launches, **ranges),
        )
    names = (str(args.file), str(args.other or args.file))
    flags = comparison.flags()
    failing = [flag for flag in flags if flag in args.fail_on]
    notes = {names[0]: notes_a, names[1]: notes_b} if args.other is not None else {names[0]: notes_a}
    for name, said in notes.items():
        for note in said:
            say(f"{name}: {note}")
    if args.format == "json":
        document = _json(comparison, names, notes, args, flags, failing)
        sys.stdout.write(json.dumps(document, indent=1) + "\n")
    else:
        lines = comparison_lines(comparison, names, args.passes, flags, failing)
        sys.stdout.write("".join(line + "\n" for line in lines))
    return 1 if failing else 0


def _compile(summaries: list[CompileSummary], number: int, path: Path) -> CompileSummary:
    """The compile numbered ``number`` (the first process's, of several that have one)."""
    for summary in summaries:
        if summary.compile == number:
            return summary
    known = ", ".join(str(s.compile) for s in summaries[:10]) or "none"
    raise UsageError(f"{path}: no compile {number} (compiles: {known}{', ...' if len(summaries) > 10 else ''})")


def _launch(summaries: list[LaunchSummary], number: int, path: Path) -> LaunchSummary:
    """The launch numbered ``number`` (the first of several processes' or modules' that have one)."""
    for summary in summaries:
        if summary.launch == number:
            return summary
    known = ", ".join(str(s.launch) for s in summaries[:10]) or "none"
    raise UsageError(f"{path}: no launch {number} (launches: {known}{', ...' if len(summaries) > 10 else ''})")


def _summary_json(summary: CompileSummary) -> dict[str, Any]:
    return {
        "process": summary.process,
        "compile": summary.compile,
        "kernel": summary.kernel,
        "label": summary.label,
        "duration_ns": summary.duration_ns,
        "codegen_ns": summary.codegen_ns,
        "failed": summary.failed,
        "error": summary.error,
    }


def _launch_json(summary: LaunchSummary) -> dict[str, Any]:
    return {
        "process": summary.process,
        "launch": summary.launch,
        "kernel": summary.kernel,
        "grid": list(summary.grid),
        "compile": summary.compile,
        "duration_ns": summary.duration_ns,
        "status": summary.status,
    }


def _event_json(summary: EventSummary | None) -> dict[str, Any] | None:
    """An event name of one launch: count, its ranges' own time at p50 and p99 and all together, payload range."""
    if summary is None:
        return None
    return {
        "count": summary.count,
        "unbalanced": summary.unbalanced,
        "p50_ns": summary.p50_ns,
        "p99_ns": summary.p99_ns,
        "total_ns": summary.total_ns,
        "payload": list(summary.payload) if summary.payload is not None else None,
    }


def _json(
    comparison: Comparison,
    names: tuple[str, str],
    notes: dict[str, tuple[str, ...]],
    args: argparse.Namespace,
    flags: tuple[str, ...],
    failing: list[str],
) -> dict[str, Any]:
    return {
        "a": names[0],
        "b": names[1],
        "thresholds": {
            "slower_pct": args.slower,
            "min_ns": round(args.min_ms * 1_000_000),
            "range_slower_pct": args.range_slower,
            "range_min_ns": round(args.range_min_ns),
        },
        "pairs": [
            {
                "a": _summary_json(pair.a),
                "b": _summary_json(pair.b),
                "flags": list(pair.flags()),
                "added": list(pair.added),
                "removed": list(pair.removed),
                "moved": list(pair.moved),
                "failure": pair.failure,
                "passes": [
                    {
                        "name": change.name,
                        "before_ns": change.before_ns,
                        "after_ns": change.after_ns,
                        "change_ns": change.change_ns,
                        "change_pct": change.change_pct,
                        "slower": change.slower,
                        "before_runs": change.before_runs,
                        "after_runs": change.after_runs,
                    }
                    for change in pair.passes
                ],
            }
            for pair in comparison.pairs
        ],
        "only_a": [_summary_json(s) for s in comparison.only_a],
        "only_b": [_summary_json(s) for s in comparison.only_b],
        "incomplete": [_summary_json(s) for s in comparison.incomplete],
        "launches": [
            {
                "a": _launch_json(change.a),
                "b": _launch_json(change.b),
                "flags": list(change.flags()),
                "events": [
                    {
                        "name": event.name,
                        "kind": event.kind,
                        "before": _event_json(event.before),
                        "after": _event_json(event.after),
                        "change_ns": event.change_ns,
                        "slower": event.slower,
                        "count_changed": event.count_changed,
                        "payload_changed": event.payload_changed,
                    }
                    for event in change.events
                ],
                "blocks": [
                    {
                        "block": block_words(block.block),
                        "before_ns": block.before_ns,
                        "after_ns": block.after_ns,
                        "change_ns": block.change_ns,
                    }
                    for block in change.blocks
                ],
            }
            for change in comparison.launches.pairs
        ],
        "launches_only_a": [_launch_json(s) for s in comparison.launches.only_a],
        "launches_only_b": [_launch_json(s) for s in comparison.launches.only_b],
        "notes": {name: list(said) for name, said in notes.items()},
        "flags": list(flags),
        "failing": failing,
    }
