"""``iket-tui diff``: what changed between the compiles of two recordings (or two compiles of
one), as aligned text or as JSON, with an exit code a CI job can gate on."""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import textwrap
from pathlib import Path
from typing import Any

from iket_tui.cli.errors import UsageError, check_writable, say
from iket_tui.durations import duration
from iket_tui.export import READ_CHUNK
from iket_tui.export.stream import CompileStream, forget
from iket_tui.model.compare import (
    Comparison,
    CompileSummary,
    PairChange,
    PassChange,
    Shapes,
    compare,
    compare_pair,
    process_name,
    summarize,
)
from iket_tui.model.nodes import CompileNode
from iket_tui.outputs import STDOUT
from iket_tui.sources.reading import RecordingReader, recording_notes

NAME_WIDTH = 34
"""The widest pass name shown whole: a row of a pass then fits in 80 columns."""


class _Summaries(CompileStream):
    """A recording's compiles summarised as each ends, then let go: memory stays bounded by the
    compiles open at once, whatever the size of the recording."""

    def __init__(self, shapes: Shapes) -> None:
        super().__init__(keep_kernels=False)
        self.summaries: list[CompileSummary] = []
        self._shapes = shapes

    def _ended(self, comp: CompileNode) -> None:
        process = comp.process
        processes = self.session.tree.processes
        order = processes.index(process) + 1 if process is not None and process in processes else 1
        rank = process.rank if process is not None else None
        self.summaries.append(summarize(comp, process_name(rank, order), self._shapes))
        forget(comp)

    def _finish(self) -> int:
        self._close()
        return len(self.summaries)


def read_summaries(path: Path, shapes: Shapes | None = None) -> tuple[list[CompileSummary], tuple[str, ...]]:
    """Every compile of the recording at ``path``, summarised (their pass sequences shared
    through ``shapes``), and what the reader noticed about the file (a cut, damage skipped), as
    ``dump`` says it."""
    reader = RecordingReader(path, rows=True, chunk_size=READ_CHUNK)
    stream = _Summaries({} if shapes is None else shapes)
    try:
        for chunk in reader.chunks():
            stream.feed(chunk)
        stream.finish()
    finally:
        stream.kernel_events.close()
    return stream.summaries, recording_notes(reader.info, verb="compared")


def _read_both(
    first: Path, second: Path
) -> tuple[tuple[list[CompileSummary], tuple[str, ...]], tuple[list[CompileSummary], tuple[str, ...]]]:
    """Both recordings summarised, the second in a forked process while this one reads the first:
    reading is most of a diff's time, and the two readings share nothing. An error of either
    is raised here, the first recording's first."""
    with multiprocessing.get_context("fork").Pool(1) as pool:
        pending = pool.apply_async(read_summaries, (second,))
        read_first = read_summaries(first)
        return read_first, pending.get()


def cmd_diff(args: argparse.Namespace) -> int:
    """Compare two recordings' compiles, or two compiles (``--compile N --compile M``); exit 1
    when anything named by ``--fail-on`` is flagged."""
    check_writable(STDOUT, stdout=True)
    chosen: list[int] = args.compile or []
    if len(chosen) not in (0, 2):
        raise UsageError("--compile is given twice or not at all: --compile N --compile M")
    if args.other is None and not chosen:
        raise UsageError("diff needs two recordings, or one and --compile N --compile M")
    if args.other is not None:
        (a, notes_a), (b, notes_b) = _read_both(args.file, args.other)
    else:
        a, notes_a = read_summaries(args.file)
        b, notes_b = a, ()
    min_ns = round(args.min_ms * 1_000_000)
    if chosen:
        first = _compile(a, chosen[0], args.file)
        second = _compile(b, chosen[1], args.other or args.file)
        pair = compare_pair(first, second, slower_pct=args.slower, min_ns=min_ns)
        comparison = Comparison((pair,), (), ())
    else:
        comparison = compare(a, b, slower_pct=args.slower, min_ns=min_ns)
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
        sys.stdout.write("".join(line + "\n" for line in _text(comparison, names, args.passes, flags, failing)))
    return 1 if failing else 0


def _compile(summaries: list[CompileSummary], number: int, path: Path) -> CompileSummary:
    """The compile numbered ``number`` (the first process's, of several that have one)."""
    for summary in summaries:
        if summary.compile == number:
            return summary
    known = ", ".join(str(s.compile) for s in summaries[:10]) or "none"
    raise UsageError(f"{path}: no compile {number} (compiles: {known}{', ...' if len(summaries) > 10 else ''})")


