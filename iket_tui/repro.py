"""A self-contained reproducer for a failed compile in a recording (``iket-tui repro``).

The agent captured what the failure needs (``compile_failure``), and the reproducer makes the
same error come back in a fresh process, without the original program:

- a failed pass: the module it was given (TVM JSON), the target and the pass-context
  configuration. The reproducer loads that module and runs that one pass on it. Passes that are
  not TileLang's or TVM's own (defined in the user's code) cannot be rebuilt from their name:
  the reproducer says so, and the module is still written.
- a failed codegen step: the CUDA source nvcc rejected and nvcc's arguments. The reproducer
  runs nvcc on that source through TileLang's ``compile_cuda``, with the installed TileLang's
  include directories in place of those of the install that recorded it.
- a hang: a pass that was still running when the agent captured it (a ``stuck`` answer, from a
  live target or a recording), or one aborted from outside (a ``compile_failure`` with
  ``CompileAborted``). The reproducer runs that pass alone on the module it was given, in a
  thread, and after a timeout says whether it still runs (exit code :data:`HANG_EXIT`) with the
  pass's Python stack, or that it returned. A pass of the user's own is rebuilt from the file
  its code was seen in, which the reproducer then needs: a module of a package is imported by its
  dotted name, and of the program's main script only the pass's definition and the script's
  imports are run, never the program.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from iket_tui.durations import duration
from iket_tui.outputs import make_directory, write_files
from iket_tui.protocol import messages as m

NAMESPACES = {"tl": "tilelang.transform", "tir": "tvm.tir.transform", "tirx": "tvm.tir.transform"}
"""Where the factory of a pass named ``<namespace>.<Name>`` lives, in TileLang."""

TVM_NAMESPACES = {
    "": "tvm.relax.transform",
    "relax": "tvm.relax.transform",
    "tirx": "tvm.tirx.transform",
    "s_tir": "tvm.s_tir.transform",
    "tir": "tvm.tir.transform",
}
"""The same in plain Apache TVM, whose Relax passes have bare names (``LegalizeOps``)."""

TVM: Final = "tvm"
"""The ``compiler`` of a capture from a plain Apache TVM compile; TileLang's have none."""

TVM_ENTRY_POINTS: Final = ("tvm.compile", "tvm.build", "relax.build", "tirx.build", "tir.build")
"""What the label of a plain TVM compile starts with (a capture without ``compiler`` is told by it)."""

CODEGEN: Final = "codegen"
"""The ``stage`` of a ``compile_failure`` that failed in codegen (nvcc); ``"pass"`` (or none, from
older agents) is a failed pass."""

HANG_EXIT: Final = 3
"""The exit code of a hang reproducer whose pass is still running at its timeout."""

MIN_HANG_TIMEOUT_S: Final = 10.0
"""A hang reproducer waits twice what the pass had run when captured, and at least this long."""

DEFAULT_OPT_LEVEL: Final = 3
"""The ``opt_level`` of a reproducer's pass context when the capture does not say (captures of
failures, and of stuck passes before it was captured)."""

MAIN: Final = "__main__"
"""The module name of the program's main script, where a pass of one's own is often defined."""

ABORTED: Final = "CompileAborted"
"""The type of the error of a compile aborted from outside (``iket-tui abort``)."""

_DIAGNOSTIC: Final = re.compile(r"\S: (?:fatal )?error\b")
"""A compiler diagnostic such as ``kernel.cu(21): error: identifier "f" is undefined``."""


class ReproError(Exception):
    """No reproducer can be written; the message says why in one line."""


@dataclass(frozen=True)
class Repro:
    """What was written, and whether ``repro.py`` can make the failure happen by itself."""

    directory: Path
    compile: int
    name: str
    runnable: bool
    note: str


