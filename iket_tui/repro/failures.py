"""A reproducer of a failed compile in a recording (``iket-tui repro``): a failed pass runs alone
on the module it was given (TVM JSON), with the target and pass context captured; a failed
codegen step runs nvcc on the CUDA source it rejected, with this TileLang's include directories.
A compile aborted from outside is a hang, written as :mod:`iket_tui.repro.hangs` writes one."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

from iket_tui.protocol import messages as m
from iket_tui.repro.captured import (
    COMPILERS,
    TVM,
    Repro,
    ReproError,
    compiler_of,
    module_files,
    pass_context_of,
    quotable,
    rebuildable,
    write_directory,
)
from iket_tui.repro.hangs import hang_of, write_hang

CODEGEN: Final = "codegen"
"""The ``stage`` of a ``compile_failure`` that failed in codegen (nvcc); ``"pass"`` (or none, from
older agents) is a failed pass."""

ABORTED: Final = "CompileAborted"
"""The type of the error of a compile aborted from outside (``iket-tui abort``)."""

_DIAGNOSTIC: Final = re.compile(r"\S: (?:fatal )?error\b")
"""A compiler diagnostic such as ``kernel.cu(21): error: identifier "f" is undefined``."""


def failures_in(
    messages: Iterable[m.Item], begun: set[int] | None = None
) -> tuple[dict[int, m.Message], dict[int, m.Message]]:
    """The captured failures and the failed compiles' ends of a recording, by compile id; the
    ids of every compile begun go into ``begun`` where given."""
    captured: dict[int, m.Message] = {}
    ends: dict[int, m.Message] = {}
    for item in messages:
        if not isinstance(item, dict):
            continue
        if begun is not None and item.get("type") == m.COMPILE_BEGIN and type(item.get("compile")) is int:
            begun.add(item["compile"])
        elif item.get("type") == m.COMPILE_FAILURE and type(item.get("compile")) is int:
            captured.setdefault(item["compile"], item)
        elif item.get("type") == m.COMPILE_END and item.get("ok") is False and type(item.get("compile")) is int:
            ends[item["compile"]] = item
    return captured, ends


def write(messages: Iterable[m.Item], directory: Path, compile_id: int | None = None, source: str = "") -> Repro:
    """Write the reproducer of ``compile_id`` (the first failed compile by default) into ``directory``."""
    begun: set[int] = set()
    captured, ends = failures_in(messages, begun)
    if compile_id is None:
        failed = sorted(set(captured) | set(ends))
        if not failed:
            raise ReproError("no compile failed in this recording")
        compile_id = failed[0]
    failure = captured.get(compile_id)
    if failure is None:
        end = ends.get(compile_id)
        if end is None:
            failed = sorted(set(captured) | set(ends))
            named = ", ".join(str(each) for each in failed) if failed else "none"
            if compile_id not in begun:
                raise ReproError(f"no compile {compile_id} in this recording (failed: {named})")
            raise ReproError(f"compile {compile_id} did not fail in this recording (failed: {named})")
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
        return write_hang(hang_of(failure), directory, source, ends.get(compile_id))
    compiler = compiler_of(failure, ends.get(compile_id))
    files = module_files(failure, compiler, f"the failed pass of compile {compile_id}")
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
        else f"{name} is not one of {COMPILERS[compiler].owner} passes: repro.py cannot rebuild it; "
        f"{' and '.join(name for name in ('module.json', 'before.py') if name in files)} hold its input"
    )
    return Repro(directory, compile_id, name, runnable, note)


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
    said = quotable(first_diagnostic(output) or "") if isinstance(output, str) else ""
    label = quotable(str(end.get("label"))) if end is not None else ""
    source = quotable(source)
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


def _script(failure: m.Message, end: m.Message | None, source: str, compiler: str = "tilelang") -> str:
    error = quotable(str(failure.get("error") or "").splitlines()[0]) if failure.get("error") else "an error"
    label = quotable(str(end.get("label"))) if end is not None else ""
    source = quotable(source)
    chosen = COMPILERS[compiler]
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
