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
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from iket_tui.outputs import make_directory, write_files
from iket_tui.protocol import messages as m

NAMESPACES = {"tl": "tilelang.transform", "tir": "tvm.tir.transform", "tirx": "tvm.tir.transform"}
"""Where the factory of a pass named ``<namespace>.<Name>`` lives."""

CODEGEN: Final = "codegen"
"""The ``stage`` of a ``compile_failure`` that failed in codegen (nvcc); ``"pass"`` (or none, from
older agents) is a failed pass."""

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
        return _write_codegen(failure, ends.get(compile_id), directory, source)
    module_json = failure.get("ir_json")
    if not isinstance(module_json, str):
        raise ReproError(
            f"the failed pass of compile {compile_id} was captured without its module: {failure.get('ir_missing')}"
        )
    name = str(failure.get("name"))
    files = {"module.json": module_json}
    if isinstance(failure.get("ir_script"), str):
        files["before.py"] = failure["ir_script"]
    config = failure.get("config_json")
    if isinstance(config, str):
        files["config.json"] = config
    runnable = name.partition(".")[0] in NAMESPACES
    files["repro.py"] = _script(failure, ends.get(compile_id), source)
    write_directory(directory, files)
    note = (
        f"python {directory / 'repro.py'} runs {name} on the module it was given"
        if runnable
        else f"{name} is not one of TileLang's or TVM's passes: repro.py cannot rebuild it; "
        "module.json and before.py hold its input"
    )
    return Repro(directory, compile_id, name, runnable, note)


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


def _quotable(text: str) -> str:
    """``text`` as it can stand inside the script's docstring."""
    return text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


def _script(failure: m.Message, end: m.Message | None, source: str) -> str:
    error = _quotable(str(failure.get("error") or "").splitlines()[0]) if failure.get("error") else "an error"
    label = _quotable(str(end.get("label"))) if end is not None else ""
    source = _quotable(source)
    header = (
        f'"""Reproduces a failed TileLang compile recorded by iket-tui: {error}\n'
        f"in pass {failure.get('name')} (pass {failure.get('seq')} of compile {failure.get('compile')}"
        f"{', ' + label if label else ''}){', from ' + source if source else ''}.\n\n"
        "Run it where TileLang is installed: python repro.py\n"
        "It loads the module that pass was given (module.json; before.py is the same as TVMScript) and runs\n"
        "that pass alone, with the same target and pass-context configuration. The pass's own error is\n"
        "raised again; if the pass now succeeds, it says so and exits 1.\n"
        '"""\n'
    )
    values: dict[str, Any] = {"PASS": failure.get("name"), "TARGET": failure.get("target"), "NAMESPACES": NAMESPACES}
    constants = "".join(f"{key} = {value!r}\n" for key, value in values.items())
    return header + _BODY.replace("#CONSTANTS\n", constants)


_BODY = """
import importlib
import sys
from pathlib import Path

import tilelang  # noqa: F401  (registers TileLang's passes)
from tilelang import tvm

HERE = Path(__file__).resolve().parent
#CONSTANTS


def make_pass():
    namespace, _, short = PASS.partition(".")
    module = NAMESPACES.get(namespace)
    factory = getattr(importlib.import_module(module), short, None) if module else None
    if factory is None:
        sys.exit(f"repro: {PASS} is not one of TileLang's or TVM's passes; module.json holds its input")
    return factory()


mod = tvm.ir.load_json((HERE / "module.json").read_text())
config = {}
if (HERE / "config.json").exists():
    config = dict(tvm.ir.load_json((HERE / "config.json").read_text()).items())
target = tvm.target.Target(TARGET) if TARGET else None
with tvm.transform.PassContext(opt_level=3, config=config):
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