def failures_in(messages: Iterable[m.Item]) -> tuple[dict[int, m.Message], dict[int, m.Message]]:
    """The captured failures and the failed compiles' ends of a recording, by compile id."""
    captured: dict[int, m.Message] = {}
    ends: dict[int, m.Message] = {}
    for item in messages:
        if not isinstance(item, dict):
            continue
        if item.get("type") == m.COMPILE_FAILURE and type(item.get("compile")) is int:
            captured.setdefault(item["compile"], item)
        elif item.get("type") == m.COMPILE_END and item.get("ok") is False and type(item.get("compile")) is int:
            ends[item["compile"]] = item
    return captured, ends


def write(messages: Iterable[m.Item], directory: Path, compile_id: int | None = None, source: str = "") -> Repro:
    """Write the reproducer of ``compile_id`` (the first failed compile by default) into ``directory``."""
    captured, ends = failures_in(messages)
    if compile_id is None:
        failed = sorted(set(captured) | set(ends))
        if not failed:
            raise ReproError("no compile failed in this recording")
        compile_id = failed[0]
    failure = captured.get(compile_id)
    if failure is None:
        end = ends.get(compile_id)
        if end is None:
            raise ReproError(f"compile {compile_id} did not fail in this recording")
        if end.get("stage") == CODEGEN:
            raise ReproError(
                f"compile {compile_id} failed in codegen ({end.get('error_type')}), and the recording holds no capture "
                "of it (recorded before iket-tui captured codegen failures); iket-tui dump shows the compiler's error"
            )
        raise ReproError(f"compile {compile_id} failed, but the agent captured no failed pass for it")
    if failure.get("stage") == CODEGEN:
        if compiler_of(failure, ends.get(compile_id)) == TVM:
            raise ReproError(
                f"compile {compile_id} failed in Apache TVM's codegen step {failure.get('name')}, which builds from "
                "the IR, not from a source: iket-tui repro reproduces its failed passes; iket-tui dump shows the error"
            )
        return _write_codegen(failure, ends.get(compile_id), directory, source)
    if str(failure.get("error_type") or "").rpartition(".")[2] == ABORTED:
        return write_hang(_hang_of(failure), directory, source, ends.get(compile_id))
    compiler = compiler_of(failure, ends.get(compile_id))
    files = _module_files(failure, compiler, f"the failed pass of compile {compile_id}")
    name = str(failure.get("name"))
    config = failure.get("config_json")
    if isinstance(config, str):
        files["config.json"] = config
    runnable = rebuildable(name, compiler)
    files["repro.py"] = _script(failure, ends.get(compile_id), source, compiler)
    write_directory(directory, files)
    note = (
        f"python {directory / 'repro.py'} runs {name} on the module it was given"
        if runnable
        else f"{name} is not one of {_COMPILERS[compiler].owner} passes: repro.py cannot rebuild it; "
        f"{' and '.join(name for name in ('module.json', 'before.py') if name in files)} hold its input"
    )
    return Repro(directory, compile_id, name, runnable, note)


def compiler_of(capture: m.Message, end: m.Message | None = None) -> str:
    """``tvm`` for a capture from a plain Apache TVM compile, else ``tilelang``."""
    if capture.get("compiler") == TVM:
        return TVM
    label = capture.get("label") or (end.get("label") if end is not None else None)
    first = str(label).split(",", 1)[0].strip() if isinstance(label, str) else ""
    return TVM if first in TVM_ENTRY_POINTS else "tilelang"


def rebuildable(name: str, compiler: str) -> bool:
    """Whether a pass of that name is one of the compiler's own, which a reproducer makes by name."""
    namespace, _, short = name.partition(".") if "." in name else ("", "", name)
    return bool(short) and namespace in _COMPILERS[compiler].namespaces


def _module_files(capture: m.Message, compiler: str, what: str) -> dict[str, str]:
    """``module.json`` and ``before.py`` of a capture; plain TVM's reproducer reads the module back
    from ``before.py`` when it was captured without its JSON."""
    files: dict[str, str] = {}
    if isinstance(capture.get("ir_json"), str):
        files["module.json"] = capture["ir_json"]
    if isinstance(capture.get("ir_script"), str):
        files["before.py"] = capture["ir_script"]
    whole_script = "before.py" in files and "TVMScript" not in str(capture.get("ir_missing") or "")
    if "module.json" not in files and not (compiler == TVM and whole_script):
        raise ReproError(f"{what} was captured without its module: {capture.get('ir_missing')}")
    return files


