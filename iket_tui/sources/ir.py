"""IR before and after a pass, fetched from a live target, and the diff between the two."""

from __future__ import annotations

import difflib
from typing import Final

from iket_tui.protocol import messages as m
from iket_tui.sources.base import SourceError
from iket_tui.sources.requests import DEFAULT_TIMEOUT_S, ask
from iket_tui.sources.socket import SocketSource

VIEWS = ("before", "after", "diff")


def fetch_ir(
    source: SocketSource, compile_id: int, seq: int, which: str, timeout_s: float = DEFAULT_TIMEOUT_S
) -> m.Message:
    """The agent's answer for the module ``which`` (``before``, ``after`` or ``both``) pass
    ``seq`` of ``compile_id``; raises :class:`SourceError` with the agent's one-line reason when
    it is not held."""
    answer = ask(source, m.WHAT_IR, timeout_s, compile=compile_id, seq=seq, which=which)
    if not answer.get("ok"):
        where = "around" if which == "both" else which
        raise SourceError(f"no IR {where} pass {seq} of compile {compile_id}: {answer.get('error') or 'no answer'}")
    return answer


NO_NEWLINE: Final = "\\ No newline at end of file"


def unified_diff(before: str, after: str, name: str) -> str:
    """The change a pass made, as a unified diff (empty when it changed nothing). A last line
    without a newline is followed by ``\\ No newline at end of file``, as ``diff -u`` writes
    it, so that it does not run into the next line and ``patch`` reads the diff."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"before {name}", f"after {name}"
    )
    return "".join(line if line.endswith("\n") else f"{line}\n{NO_NEWLINE}\n" for line in lines)


def view_of(answer: m.Message, view: str) -> str:
    """``before``, ``after`` or ``diff`` from an answer to a ``both`` request."""
    before, after = str(answer.get("before") or ""), answer.get("after")
    if view == "before":
        return before
    if not isinstance(after, str):
        return f"no IR after it: {answer.get('after_missing') or 'not held'}\n"
    if view == "after":
        return after
    name = str(answer.get("name") or f"pass {answer.get('seq')}")
    return unified_diff(before, after, name) or f"{name} did not change the module\n"


def view_text(source: SocketSource, compile_id: int, seq: int, view: str) -> str:
    """``before``, ``after`` or ``diff`` of one pass of a live target."""
    if view in ("before", "after"):
        return str(fetch_ir(source, compile_id, seq, view).get("text", ""))
    answer = fetch_ir(source, compile_id, seq, "both")
    if not isinstance(answer.get("after"), str):
        raise SourceError(f"no diff for pass {seq} of compile {compile_id}: {answer.get('after_missing')}")
    return view_of(answer, view)
