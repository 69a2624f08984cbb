"""Kernels a process compiled again, and why: each compile whose agent told its inputs joins the
series of earlier compiles of the same kernel in its process, and keeps what differed from the
one before it (target, pass configuration, label, jit arguments, the input module's structural
hash), so that the tree can say ``compiled 12 times`` and what changed.

A kernel is the same when the process, the kind of compile, what asked for it (the jit
function, else the function and file that called the compiler) and the kernel's name are.
Compiles from agents that do not tell their inputs (older recordings) join no series.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from iket_tui.model.nodes import CompileNode

UNSET: Final = "(unset)"
"""A pass configuration key one of the two compiles did not have."""
SAME_INPUTS: Final = "same target, pass config, label and input module"
"""What a repeat says when nothing it was given differed from the compile before it."""

SeriesKey = tuple[int, str | None, str | None, str | None, str]


class Recompiles:
    """The series of compiles of each kernel, by process."""

    def __init__(self) -> None:
        self._series: dict[SeriesKey, list[CompileNode]] = {}

    def add(self, comp: CompileNode) -> None:
        """``comp`` has begun: put it after the earlier compiles of its kernel, noting what differed
        from the last one, and have those earlier compiles' rows redrawn (their count changed)."""
        origin = comp.origin
        if origin is None or origin.input_hash is None or comp.series is not None:
            return
        key: SeriesKey = (
            id(comp.process),
            origin.kind,
            origin.jit or origin.function,
            None if origin.jit else origin.file,
            comp.kernel or comp.label,
        )
        series = self._series.setdefault(key, [])
        if series:
            comp.changes = differences(series[-1], comp)
            for earlier in series:
                earlier.version += 1
        series.append(comp)
        comp.series = series


Change = tuple[str, str]
"""What differed, as ``(what, how)``:
``("tl.disable_tma_lower", "pass config tl.disable_tma_lower (unset) → True")``."""


def differences(before: CompileNode, after: CompileNode) -> tuple[Change, ...]:
    """What ``after`` was given that ``before`` was not."""
    found: list[Change] = []
    if before.target != after.target:
        found.append(("target", f"target {before.target or UNSET} → {after.target or UNSET}"))
    old, new = before.origin, after.origin
    old_config = (old.config if old else None) or {}
    new_config = (new.config if new else None) or {}
    for key in sorted(old_config.keys() | new_config.keys()):
        if old_config.get(key) != new_config.get(key):
            found.append((key, f"pass config {key} {old_config.get(key, UNSET)} → {new_config.get(key, UNSET)}"))
    if before.label != after.label:
        found.append(("label", f"label {before.label or UNSET} → {after.label or UNSET}"))
    old_args, new_args = (old.args if old else None), (new.args if new else None)
    if old_args != new_args:
        found.append(("arguments", f"jit arguments ({old_args or ''}) → ({new_args or ''})"))
    old_hash, new_hash = (old.input_hash if old else None), (new.input_hash if new else None)
    if old_hash != new_hash:
        found.append(("input module", f"input module structural hash {old_hash} → {new_hash}"))
    return tuple(found)


def repeat_note(comp: CompileNode) -> str:
    """What a compile's row says of its kernel's compiles: ``compiled 3 times`` and, for a repeat,
    what differed from the compile before it; empty for a kernel compiled once."""
    series = comp.series
    if series is None or len(series) < 2:
        return ""
    note = f"compiled {len(series)} times"
    if comp is series[0]:
        return note
    if not comp.changes:
        return f"{note}: {SAME_INPUTS}"
    return f"{note}: {', '.join(what for what, _how in comp.changes)} changed"


def compile_count(comp: CompileNode) -> str:
    """Which of its kernel's compiles ``comp`` is, ``(2 of 3)``; empty for a kernel compiled once."""
    series = comp.series
    if series is None or len(series) < 2:
        return ""
    return f"({series.index(comp) + 1} of {len(series)})"


def repeat_fields(comp: CompileNode) -> list[tuple[str, str]]:
    """What the detail pane says of a compile's kernel's compiles, as labelled fields; none for a
    kernel compiled once."""
    series = comp.series
    if series is None or len(series) < 2:
        return []
    place = series.index(comp) + 1
    fields = [("compiled", f"{len(series)} times in this process; this is compile {place} of them")]
    if place > 1:
        before = series[place - 2]
        changed = "; ".join(how for _what, how in comp.changes) or f"nothing ({SAME_INPUTS})"
        fields.append((f"changed since #{before.id}", changed))
        diff = comp.origin.input_diff if comp.origin is not None else None
        if diff:
            fields.append(("input module diff", "\n" + diff))
    return fields