@dataclass(frozen=True)
class _Compiler:
    """What a reproducer's script says and imports for one compiler."""

    name: str
    owner: str
    """Whose passes those are, in a sentence: ``TileLang's or TVM's``."""
    imports: str
    namespaces: dict[str, str]


_COMPILERS: Final = {
    "tilelang": _Compiler(
        name="TileLang",
        owner="TileLang's or TVM's",
        imports="import tilelang  # noqa: F401  (registers TileLang's passes)\nfrom tilelang import tvm\n",
        namespaces=NAMESPACES,
    ),
    TVM: _Compiler(
        name="Apache TVM",
        owner="Apache TVM's",
        imports="import tvm\nimport tvm.script\n",
        namespaces=TVM_NAMESPACES,
    ),
}


def write_directory(directory: Path, files: dict[str, str]) -> None:
    """Write ``files`` (name: text) into ``directory``, made if missing, as :mod:`iket_tui.outputs`
    writes: never through a link, never into another user's directory, and every name checked
    before any is written. Raises :class:`~iket_tui.outputs.OutputError` (a refusal, one line)
    or the ``OSError`` of a failed write."""
    make_directory(directory)
    write_files((directory / name, text.encode("utf-8")) for name, text in files.items())


def first_diagnostic(output: str) -> str | None:
    """The first error a compiler's output states (``kernel.cu(21): error: ...``), its file's
    directory left out (nvcc compiles a file in a new temporary directory every time)."""
    for line in output.splitlines():
        if _DIAGNOSTIC.search(line):
            return _without_directory(line.strip())
    return None


def _without_directory(line: str) -> str:
    path, colon, rest = line.partition(": ")
    return f"{path.rsplit('/', 1)[-1]}{colon}{rest}" if colon else line


def _write_codegen(failure: m.Message, end: m.Message | None, directory: Path, source: str) -> Repro:
    """``kernel.cu`` (the source nvcc rejected) and ``repro.py`` (nvcc on it, as TileLang ran it)."""
    compile_id = int(failure["compile"])
    step = str(failure.get("name") or "codegen")
    code = failure.get("source")
    if not isinstance(code, str):
        why = failure.get("source_missing") or "not captured"
        raise ReproError(f"compile {compile_id} failed in codegen ({step}) without the source nvcc was given: {why}")
    write_directory(directory, {"kernel.cu": code, "repro.py": _codegen_script(failure, end, source)})
    cut = failure.get("source_missing")
    if isinstance(cut, str):
        note = f"kernel.cu is incomplete ({cut}): nvcc will not see what it rejected"
        return Repro(directory, compile_id, step, False, note)
    note = f"python {directory / 'repro.py'} runs nvcc on kernel.cu, the source it rejected, with the same options"
    return Repro(directory, compile_id, step, True, note)


def _codegen_script(failure: m.Message, end: m.Message | None, source: str) -> str:
    output = failure.get("compiler_output")
    said = _quotable(first_diagnostic(output) or "") if isinstance(output, str) else ""
    label = _quotable(str(end.get("label"))) if end is not None else ""
    source = _quotable(source)
    header = (
        f'"""Reproduces a failed TileLang compile recorded by iket-tui: nvcc rejected the generated source\n'
        f"{'(' + said + ') ' if said else ''}in codegen step {failure.get('name')} of compile {failure.get('compile')}"
        f"{', ' + label if label else ''}{', from ' + source if source else ''}.\n\n"
        "Run it where TileLang and nvcc are installed: python repro.py\n"
        "It runs nvcc on kernel.cu, the source nvcc was given, through tilelang.contrib.nvcc.compile_cuda with\n"
        "the same format, architecture and options; the include directories of the TileLang install that\n"
        "recorded it are replaced by this TileLang's. nvcc's error is raised again (without the echoed\n"
        "source); if nvcc now compiles it, it says so and exits 1.\n"
        '"""\n'
    )
    values: dict[str, Any] = {
        "FORMAT": failure.get("nvcc_format") or "cubin",
        "ARCH": failure.get("nvcc_arch"),
        "OPTIONS": failure.get("nvcc_options"),
        "TARGET": failure.get("target"),
        "RECORDED_PATHS": failure.get("tilelang_paths") or {},
    }
    constants = "".join(f"{key} = {value!r}\n" for key, value in values.items())
    return header + _CODEGEN_BODY.replace("#CONSTANTS\n", constants)


