"""Which passes one client wants to see: the ``filter`` of its hello, applied by its sender.

A client may name pass names to keep (``passes``: shell-style globs, as :mod:`fnmatch` reads
them, any of which keeps a pass) and a deepest nesting level (``depth``: 0 keeps top-level passes
only), as TileLang's own ``StackedPassInstrument`` does with ``capture_predicate`` and
``capture_nested=False``. Only pass events are ever left out; compiles, contexts, codegen and
failures always reach the client. A pass kept inside passes left out is given the nearest kept
pass around it as its parent (none: it becomes a top-level row), as TileLang's instrument does,
and keeps its real depth.

What is left out is counted, never silently lost: :class:`PassFilter` counts the pass events
and the passes it left out, and the client's sender reports both in its ``sync``, heartbeats
and ``bye``. The filter runs on the client's sender thread, on batches the compiler has already
queued, never on the compiler's thread.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Final

from iket_tui.protocol import messages as m
from iket_tui.protocol.messages import Outgoing

FILTER_FIELD: Final = "filter"
"""The key of a client hello's filter: a map with ``passes`` and ``depth``, both optional."""
MAX_GLOBS: Final = 64
MAX_GLOB_CHARS: Final = 256
MAX_DEPTH: Final = 1_000_000
_NAMES_CACHED: Final = 4096
"""Pass names whose verdict is remembered; TileLang has about 70, so this is only ever a bound."""

_PASS_START: Final = m.PASS_START
_PASS_EVENTS: Final = m.PASS_EVENTS


class FilterError(ValueError):
    """A client's filter that cannot be applied, in one line."""


@dataclass(frozen=True)
class PassChoice:
    """Which passes a client keeps: a name matching any of ``globs`` (every name when there are
    none) at a depth no deeper than ``depth`` (any depth when ``None``)."""

    globs: tuple[str, ...] = ()
    depth: int | None = None

    @property
    def keeps_everything(self) -> bool:
        return not self.globs and self.depth is None

    @classmethod
    def of_hello(cls, hello: dict[str, Any]) -> PassChoice:
        """The choice a client's hello names (every pass when it names none); raises
        :class:`FilterError` for a filter that is not a map of a glob list and a depth."""
        field = hello.get(FILTER_FIELD)
        if field is None:
            return cls()
        if not isinstance(field, dict):
            raise FilterError(f"a filter that is not a map ({type(field).__name__})")
        globs = field.get("passes")
        if globs is None:
            globs = []
        if not isinstance(globs, list) or len(globs) > MAX_GLOBS:
            raise FilterError(f"a filter whose passes are not a list of at most {MAX_GLOBS} globs")
        for glob in globs:
            if type(glob) is not str or not 0 < len(glob) <= MAX_GLOB_CHARS:
                raise FilterError(f"a pass glob that is not a string of 1 to {MAX_GLOB_CHARS} characters")
        depth = field.get("depth")
        if depth is not None and (type(depth) is not int or not 0 <= depth <= MAX_DEPTH):
            raise FilterError(f"a filter depth that is not a whole number from 0 to {MAX_DEPTH}")
        return cls(tuple(dict.fromkeys(globs)), depth)


class PassFilter:
    """One client's choice, applied to its stream in order, with what it left out counted.

    :meth:`apply` sees every message the client would otherwise be sent, in order, so that it
    can follow which open passes it left out and re-parent the passes kept inside them.
    """

    def __init__(self, choice: PassChoice) -> None:
        self.choice = choice
        self.events = 0
        """Pass events left out so far (starts, ends and incompletes)."""
        self.passes = 0
        """Passes left out so far (their starts)."""
        self._keeps_everything = choice.keeps_everything
        self._globs = choice.globs
        self._depth = choice.depth
        self._verdicts: dict[str, bool] = {}
        self._hidden: dict[tuple[int, int], int | None] = {}
        """(compile, seq) of each open pass left out -> the nearest kept pass around it."""

    def apply(self, batch: Iterable[Outgoing]) -> list[Outgoing]:
        """``batch`` without the pass events this client does not want."""
        if self._keeps_everything:
            return list(batch)
        kept: list[Outgoing] = []
        hidden = self._hidden
        for item in batch:
            if isinstance(item, tuple):
                kind, compile_id, name, seq, depth, parent = item[0], item[1], item[3], item[4], item[5], item[6]
            else:
                kind = item.get("type")
                if kind not in _PASS_EVENTS:
                    if kind == m.COMPILE_END and hidden:
                        self._forget_compile(item.get("compile"))
                    kept.append(item)
                    continue
                compile_id, name, seq, depth, parent = (
                    item.get(key) for key in ("compile", "name", "seq", "depth", "parent")
                )
            if self._keeps(name, depth):
                if hidden and (compile_id, parent) in hidden:
                    kept.append(_with_parent(item, hidden[(compile_id, parent)]))
                else:
                    kept.append(item)
                continue
            self.events += 1
            if kind == _PASS_START:
                self.passes += 1
                hidden[(compile_id, seq)] = hidden.get((compile_id, parent), parent)
            else:
                hidden.pop((compile_id, seq), None)
        return kept

    def _keeps(self, name: object, depth: object) -> bool:
        limit = self._depth
        if limit is not None and type(depth) is int and depth > limit:
            return False
        if not self._globs or type(name) is not str:
            return True
        verdict = self._verdicts.get(name)
        if verdict is None:
            if len(self._verdicts) >= _NAMES_CACHED:
                self._verdicts.clear()
            verdict = any(fnmatchcase(name, glob) for glob in self._globs)
            self._verdicts[name] = verdict
        return verdict

    def counts(self) -> dict[str, int]:
        """What was left out so far, as the fields of a ``sync``, heartbeat or ``bye``."""
        return {"filtered": self.events, "filtered_passes": self.passes}

    def _forget_compile(self, compile_id: object) -> None:
        """A compile ended: the passes of it left out that never finished are over too."""
        for key in [key for key in self._hidden if key[0] == compile_id]:
            del self._hidden[key]


def _with_parent(item: Outgoing, parent: int | None) -> Outgoing:
    if isinstance(item, tuple):
        return (*item[:6], parent, *item[7:])
    return {**item, "parent": parent}
