"""A self-contained reproducer for a failed pass in a recording (``iket-tui repro``).

The agent captured, when the pass failed, the module it was given (TVM JSON), the target and
the pass-context configuration (``compile_failure``). The reproducer loads that module and runs
that one pass on it in a fresh process, so the same error comes back without the original
program. Passes that are not TileLang's or TVM's own (defined in the user's code) cannot be
rebuilt from their name: the reproducer says so, and the module is still written.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iket_tui.protocol import messages as m

NAMESPACES = {"tl": "tilelang.transform", "tir": "tvm.tir.transform", "tirx": "tvm.tir.transform"}
"""Where the factory of a pass named ``<namespace>.<Name>`` lives."""


class ReproError(Exception):
    """No reproducer can be written; the message says why in one line."""


@dataclass(frozen=True)
class Repro:
    """What was written, and whether ``repro.py`` can run the pass by itself."""

    directory: Path
    compile: int
    name: str
    runnable: bool
    note: str


def failures_in(messages: Iterable[m.Item]) -> tuple[dict[int, m.Message], dict[int, m.Message]]:
    """The captured pass failures and the compile ends of a recording, by compile id."""
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
        if end.get("stage") == "codegen":
            raise ReproError(
                f"compile {compile_id} failed in codegen ({end.get('error_type')}); only failed passes are reproduced, "
                "the recording holds the compiler's error (iket-tui dump)"
            )
        raise ReproError(f"compile {compile_id} failed, but the agent captured no failed pass for it")
    module_json = failure.get("ir_json")
    if not isinstance(module_json, str):
        raise ReproError(
            f"the failed pass of compile {compile_id} was captured without its module: {failure.get('ir_missing')}"
        )
    name = str(failure.get("name"))
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "module.json").write_text(module_json, encoding="utf-8")
    if isinstance(failure.get("ir_script"), str):
        (directory / "before.py").write_text(failure["ir_script"], encoding="utf-8")
    config = failure.get("config_json")
    if isinstance(config, str):
        (directory / "config.json").write_text(config, encoding="utf-8")
    runnable = name.partition(".")[0] in NAMESPACES
    (directory / "repro.py").write_text(_script(failure, ends.get(compile_id), source), encoding="utf-8")
    note = (
        f"python {directory / 'repro.py'} runs {name} on the module it was given"
        if runnable
        else f"{name} is not one of TileLang's or TVM's passes: repro.py cannot rebuild it; "
        "module.json and before.py hold its input"
    )
    return Repro(directory, compile_id, name, runnable, note)


def _script(failure: m.Message, end: m.Message | None, source: str) -> str:
    error = str(failure.get("error") or "").splitlines()[0] if failure.get("error") else "an error"
    label = str(end.get("label")) if end is not None else ""
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