def pass_context_of(capture: m.Message) -> dict[str, Any]:
    """The arguments of ``tvm.transform.PassContext`` besides ``config`` that a reproducer passes:
    the captured ``opt_level`` (:data:`DEFAULT_OPT_LEVEL` when not captured), ``required_pass``
    and ``disabled_pass`` where they name any pass."""
    level = capture.get("opt_level")
    found: dict[str, Any] = {"opt_level": level if type(level) is int else DEFAULT_OPT_LEVEL}
    for key in ("required_pass", "disabled_pass"):
        names = capture.get(key)
        if isinstance(names, list) and names and all(isinstance(name, str) for name in names):
            found[key] = names
    return found


def _quotable(text: str) -> str:
    """``text`` as it can stand inside the script's docstring."""
    return text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


def _script(failure: m.Message, end: m.Message | None, source: str, compiler: str = "tilelang") -> str:
    error = _quotable(str(failure.get("error") or "").splitlines()[0]) if failure.get("error") else "an error"
    label = _quotable(str(end.get("label"))) if end is not None else ""
    source = _quotable(source)
    chosen = _COMPILERS[compiler]
    installed = "Apache TVM is installed (not TileLang's TVM)" if compiler == TVM else "TileLang is installed"
    header = (
        f'"""Reproduces a failed {chosen.name} compile recorded by iket-tui: {error}\n'
        f"in pass {failure.get('name')} (pass {failure.get('seq')} of compile {failure.get('compile')}"
        f"{', ' + label if label else ''}){', from ' + source if source else ''}.\n\n"
        f"Run it where {installed}: python repro.py\n"
        "It loads the module that pass was given (module.json; before.py is the same as TVMScript) and runs\n"
        "that pass alone, with the same target and pass-context configuration. The pass's own error is\n"
        "raised again; if the pass now succeeds, it says so and exits 1.\n"
        '"""\n'
    )
    values: dict[str, Any] = {
        "PASS": failure.get("name"),
        "TARGET": failure.get("target"),
        "NAMESPACES": chosen.namespaces,
        "OWNER": chosen.owner,
        "CONTEXT": pass_context_of(failure),
    }
    constants = "".join(f"{key} = {value!r}\n" for key, value in values.items())
    return header + _BODY.replace("#IMPORTS\n", chosen.imports).replace("#CONSTANTS\n", constants)


_BODY = """
import importlib
import sys
from pathlib import Path

#IMPORTS

HERE = Path(__file__).resolve().parent
#CONSTANTS


def make_pass():
    namespace, _, short = PASS.partition(".") if "." in PASS else ("", "", PASS)
    module = NAMESPACES.get(namespace)
    factory = getattr(importlib.import_module(module), short, None) if module else None
    if factory is None:
        sys.exit(f"repro: {PASS} is not one of {OWNER} passes; module.json holds its input")
    return factory()


def load_module():
    if (HERE / "module.json").exists():
        return tvm.ir.load_json((HERE / "module.json").read_text())
    return tvm.script.from_source((HERE / "before.py").read_text())


mod = load_module()
config = {}
if (HERE / "config.json").exists():
    config = dict(tvm.ir.load_json((HERE / "config.json").read_text()).items())
target = tvm.target.Target(TARGET) if TARGET else None
with tvm.transform.PassContext(config=config, **CONTEXT):
    if target is not None:
        with target:
            make_pass()(mod)
    else:
        make_pass()(mod)
print(f"repro: {PASS} ran without error: the failure did not reproduce here", file=sys.stderr)
sys.exit(1)
"""


