"""What every reproducer reads of a capture, whatever failed: the compiler it came from (TileLang
or plain Apache TVM) and whose passes it rebuilds by name, the module a pass was given, the pass
context, and how the reproducer's directory is written."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

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

DEFAULT_OPT_LEVEL: Final = 3
"""The ``opt_level`` of a reproducer's pass context when the capture does not say (captures of
failures, and of stuck passes before it was captured)."""

MAIN: Final = "__main__"
"""The module name of the program's main script, where a pass of one's own is often defined."""


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
    return bool(short) and namespace in COMPILERS[compiler].namespaces


def module_files(capture: m.Message, compiler: str, what: str) -> dict[str, str]:
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
class Compiler:
    """What a reproducer's script says and imports for one compiler."""

    name: str
    owner: str
    """Whose passes those are, in a sentence: ``TileLang's or TVM's``."""
    imports: str
    namespaces: dict[str, str]


COMPILERS: Final = {
    "tilelang": Compiler(
        name="TileLang",
        owner="TileLang's or TVM's",
        imports="import tilelang  # noqa: F401  (registers TileLang's passes)\nfrom tilelang import tvm\n",
        namespaces=NAMESPACES,
    ),
    TVM: Compiler(
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


def quotable(text: str) -> str:
    """``text`` as it can stand inside the script's docstring."""
    return text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
