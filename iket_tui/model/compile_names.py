"""A compile as the user knows it: the ``@tilelang.jit`` function and arguments that asked for
it, and where in the program it was asked for, read from the optional fields of its
``compile_begin`` (``caller``, ``jit``, ``kind``; see ``docs/protocol.md``).

Those fields are untrusted and optional: one that is missing or not of its documented shape is
left out, and the compile keeps the name its kernel gives it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from iket_tui.model.recompiles import repeat_fields, repeat_note
from iket_tui.protocol import messages as m

if TYPE_CHECKING:
    from iket_tui.model.nodes import CompileNode

MAX_TEXT: Final = 200
"""The longest name, file or argument text kept from a message."""
MAX_DIFF: Final = 256 * 1024
"""The longest input module diff kept from a message."""


class CompileOrigin:
    """Where a compile was asked for, by what, and with which inputs (any part may be unknown)."""

    __slots__ = ("args", "config", "file", "function", "input_diff", "input_hash", "jit", "kind", "line")

    def __init__(self) -> None:
        self.kind: str | None = None
        """``"pipeline"`` for a pass pipeline the program ran itself; None for a compile."""
        self.function: str | None = None
        self.file: str | None = None
        self.line: int | None = None
        self.jit: str | None = None
        """The ``@tilelang.jit`` function that asked for the compile."""
        self.args: str | None = None
        """Its arguments, in short (``1024x1024 f16, 128``)."""
        self.config: dict[str, str] | None = None
        """The pass configuration in force, key to value as text."""
        self.input_hash: str | None = None
        """The structural hash of the module the compile was given."""
        self.input_diff: str | None = None
        """How that module differs from the one the kernel's compile before was given, as a
        unified diff of their TVMScript (sent only where the agent kept the IR)."""

    @property
    def where(self) -> str | None:
        """``function (file:line)``, where the program asked for the compile."""
        if self.file is None:
            return None
        place = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{self.function} ({place})" if self.function else place

    @property
    def call(self) -> str | None:
        """The jit call, ``matmul(1024, 1024)``."""
        return None if self.jit is None else f"{self.jit}({self.args or ''})"


def compile_note(comp: CompileNode) -> str:
    """What a compile's row says after its name: where the program asked for it, its label
    (without the kernel name the row already shows), and how many times its kernel compiled,
    with what changed since the compile before it."""
    where = comp.origin.where if comp.origin is not None else None
    parts = [f"· {where}" if where else "", _label_note(comp), repeat_note(comp)]
    return "  ".join(part for part in parts if part)


def origin_fields(comp: CompileNode) -> list[tuple[str, str]]:
    """What the detail pane says of where a compile comes from and what it was given, and of its
    kernel's other compiles, as labelled fields (none where the agent did not say)."""
    origin = comp.origin
    if origin is None:
        return []
    fields: list[tuple[str, str]] = []
    if origin.kind == m.COMPILE_KIND_PIPELINE:
        fields.append(("kind", "a pass pipeline the program ran itself"))
    if origin.call is not None:
        fields.append(("jit call", origin.call))
    if origin.where is not None:
        fields.append(("called from", origin.where))
    if origin.config is not None:
        config = ", ".join(f"{key}={value}" for key, value in sorted(origin.config.items()))
        fields.append(("pass config", config or "none"))
    if origin.input_hash is not None:
        fields.append(("input hash", origin.input_hash))
    return fields + repeat_fields(comp)


def _label_note(comp: CompileNode) -> str:
    """The compile's label without the kernel name the row already shows."""
    if not comp.kernel:
        return ""
    parts = [part.strip() for part in comp.label.split(",")]
    shown = f"kernel={comp.kernel}" if comp.shown_title == comp.kernel else None
    return ", ".join(part for part in parts if part and part != shown)


def origin_of(msg: dict[str, Any]) -> CompileOrigin | None:
    """What a ``compile_begin`` says of where its compile comes from; None if it says nothing."""
    kind, caller, jit, config, input_hash, input_diff = (msg.get(key) for key in m.COMPILE_ORIGIN_FIELDS)
    if kind is None and caller is None and jit is None and config is None and input_hash is None:
        return None
    found = CompileOrigin()
    found.kind = _text(kind)
    if type(caller) is dict:
        found.function = _text(caller.get("function"))
        found.file = _text(caller.get("file"))
        line = caller.get("line")
        found.line = line if type(line) is int else None
    if type(jit) is dict:
        found.jit = _text(jit.get("name"))
        found.args = _text(jit.get("args"))
    if type(config) is dict:
        found.config = {
            key[:MAX_TEXT]: value[:MAX_TEXT] for key, value in config.items() if type(key) is str and type(value) is str
        }
    found.input_hash = _text(input_hash)
    found.input_diff = input_diff[:MAX_DIFF] if type(input_diff) is str else None
    return found


def _text(value: Any) -> str | None:
    return value[:MAX_TEXT] if type(value) is str else None