_CODEGEN_BODY = """
import os
import sys
from pathlib import Path

from tilelang import env as tilelang_env
from tilelang import tvm
from tilelang.contrib import nvcc

HERE = Path(__file__).resolve().parent
#CONSTANTS


def installed(path):
    for name, recorded in RECORDED_PATHS.items():
        if os.path.normpath(path) == os.path.normpath(recorded):
            return getattr(tilelang_env, name, None) or path
    return path


def options_here(options):
    if options is None or isinstance(options, str):
        return options
    out = []
    separate = False
    for option in options:
        if separate or (option.startswith("-I") and option != "-I"):
            path = installed(option if separate else option[2:])
            if not os.path.isdir(path):
                print(f"repro: the include directory {path} does not exist here", file=sys.stderr)
            out.append(path if separate else "-I" + path)
            separate = False
        else:
            separate = option == "-I"
            out.append(option)
    return out


code = (HERE / "kernel.cu").read_bytes().decode("utf-8")
options = options_here(OPTIONS)
target = tvm.target.Target(TARGET) if TARGET else None
try:
    if target is not None:
        with target:
            nvcc.compile_cuda(code, FORMAT, ARCH, options=options)
    else:
        nvcc.compile_cuda(code, FORMAT, ARCH, options=options)
except RuntimeError as error:
    text = str(error)
    cut = text.find("Compilation error:")
    raise RuntimeError(text[cut:] if cut > 0 else text) from None
print("repro: nvcc compiled kernel.cu without error: the failure did not reproduce here", file=sys.stderr)
sys.exit(1)
"""


# Hangs


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
    files = _module_files(capture, compiler, f"the stuck pass {name} of compile {compile_id}")
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
    if where is not None and where["module"] == MAIN:
        note = (
            f"{name} is a pass of your own, in {where['file']} ({where['function']}): {where['file']} is the "
            "program's main script: only the pass's definition and the script's imports are taken from it, never "
            f"the program itself; python {script} needs that file too (--pass-source FILE where it lives elsewhere)"
        )
        return Repro(directory, compile_id, name, True, note)
    if where is not None:
        note = (
            f"{name} is a pass of your own, in {where['file']} ({where['function']}): python {script} imports that "
            "file to rebuild it, so it needs that file too (--pass-source FILE where it lives elsewhere)"
        )
        return Repro(directory, compile_id, name, True, note)
    note = (
        f"{name} is not one of {_COMPILERS[compiler].owner} passes, and no Python code of it was seen "
        "(it runs natively): repro.py cannot rebuild it without --pass-source FILE; module.json and before.py "
        "hold its input"
    )
    return Repro(directory, compile_id, name, False, note)


def _hang_of(failure: m.Message) -> m.Message:
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
    label = _quotable(str(label)) if label else ""
    source = _quotable(source)
    where = _pass_source(capture)
    chosen = _COMPILERS[compiler]
    place = (
        f"pass {capture.get('seq')} of compile {capture.get('compile')}"
        + (f", depth {capture.get('depth')} inside {capture.get('parent_name')}" if capture.get("parent_name") else "")
        + (f", {label}" if label else "")
    )
    pipeline = capture.get("pipeline")
    before = ""
    if isinstance(pipeline, list) and len(pipeline) > 1:
        before = "Passes that ran before it in that compile: " + ", ".join(_quotable(str(p)) for p in pipeline[:-1])
        before = "\n".join(textwrap.wrap(before, 100)) + "\n"
    needs = ""
    if where is not None and where["module"] == MAIN and not rebuildable(str(capture.get("name")), compiler):
        needs = (
            f"It needs the pass's own source: {_quotable(where['file'])} (function {where['function']}),\n"
            "the program's main script. Of it, it runs only what defines the pass: that definition, the\n"
            "script's imports, and the top-level definitions and plain assignments the pass uses; never\n"
            "the program (give --pass-source FILE where the script lives elsewhere).\n"
        )
    elif where is not None and not rebuildable(str(capture.get("name")), compiler):
        needs = (
            f"It needs the pass's own source: {_quotable(where['file'])} (function {where['function']}), which it\n"
            "imports as a module to find the pass by its name (give --pass-source FILE where it lives elsewhere).\n"
        )
    elif where is not None:
        needs = (
            f"When captured, the pass was running Python code of {_quotable(where['file'])} ({where['function']}),\n"
            f"not {chosen.name}'s: if the hang is in that code, this reproducer runs {chosen.name}'s own pass\n"
            "without it.\n"
        )
    header = (
        f'"""Reproduces a hang recorded by iket-tui: pass {capture.get("name")} had been running for {running_s}\n'
        f"({place}){', from ' + source if source else ''}.\n\n"
        f"Run it where {chosen.name} is installed: python repro.py [--timeout S] [--pass-source FILE]\n"
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
        "DEFAULT_TIMEOUT_S": hang_timeout(running),
        "HANG_EXIT": HANG_EXIT,
        "CONTEXT": pass_context_of(capture),
    }
    constants = "".join(f"{key} = {value!r}\n" for key, value in values.items())
    helpers = "\n\n".join(inspect.getsource(helper) for helper in (package_of, pass_definitions))
    return header + (
        _HANG_BODY.replace("#IMPORTS\n", chosen.imports)
        .replace("#CONSTANTS\n", constants)
        .replace("#HELPERS\n", helpers)
    )