def _signed(ns: int) -> str:
    return ("+" if ns >= 0 else "") + duration(ns)


def _pct(change: PassChange) -> str:
    pct = change.change_pct
    return "" if pct is None else f"{pct:+.0f}%"


def _text(
    comparison: Comparison, names: tuple[str, str], shown: int, flags: tuple[str, ...], failing: list[str]
) -> list[str]:
    """The comparison as lines readable at 80 columns: each pair, its flagged passes and its
    largest changes, then the compiles without a match and a summary line."""
    lines = [f"A: {names[0]}", f"B: {names[1]}"]
    for pair in comparison.pairs:
        lines.append("")
        lines.extend(_pair_lines(pair, shown))
    if comparison.only_a or comparison.only_b:
        lines.append("")
        lines.append("without a match:")
        lines.extend(f"  only in A: {_compile_words(s)}" for s in comparison.only_a)
        lines.extend(f"  only in B: {_compile_words(s)}" for s in comparison.only_b)
    if comparison.incomplete:
        lines.append("")
        lines.extend(f"not compared (never ended): {_compile_words(s)}" for s in comparison.incomplete)
    lines.append("")
    matched = f"{len(comparison.pairs)} compile{'s' if len(comparison.pairs) != 1 else ''} matched"
    if not flags:
        lines.append(f"{matched}; nothing flagged")
    else:
        gate = f" (exit 1: {', '.join(failing)})" if failing else ""
        lines.append(f"{matched}; flagged: {', '.join(flags)}{gate}")
    return lines


def _compile_words(summary: CompileSummary) -> str:
    label = f" [{summary.label}]" if summary.label else ""
    return f"{summary.title}{label}"


def _pair_lines(pair: PairChange, shown: int) -> list[str]:
    a, b = pair.a, pair.b
    total = ""
    if a.duration_ns is not None and b.duration_ns is not None:
        total = f": {duration(a.duration_ns)} -> {duration(b.duration_ns)} ({_signed(b.duration_ns - a.duration_ns)})"
    flags = pair.flags()
    mark = f"  [{', '.join(flags)}]" if flags else ""
    numbers = f"compile {a.compile}" if a.compile == b.compile else f"compile {a.compile} -> {b.compile}"
    lines = [f"{a.process} {numbers} {a.kernel or '-'}{total}{mark}"]
    if a.label:
        lines.append(f"  label: {a.label}")
    listed = pair.top(shown)
    if listed:
        width = min(NAME_WIDTH, max(len(change.name) for change in listed))
        lines.append(f"  {'':2}{'pass':<{width}} {'before':>9} {'after':>9} {'change':>10}")
        for change in listed:
            name = change.name if len(change.name) <= width else change.name[: width - 1] + "…"
            flag = "! " if change.slower else "  "
            before = duration(change.before_ns) if change.before_ns is not None else "-"
            after = duration(change.after_ns) if change.after_ns is not None else "-"
            lines.append(
                f"  {flag}{name:<{width}} {before:>9} {after:>9} {_signed(change.change_ns):>10} {_pct(change):>6}"
            )
        more = len(pair.names) - len(listed)
        if more:
            lines.append(f"    and {more} more passes, each changed less")
    for word, names in (("added", pair.added), ("removed", pair.removed), ("moved", pair.moved)):
        if names:
            lines.extend(textwrap.wrap(", ".join(names), 78, initial_indent=f"  {word}: ", subsequent_indent="    "))
    if pair.failure == "new":
        lines.append(_shortened(f"  failed (new): {b.error or 'no error given'}"))
    elif pair.failure == "fixed":
        lines.append(_shortened(f"  fixed: failed before with {a.error or 'no error given'}"))
    if a.codegen_ns or b.codegen_ns:
        lines.append(
            f"  codegen: {duration(a.codegen_ns)} -> {duration(b.codegen_ns)} ({_signed(b.codegen_ns - a.codegen_ns)})"
        )
    return lines


def _shortened(line: str, width: int = 80) -> str:
    """The first line of ``line``, cut to ``width`` columns with an ellipsis."""
    first = line.splitlines()[0] if line else line
    return first if len(first) <= width else first[: width - 1] + "…"


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
        "thresholds": {"slower_pct": args.slower, "min_ns": round(args.min_ms * 1_000_000)},
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
        "notes": {name: list(said) for name, said in notes.items()},
        "flags": list(flags),
        "failing": failing,
    }
