"""The part of a recording between two times, and what came before it that a reader needs to
make sense of it.

Times are seconds from the recording's start as ``iket-tui dump``'s time column reads them:
from the first message with a timestamp. A span starts at the first message stamped at or
after ``--from`` and ends before the first one stamped after ``--to``; a message without a
timestamp goes with the messages around it. ``dump --from/--to`` prints the span; ``cut``
writes the span after the :class:`SpanContext` (the header, each process's ``hello`` and
``process`` frames, the kernel tables and tracing state, and every message so far of the
compiles still running where the span starts), so that the shorter recording replays, dumps
and exports as a reader of the original would see that stretch.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

from iket_tui.protocol import messages as m


class Where(Enum):
    """Where a message lies against a span."""

    BEFORE = "before"
    INSIDE = "inside"
    AFTER = "after"


@dataclass(frozen=True)
class TimeSpan:
    """From ``from_s`` to ``to_s`` seconds after the recording's start; ``None`` is its start or end."""

    from_s: float | None = None
    to_s: float | None = None

    def __post_init__(self) -> None:
        for value in (self.from_s, self.to_s):
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise ValueError(f"a time must be a number of seconds, 0 or more, not {value}")
        if self.from_s is not None and self.to_s is not None and self.to_s < self.from_s:
            raise ValueError(f"--to {self.to_s:g} is before --from {self.from_s:g}")

    @property
    def whole(self) -> bool:
        """The span is the whole recording."""
        return not self.from_s and self.to_s is None

    def said(self) -> str:
        """The span in the user's words, as the options gave it."""
        start = f"{self.from_s:g} s" if self.from_s else "the start"
        end = f"{self.to_s:g} s" if self.to_s is not None else "the end"
        return f"from {start} to {end}"


class SpanCursor:
    """Follows a recording's messages in order and says, of each, where it lies against a span."""

    def __init__(self, span: TimeSpan) -> None:
        self.span = span
        self.t0_ns: int | None = None
        """The recording's first timestamp: where its time column starts."""
        self.last_t_ns: int | None = None
        """The newest timestamp seen: the recording's end, once it is read whole."""
        self.inside = 0
        """Messages found inside the span."""
        self._where = Where.INSIDE if not span.from_s else Where.BEFORE

    def where(self, item: m.Item) -> Where:
        t_ns = m.t_ns_of(item)
        if t_ns is not None and t_ns > 0:
            if self.t0_ns is None:
                self.t0_ns = t_ns
            if self.last_t_ns is None or t_ns > self.last_t_ns:
                self.last_t_ns = t_ns
            if self._where is not Where.AFTER:
                seconds = (t_ns - self.t0_ns) / 1e9
                span = self.span
                if self._where is Where.BEFORE and span.from_s is not None and seconds >= span.from_s:
                    self._where = Where.INSIDE
                if self._where is Where.INSIDE and span.to_s is not None and seconds > span.to_s:
                    self._where = Where.AFTER
        if self._where is Where.INSIDE:
            self.inside += 1
        return self._where

    def length_said(self) -> str:
        """How long the recording read so far lasts, as its time column would end."""
        if self.t0_ns is None or self.last_t_ns is None:
            return "it holds no timestamp"
        return f"it lasts {(self.last_t_ns - self.t0_ns) / 1e9:.3f} s"


_KEPT_TYPES: Final = frozenset({m.RECORDING, m.HELLO, m.KERNEL_TRACING, m.KERNEL_MODULE})
"""Messages before a span that a cut keeps whatever they are about."""
_COMPILE_TYPES: Final = frozenset(
    {
        m.COMPILE_BEGIN,
        m.PASS_CONTEXT_ENTER,
        m.PASS_CONTEXT_EXIT,
        m.PASS_START,
        m.PASS_END,
        m.PASS_INCOMPLETE,
        m.CALLBACK_MISMATCH,
        m.CODEGEN_BEGIN,
        m.CODEGEN_END,
        m.COMPILE_FAILURE,
        m.COMPILE_PROCESS,
    }
)
"""Messages about one compile, named by its ``compile`` field; its ``compile_end`` ends it."""


class SpanContext:
    """What a recording says before a span that the span needs: fed every message before it,
    then :meth:`messages` gives those to keep, in their order.

    Kept: the ``recording`` header, each ``hello``, the kernel tracing state and event tables,
    every message of a compile that has not ended where the span starts, and the ``process``
    frames that say whose each of those is (a process whose stream ended keeps that frame).
    Finished compiles, heartbeats, checkpoints and kernel records before the span are left out.
    """

    def __init__(self) -> None:
        self._kept: list[m.Item | None] = []
        self._compiles: dict[tuple[Any, Any], list[int]] = {}  # (process, compile): where its messages are
        self._process: Any = None  # (host, pid) whose messages these are (None: the first process's)
        self._process_frame: m.Message | None = None  # the newest process frame, whose messages follow

    def take(self, item: m.Item) -> None:
        """One message before the span, in the recording's order."""
        if isinstance(item, list):  # a pass row
            self._of_compile(item[1], item)
            return
        kind = item.get("type")
        if kind in _COMPILE_TYPES:
            self._of_compile(item.get("compile"), item)
        elif kind == m.COMPILE_END:
            for index in self._compiles.pop((self._process, item.get("compile")), ()):
                self._kept[index] = None
        elif kind == m.PROCESS:
            self._process = _who(item)
            self._process_frame = item
            self._kept.append(item)
            if item.get("state") is not None:  # its stream ended: its compiles end with it
                for key in [key for key in self._compiles if key[0] == self._process]:
                    for index in self._compiles.pop(key):
                        self._kept[index] = None
        elif kind in _KEPT_TYPES:
            if kind == m.HELLO and self._process is None and item.get("role", "agent") == "agent":
                self._process = _who(item)
                for key in [key for key in self._compiles if key[0] is None]:  # seen before any pid
                    self._compiles[(self._process, key[1])] = self._compiles.pop(key)
            self._kept.append(item)

    def _of_compile(self, compile_id: Any, item: m.Item) -> None:
        self._compiles.setdefault((self._process, compile_id), []).append(len(self._kept))
        self._kept.append(item)

    def messages(self) -> Iterator[m.Item]:
        """The messages kept, in order, then the ``process`` frame the span's first message
        needs: a ``process`` frame only where a kept message of its process follows it."""
        shown: Any = None  # the process of the newest process frame written
        pending: m.Message | None = None
        for item in self._kept:
            if item is None:
                continue
            if isinstance(item, dict) and item.get("type") == m.PROCESS:
                if item.get("state") is None:
                    pending = item
                    continue
                pending = None
            elif pending is not None:
                if _who(pending) != shown:
                    yield pending
                pending = None
            if isinstance(item, dict) and item.get("type") == m.PROCESS:
                shown = _who(item)
            yield item
        frame = self._process_frame
        if frame is not None and frame.get("state") is None and _who(frame) != shown:
            yield frame


def _who(msg: m.Message) -> tuple[Any, Any]:
    """The process a ``process`` frame or a ``hello`` names: its host (None for this machine's) and pid."""
    return msg.get("host"), msg.get("pid")