# The two functions below are copied into a hang reproducer's script (which must not need
# iket-tui): they use nothing but the standard library, imported inside them.


def package_of(path: Path, module: str | None) -> tuple[Path, str] | None:
    """The directory to put on ``sys.path`` and the dotted name to import for the Python file
    ``path`` when it is a module of a package (so that its relative imports work), else None:
    by ``module``, its captured name, when the file's path ends with it; else by the
    ``__init__.py`` files of the directories around it."""
    from pathlib import Path

    stem = path.parent if path.name == "__init__.py" else path.with_suffix("")
    parts = module.split(".") if module and module != "__main__" else []
    if len(parts) > 1 and list(stem.parts[-len(parts) :]) == parts:
        return Path(*stem.parts[: -len(parts)]), ".".join(parts)
    names = [] if path.name == "__init__.py" else [path.stem]
    directory = path.parent
    while (directory / "__init__.py").is_file() and directory != directory.parent:
        names.insert(0, directory.name)
        directory = directory.parent
    return (directory, ".".join(names)) if len(names) > 1 else None


def pass_definitions(source: str, filename: str, function: str, line: int | None, pass_name: str) -> ast.Module:
    """Of a program's main script, only what defines a pass of its own: the top-level definition
    that holds the pass's ``function`` (a def or class, with its decorators; the one around
    ``line`` where there are several), top-level definitions and assignments that name the pass
    (``pass_name``), the script's top-level imports, and the top-level definitions and plain
    assignments (to names only) these use, in the script's order and at their own lines. Nothing
    else of the program runs. Raises LookupError when the script holds no such definition.

    What a kept statement uses are the module's names it reads: at the top level (decorators,
    default values, base classes, the right-hand side) and, inside the functions, classes, lambdas
    and comprehensions it defines, only the names that resolve to the module (Python's own scoping,
    through ``symtable``). A parameter or local variable of the pass that shares its name with a
    top-level assignment (``mod`` beside ``mod = build()``) keeps no part of the program; a name
    the pass declares ``global`` is the module's, and kept, since ``X += 1`` reads it."""
    import ast
    import symtable

    body = ast.parse(source, filename).body
    definitions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)

    def first_line(node: ast.stmt) -> int:
        decorators = node.decorator_list if isinstance(node, definitions) else []
        return min([node.lineno, *(decorator.lineno for decorator in decorators)])

    def bound(node: ast.stmt) -> set[str]:
        if isinstance(node, definitions):
            return {node.name}
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign) and node.value
            else []
        )
        names: set[str] = set()
        for target in targets:
            inner = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
            if not inner or not all(isinstance(name, ast.Name) for name in inner):
                return set()
            names.update(name.id for name in inner if isinstance(name, ast.Name))
        return names

    def holds_function(node: ast.stmt) -> bool:
        return isinstance(node, definitions) and any(
            isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)) and inner.name == function
            for inner in ast.walk(node)
        )

    def names_pass(node: ast.stmt) -> bool:
        return bool(bound(node)) and any(
            isinstance(inner, ast.Constant) and inner.value == pass_name for inner in ast.walk(node)
        )

    holding = [node for node in body if holds_function(node)]
    around = [node for node in holding if line is not None and first_line(node) <= line <= (node.end_lineno or 0)]
    kept = {id(node) for node in (around or holding)} | {id(node) for node in body if names_pass(node)}
    if not kept:
        raise LookupError(f"{filename} has no top-level definition of {function} or of {pass_name}")

    def reads_module(symbol: symtable.Symbol, top: bool) -> bool:
        if top:
            return symbol.is_referenced()
        return symbol.is_global() and (symbol.is_referenced() or symbol.is_declared_global())

    def module_names(table: symtable.SymbolTable) -> set[str]:
        top = table.get_type() == "module"
        names = {symbol.get_name() for symbol in table.get_symbols() if reads_module(symbol, top)}
        for child in table.get_children():
            names |= module_names(child)
        return names

    read: set[int] = set()
    needed: set[str] = set()
    while True:
        for node in body:
            if id(node) in kept and id(node) not in read:
                alone = ast.unparse(ast.Module(body=[node], type_ignores=[]))
                needed |= module_names(symtable.symtable(alone, filename, "exec"))
                read.add(id(node))
        more = {id(node) for node in body if id(node) not in kept and bound(node) & needed}
        if not more:
            break
        kept.update(more)
    chosen = [node for node in body if id(node) in kept or isinstance(node, (ast.Import, ast.ImportFrom))]
    return ast.Module(body=chosen, type_ignores=[])


