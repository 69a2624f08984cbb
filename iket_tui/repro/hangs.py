"""A reproducer of a hang: a pass that was still running when the agent captured it (a ``stuck``
answer, from a live target or a recording), or one aborted from outside. Its ``repro.py`` runs
that pass alone on the module it was given, in a thread, and after a timeout says whether it still
runs (exit code :data:`HANG_EXIT`) with the pass's Python stack, or that it returned. A pass of the
user's own is rebuilt from the file its code was seen in (see :mod:`iket_tui.repro.hang_script`),
by calling the factory that made it again where one did, with the arguments the agent saw."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

from iket_tui.durations import duration
from iket_tui.protocol import messages as m
from iket_tui.repro.captured import (
    COMPILERS,
    MAIN,
    Repro,
    ReproError,
    compiler_of,
    module_files,
    pass_context_of,
    quotable,
    rebuildable,
    write_directory,
)
from iket_tui.repro.hang_script import HANG_BODY, call_of, made_again, package_of, pass_definitions

HANG_EXIT: Final = 3
"""The exit code of a hang reproducer whose pass is still running at its timeout."""

MIN_HANG_TIMEOUT_S: Final = 10.0
"""A hang reproducer waits twice what the pass had run when captured, and at least this long."""


def stuck_in(messages: Iterable[m.Item], compile_id: int | None = None) -> m.Message:
    """The newest capture of a stuck pass in a recording (an ``ok`` answer to a ``stuck``
    request; of ``compile_id`` if given), as :func:`write_hang` takes it."""
    found: m.Message | None = None
    for item in messages:
        if not isinstance(item, dict) or item.get("type") != m.RESPONSE:
            continue
        if item.get("what") != m.WHAT_STUCK or item.get("ok") is not True:
            continue
        if compile_id is None or item.get("compile") == compile_id:
            found = item
    if found is None:
        which = f" of compile {compile_id}" if compile_id is not None else ""
        raise ReproError(
            f"this recording holds no capture of a stuck pass{which} (R on a running pass in the UI, "
            "while it records, captures one; iket-tui repro TARGET --stuck asks a live target)"
        )
    return found


def hang_timeout(running_ns: object) -> float:
    """How long a hang reproducer waits by default: twice what the pass had run, at least
    :data:`MIN_HANG_TIMEOUT_S`."""
    running_s = running_ns / 1e9 if isinstance(running_ns, int) else 0.0
    return max(MIN_HANG_TIMEOUT_S, round(2 * running_s, 1))


def write_hang(capture: m.Message, directory: Path, source: str = "", end: m.Message | None = None) -> Repro:
    """Write the reproducer of a hung pass into ``directory``: ``module.json`` (the module the pass
    was given), ``before.py`` (the same as TVMScript), ``config.json``, ``stack.txt`` (where the
    compiling thread was, when captured) and ``repro.py``."""
    compile_id = int(capture.get("compile") or 0)
    name = str(capture.get("name"))
    compiler = compiler_of(capture, end)
    files = module_files(capture, compiler, f"the stuck pass {name} of compile {compile_id}")
    if isinstance(capture.get("config_json"), str):
        files["config.json"] = capture["config_json"]
    frames = capture.get("frames")
    if isinstance(frames, list) and frames:
        files["stack.txt"] = _stack_text(frames)
    files["repro.py"] = _hang_script(capture, end, source, compiler)
    write_directory(directory, files)
    where = _pass_source(capture)
    script = directory / "repro.py"
    if rebuildable(name, compiler):
        timeout = hang_timeout(capture.get("running_ns"))
        note = f"python {script} runs {name} alone on the module it was given, for {timeout:g} s"
        return Repro(directory, compile_id, name, True, note)
    made = made_by_of(capture)
    made_note, runnable = _made_note(made)
    if where is not None and where["module"] == MAIN:
        note = (
            f"{name} is a pass of your own, in {where['file']} ({where['function']}): {where['file']} is the "
            "program's main script: only the pass's definition and the script's imports are taken from it, never "
            f"the program itself; python {script} needs that file too (--pass-source FILE where it lives elsewhere)"
        )
        return Repro(directory, compile_id, name, runnable, note + made_note)
    if where is not None:
        note = (
            f"{name} is a pass of your own, in {where['file']} ({where['function']}): python {script} imports that "
            "file to rebuild it, so it needs that file too (--pass-source FILE where it lives elsewhere)"
        )
        return Repro(directory, compile_id, name, runnable, note + made_note)
    note = (
        f"{name} is not one of {COMPILERS[compiler].owner} passes, and no Python code of it was seen "
        "(it runs natively): repro.py cannot rebuild it without --pass-source FILE; module.json and before.py "
        "hold its input"
    )
    return Repro(directory, compile_id, name, False, note)


def _made_note(made: dict[str, Any] | None) -> tuple[str, bool]:
    """What the note adds of how the pass is made again, and whether repro.py can make it alone."""
    if made is None:
        return "", True
    if made["factory"] is None:
        return f"; it may not make the pass again as the program did: {made['why']}", True
    note = f"; it makes the pass as the program did, by {call_of(made, {})}"
    if made["defaults"]:
        note += f" ({', '.join(made['defaults'])} left to {'its' if len(made['defaults']) == 1 else 'their'} default)"
    if not made["missing"]:
        return note, True
    said = "; ".join(f"{name}: {why}" for name, why in made["missing"].items())
    options = " ".join(f"--arg {name}=EXPR" for name in made["missing"])
    return f"{note}, but {', '.join(made['missing'])} could not be captured ({said}): it needs {options}", False


def made_by_of(capture: m.Message) -> dict[str, Any] | None:
    """How the captured pass was made (``pass_source.made_by``, see :mod:`iket_tui.agent.pass_maker`),
    as a reproducer takes it: a factory's dotted name, or None with ``why`` it cannot be called
    again; the arguments whose texts are Python expressions, those missing with why, and those
    left to their defaults. None where the capture says nothing of it (a pass defined at a
    module's top level, or a capture made before it was said)."""
    where = capture.get("pass_source")
    made = where.get("made_by") if isinstance(where, dict) else None
    if not isinstance(made, dict):
        return None
    factory = made.get("factory")
    if not (isinstance(factory, str) and all(part.isidentifier() for part in factory.split("."))):
        return {"factory": None, "why": str(made.get("why") or "it cannot be called again"), **_NO_ARGUMENTS}
    arguments, missing, defaults = made.get("arguments"), made.get("missing"), made.get("defaults")
    return {
        "factory": factory,
        "arguments": {
            name: text
            for name, text in (arguments.items() if isinstance(arguments, dict) else ())
            if isinstance(name, str) and name.isidentifier() and isinstance(text, str) and _is_expression(text)
        },
        "missing": {
            name: str(why)
            for name, why in (missing.items() if isinstance(missing, dict) else ())
            if isinstance(name, str) and name.isidentifier()
        },
        "defaults": [name for name in (defaults if isinstance(defaults, list) else ()) if isinstance(name, str)],
    }


_LONGEST_CALL: Final = 200
"""The longest call a reproducer's docstring shows (its constant MADE_BY holds every argument)."""
_NO_ARGUMENTS: Final[dict[str, Any]] = {"arguments": {}, "missing": {}, "defaults": []}


def _is_expression(text: str) -> bool:
    try:
        ast.parse(text, mode="eval")
    except (SyntaxError, ValueError):
        return False
    return True


def hang_of(failure: m.Message) -> m.Message:
    """A ``compile_failure`` of an aborted compile, as the capture of a stuck pass."""
    return {**failure, "running_ns": failure.get("aborted_after_ns"), "frames": None}


def _pass_source(capture: m.Message) -> dict[str, Any] | None:
    where = capture.get("pass_source")
    if isinstance(where, dict) and isinstance(where.get("file"), str):
        line = where.get("line")
        return {
            "file": where["file"],
            "line": line if type(line) is int else None,
            "function": str(where.get("function") or "?"),
            "module": where.get("module") if isinstance(where.get("module"), str) else None,
            "qualname": str(where.get("qualname") or where.get("function") or "?"),
        }
    return None


def _stack_text(frames: list[Any]) -> str:
    lines = ["The compiling thread's Python stack when the pass was captured (innermost last):\n"]
    for frame in frames:
        if not isinstance(frame, dict):
            continue
        lines.append(f'  File "{frame.get("file")}", line {frame.get("line")}, in {frame.get("function")}\n')
        if frame.get("code"):
            lines.append(f"    {frame['code']}\n")
    return "".join(lines)


def _hang_script(capture: m.Message, end: m.Message | None, source: str, compiler: str = "tilelang") -> str:
    running = capture.get("running_ns")
    running_s = duration(running) if isinstance(running, int) else "a while"
    label = capture.get("label") or (end.get("label") if end is not None else None)
    label = quotable(str(label)) if label else ""
    source = quotable(source)
    where = _pass_source(capture)
    chosen = COMPILERS[compiler]
    place = (
        f"pass {capture.get('seq')} of compile {capture.get('compile')}"
        + (f", depth {capture.get('depth')} inside {capture.get('parent_name')}" if capture.get("parent_name") else "")
        + (f", {label}" if label else "")
    )
    pipeline = capture.get("pipeline")
    before = ""
    if isinstance(pipeline, list) and len(pipeline) > 1:
        before = "Passes that ran before it in that compile: " + ", ".join(quotable(str(p)) for p in pipeline[:-1])
        before = "\n".join(textwrap.wrap(before, 100)) + "\n"
    needs = ""
    if where is not None and where["module"] == MAIN and not rebuildable(str(capture.get("name")), compiler):
        needs = (
            f"It needs the pass's own source: {quotable(where['file'])} (function {where['function']}),\n"
            "the program's main script. Of it, it runs only what defines the pass: that definition, the\n"
            "script's imports, and the top-level definitions and plain assignments the pass uses; never\n"
            "the program (give --pass-source FILE where the script lives elsewhere).\n"
        )
    elif where is not None and not rebuildable(str(capture.get("name")), compiler):
        needs = (
            f"It needs the pass's own source: {quotable(where['file'])} (function {where['function']}), which it\n"
            "imports as a module to find the pass by its name (give --pass-source FILE where it lives elsewhere).\n"
        )
    elif where is not None:
        needs = (
            f"When captured, the pass was running Python code of {quotable(where['file'])} ({where['function']}),\n"
            f"not {chosen.name}'s: if the hang is in that code, this reproducer runs {chosen.name}'s own pass\n"
            "without it.\n"
        )
    made = made_by_of(capture)
    own = where is not None and not rebuildable(str(capture.get("name")), compiler)
    if own and made is not None and made["factory"] is not None:
        call = call_of(made, {})
        call = call if len(call) <= _LONGEST_CALL else call[: _LONGEST_CALL - 1] + "…"
        needs += f"The program made the pass by a call, which it makes again: {quotable(call)}\n"
        if made["missing"]:
            needs += (
                f"Not captured: {quotable('; '.join(f'{name} ({why})' for name, why in made['missing'].items()))}:\n"
                "give each with --arg NAME=EXPR, EXPR a Python expression among the names of that file.\n"
            )
    header = (
        f'"""Reproduces a hang recorded by iket-tui: pass {capture.get("name")} had been running for {running_s}\n'
        f"({place}){', from ' + source if source else ''}.\n\n"
        f"Run it where {chosen.name} is installed:\n"
        "python repro.py [--timeout S] [--pass-source FILE] [--arg NAME=EXPR]\n"
        "It loads the module that pass was given (module.json; before.py is the same as TVMScript) and runs\n"
        "that pass alone in a thread, with the same target and pass context (configuration, opt level,\n"
        "required and disabled passes). After the timeout (default twice what it had run, at least\n"
        f"{MIN_HANG_TIMEOUT_S:g} s) it prints 'still running after S s: reproduced' with the pass's Python\n"
        f"stack and exits {HANG_EXIT}; if the pass returns, it says so and exits 0. It exits 1 if the pass\n"
        "raised, or cannot be made here (loading its file fails, or still runs after the timeout).\n"
        f"{needs}{before}"
        '"""\n'
    )
    values: dict[str, Any] = {
        "PASS": capture.get("name"),
        "TARGET": capture.get("target"),
        "NAMESPACES": chosen.namespaces,
        "OWNER": chosen.owner,
        "PASS_SOURCE": where,
        "MADE_BY": made,
        "DEFAULT_TIMEOUT_S": hang_timeout(running),
        "HANG_EXIT": HANG_EXIT,
        "CONTEXT": pass_context_of(capture),
    }
    constants = "".join(f"{key} = {value!r}\n" for key, value in values.items())
    helpers = "\n\n".join(inspect.getsource(helper) for helper in (package_of, pass_definitions, call_of, made_again))
    return header + (
        HANG_BODY.replace("#IMPORTS\n", chosen.imports)
        .replace("#CONSTANTS\n", constants)
        .replace("#HELPERS\n", helpers)
    )
