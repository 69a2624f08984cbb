"""Stacks of a live target: its Python stacks fetched through the agent, and how they read as
text. Its native stacks come from py-spy (:mod:`iket_tui.sources.py_spy`), run by the source
that is connected to it."""

from __future__ import annotations

import re
from typing import Any, Final

from iket_tui.durations import duration
from iket_tui.model.nodes import BUILD_PREFIX
from iket_tui.protocol import messages as m
from iket_tui.sources.base import NATIVE_STACKS, Answer, SourceState
from iket_tui.sources.py_spy import NATIVE_TIMEOUT_S, NativeStacks, native_stacks, py_spy_path
from iket_tui.sources.requests import DEFAULT_TIMEOUT_S, ask
from iket_tui.sources.socket import SocketSource

__all__ = [
    "INNERMOST_FIRST",
    "NativeStacks",
    "compiler_process_lines",
    "fetch_stacks",
    "fetch_stacks_and_native",
    "native_stacks",
    "py_spy_path",
    "short_path",
    "stack_lines",
]


def fetch_stacks(source: SocketSource, timeout_s: float = DEFAULT_TIMEOUT_S) -> m.Message:
    """Ask a connected target for its stacks and wait for the answer (a ``response`` message)."""
    return ask(source, m.WHAT_STACKS, timeout_s)


def fetch_stacks_and_native(
    source: SocketSource, timeout_s: float = DEFAULT_TIMEOUT_S, native_timeout_s: float = NATIVE_TIMEOUT_S
) -> tuple[m.Message | None, str | None, NativeStacks]:
    """Ask a connected target for its Python stacks and its source for its native ones (read
    by the source, of the process it verified), and wait for both: the Python stacks'
    response, or why it did not come (one line), and the native stacks or why there are none.
    The native stacks matter most when the agent cannot answer (a C++ pass holding the GIL), so
    a missing Python answer never loses them."""
    python = source.request(m.WHAT_STACKS, timeout_s=timeout_s)
    native = source.request(NATIVE_STACKS, timeout_s=native_timeout_s)
    answers: dict[int, Answer] = {}
    for batch in source.batches():
        answers.update((answer.request_id, answer) for answer in batch.answers)
        if {python, native} <= answers.keys() or batch.state in (SourceState.ENDED, SourceState.FAILED):
            break
    said = answers.get(python)
    response = said.response if said is not None else None
    why: str | None = None
    if response is None:
        why = (
            said.error if said is not None else source.error
        ) or f"{source.who} did not answer within {timeout_s:g} s"
    dumped = answers.get(native)
    if dumped is None or dumped.response is None:
        return response, why, NativeStacks(None, dumped.error if dumped is not None else "no native stacks")
    return response, why, NativeStacks(str(dumped.response.get("text") or ""), None)


INNERMOST_FIRST: Final = "innermost frame first"
"""Which end of a stack the text starts with, said where stacks are shown."""

_PACKAGES: Final = re.compile(r".*/(?:site|dist)-packages/")
_STANDARD_LIBRARY: Final = re.compile(r".*/lib/python3\.\d+t?/")


def short_path(file: str, cwd: str | None = None) -> str:
    """A frame's file as a reader places it in the fewest characters, so that line numbers stay
    in view: an installed package's file from its package (``tilelang/engine/lower.py``), the
    standard library's from the library (``threading.py``), the program's own relative to its
    working directory ``cwd``; any other file whole."""
    for prefix in (_PACKAGES, _STANDARD_LIBRARY):
        found = prefix.match(file)
        if found is not None and found.end() < len(file):
            return file[found.end() :]
    if cwd and file.startswith(cwd.rstrip("/") + "/"):
        return file[len(cwd.rstrip("/")) + 1 :]
    return file


def stack_lines(response: m.Message, *, include_agent: bool = False) -> list[str]:
    """A stacks response as text, one thread after the other, each from its innermost frame
    (where it is now, as py-spy shows it) outwards, files shortened (:func:`short_path`)."""
    if not response.get("ok"):
        return [f"the target could not answer: {response.get('error') or 'unknown error'}"]
    threads: list[dict[str, Any]] = [t for t in response.get("threads") or [] if isinstance(t, dict)]
    hidden = [t for t in threads if t.get("agent")] if not include_agent else []
    cwd = response.get("cwd")
    lines: list[str] = compiler_process_lines(response.get("processes"))
    for thread in threads:
        if thread in hidden:
            continue
        tags = [tag for tag, on in (("main", thread.get("main")), ("daemon", thread.get("daemon"))) if on]
        lines.append(f"Thread {thread.get('name')} ({thread.get('id')}{', ' + ', '.join(tags) if tags else ''}):")
        for frame in reversed(thread.get("frames") or []):
            file = short_path(str(frame.get("file")), cwd if isinstance(cwd, str) else None)
            lines.append(f'  File "{file}", line {frame.get("line")}, in {frame.get("function")}')
            if frame.get("code"):
                lines.append(f"    {frame['code']}")
        if thread.get("cut"):
            lines.append(f"  ... {thread['cut']} outer frames left out")
        lines.append("")
    if hidden:
        lines.append(f"({len(hidden)} threads of the iket-tui agent not shown)")
    return lines


COMMAND_CHARS = 160
"""Characters of a compiler process's command line a stacks line shows."""


def compiler_process_lines(processes: object) -> list[str]:
    """The processes of the running codegen steps (a stacks answer's ``processes``), each under
    the one that started it: pid, name, CPU time, how long it has run, its command. A compile
    waiting on its compiler shows nothing in its stack but that wait: here is what it waits on."""
    found = [p for p in processes if isinstance(p, dict)] if isinstance(processes, list) else []
    if not found:
        return []
    lines = ["Compiler processes of running codegen steps:"]
    steps: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for process in found:
        steps.setdefault((process.get("compile"), process.get("step")), []).append(process)
    for (compile_id, step), members in steps.items():
        name = " ".join(["codegen", str(step or "").removeprefix(BUILD_PREFIX)]).rstrip()
        lines.append(f"  compile {compile_id}, {name}:")
        pids = {process.get("pid") for process in members}
        below: dict[Any, list[dict[str, Any]]] = {}
        for process in members:
            below.setdefault(process.get("ppid") if process.get("ppid") in pids else None, []).append(process)
        stack = [(process, 2) for process in reversed(below.get(None, []))]
        while stack:
            process, depth = stack.pop()
            lines.append("  " * depth + _process_line(process))
            stack += [(child, depth + 1) for child in reversed(below.get(process.get("pid"), []))]
    lines.append("")
    return lines


def _process_line(process: dict[str, Any]) -> str:
    argv = process.get("argv")
    command = " ".join(str(arg) for arg in argv) if isinstance(argv, list) else ""
    if len(command) > COMMAND_CHARS:
        command = command[: COMMAND_CHARS - 3] + "..."
    cpu, running = process.get("cpu_ns"), process.get("running_ns")
    cpu_text = duration(cpu) if type(cpu) is int else "?"
    times = f"cpu {cpu_text}, running {duration(running) if type(running) is int else '?'}"
    return f"pid {process.get('pid')}  {process.get('name')}  ({times})  {command}".rstrip()