_HANG_BODY = """
from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import os
import sys
import threading
import time
import traceback
import types
from pathlib import Path

#IMPORTS

HERE = Path(__file__).resolve().parent
#CONSTANTS


class CannotMake(Exception):
    pass


def arguments():
    parser = argparse.ArgumentParser(description=f"Run {PASS} alone on the module it was given: does it return?")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="S",
                        help=f"how long to let it run (default {DEFAULT_TIMEOUT_S:g})")
    parser.add_argument("--pass-source", type=Path, metavar="FILE", help="the file that defines the pass, if not "
                        + (PASS_SOURCE["file"] if PASS_SOURCE else "known"))
    args = parser.parse_args()
    if not 0 < args.timeout < float("inf"):
        parser.error(f"--timeout must be a positive number of seconds, not {args.timeout}")
    return args


#HELPERS


def failed(error, path):
    text = str(error).strip().splitlines()
    said = f"{type(error).__name__}: {text[0]}" if text else type(error).__name__
    lines = [frame.lineno for frame in traceback.extract_tb(error.__traceback__) if frame.filename == str(path)]
    if isinstance(error, SyntaxError) and error.filename == str(path):
        lines.append(error.lineno)
    return said + (f" (line {lines[-1]})" if lines and lines[-1] else "")


def load(path):
    module = PASS_SOURCE["module"] if PASS_SOURCE else None
    package = package_of(path, module)
    sys.path.insert(0, str(path.parent))
    if package is not None:
        sys.path.insert(0, str(package[0]))
    main_script = PASS_SOURCE is not None and path == Path(PASS_SOURCE["file"]).resolve()
    if module == "__main__" and (main_script or package is None):
        function, line = PASS_SOURCE["function"], (PASS_SOURCE["line"] if main_script else None)
        try:
            found = pass_definitions(path.read_text(), str(path), function, line, PASS)
        except LookupError as error:
            raise CannotMake(f"{error}: give the file that defines the pass with --pass-source FILE") from None
        script = types.ModuleType("__pass_source__")
        script.__file__ = str(path)
        if package is not None:
            script.__package__ = package[1].rpartition(".")[0]
        sys.modules[script.__name__] = script
        exec(compile(found, str(path), "exec"), vars(script))
        return script
    if package is not None:
        return importlib.import_module(package[1])
    spec = importlib.util.spec_from_file_location(path.stem, path)
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = loaded
    spec.loader.exec_module(loaded)
    return loaded


def own_pass(path):
    if not path.is_file():
        raise CannotMake(f"{PASS} is defined in {path}, which is not here: give its file with --pass-source FILE")
    outcome["loading"] = path
    try:
        module = load(path.resolve())
    except CannotMake:
        raise
    except (Exception, SystemExit) as error:
        raise CannotMake(f"loading {path} to make {PASS} failed: {failed(error, path.resolve())}") from None
    for value in list(vars(module).values()):
        if isinstance(value, tvm.transform.Pass) and str(value.info.name) == PASS:
            return value
    factory = getattr(module, PASS.rpartition(".")[2], None)
    made = factory() if callable(factory) else None
    if isinstance(made, tvm.transform.Pass) and str(made.info.name) == PASS:
        return made
    raise CannotMake(f"{path} defines no pass named {PASS}")


def make_pass(args):
    namespace, _, short = PASS.partition(".") if "." in PASS else ("", "", PASS)
    if args.pass_source is None and namespace in NAMESPACES:
        factory = getattr(importlib.import_module(NAMESPACES[namespace]), short, None)
        if factory is not None:
            return factory()
    if args.pass_source is not None:
        return own_pass(args.pass_source)
    if PASS_SOURCE is not None:
        return own_pass(Path(PASS_SOURCE["file"]))
    raise CannotMake(f"{PASS} is not {OWNER}: give the file that defines it with --pass-source FILE")


def load_module():
    if (HERE / "module.json").exists():
        return tvm.ir.load_json((HERE / "module.json").read_text())
    return tvm.script.from_source((HERE / "before.py").read_text())


args = arguments()
mod = load_module()
config = {}
if (HERE / "config.json").exists():
    config = dict(tvm.ir.load_json((HERE / "config.json").read_text()).items())
target = tvm.target.Target(TARGET) if TARGET else None
made = threading.Event()
outcome = {}


def run():
    try:
        the_pass = make_pass(args)
    except CannotMake as error:
        outcome["cannot"] = str(error)
    except (Exception, SystemExit) as error:
        outcome["cannot"] = f"making {PASS} failed: {failed(error, None)}"
    finally:
        outcome["started"] = time.monotonic()
        made.set()
    if "cannot" in outcome:
        return
    try:
        with tvm.transform.PassContext(config=config, **CONTEXT):
            if target is not None:
                with target:
                    the_pass(mod)
            else:
                the_pass(mod)
    except BaseException as error:
        outcome["error"] = error


def stack():
    frame = sys._current_frames().get(runner.ident)
    return "".join(traceback.format_stack(frame)).rstrip() if frame is not None else "  (it has just ended)"


def leave(code):
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # the pass's thread cannot be stopped: leave without waiting for it


runner = threading.Thread(target=run, name=PASS, daemon=True)
runner.start()
if not made.wait(args.timeout):
    loading = f"loading {outcome['loading']} to make {PASS}" if "loading" in outcome else f"making {PASS}"
    print(f"repro: {loading} still runs after {args.timeout:g} s, before the pass runs (a longer --timeout "
          "lets a slow import finish). Where it is (innermost last):", file=sys.stderr)
    print(stack(), file=sys.stderr)
    leave(1)
if "cannot" in outcome:
    sys.exit(f"repro: {outcome['cannot']}")
runner.join(args.timeout)
if runner.is_alive():
    print(f"still running after {args.timeout:g} s: reproduced")
    print(f"{PASS} has not returned. Its Python stack (innermost last):")
    print(stack())
    leave(HANG_EXIT)
took = time.monotonic() - outcome["started"]
if "error" in outcome:
    print(f"repro: {PASS} raised after {took:.1f} s instead of running on:", file=sys.stderr)
    error = outcome["error"]
    traceback.print_exception(type(error), error, error.__traceback__)
    sys.exit(1)
print(f"{PASS} returned after {took:.1f} s: the hang did not reproduce here")
sys.exit(0)
"""
