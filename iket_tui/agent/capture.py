"""What the agent keeps of a failed pass without being asked: the module the pass was given
(TVMScript to read, TVM's JSON to load back), the target and the pass-context configuration in
force, so that ``iket-tui repro`` can run the same pass on the same input in another process.

Captured on the compiler's thread when the pass fails (the failure path, never the normal one),
from the module the IR store holds for that pass.
"""

from __future__ import annotations

from typing import Any, Final

from iket_tui.agent.ir_store import IRStore

MAX_JSON_CHARS: Final = 8 * 1024 * 1024
"""A module larger than this as JSON is captured as text only (a frame holds 16 MiB)."""


def scope() -> dict[str, Any]:
    """The target and pass-context configuration in force now (while the failing pass unwinds)."""
    from tvm import ir, target, transform

    found: dict[str, Any] = {"target": None, "config_json": None}
    try:
        current = target.Target.current(allow_none=True)
        if current is not None:
            found["target"] = str(current)  # a JSON object TVM's Target() reads back
    except Exception:
        pass
    try:
        config = transform.PassContext.current().config
        found["config_json"] = ir.save_json(config)
    except Exception:
        pass
    return found


def failed_pass(store: IRStore, compile_id: int, seq: int) -> dict[str, Any]:
    """The module pass ``seq`` of ``compile_id`` was given, as text and as TVM JSON."""
    from tvm import ir

    found: dict[str, Any] = {"ir_script": None, "ir_json": None, "ir_missing": None}
    module = store.module_before(compile_id, seq)
    if module is None:
        found["ir_missing"] = "the agent kept no IR for this compile (IKET_TUI_IR_COMPILES=0?)"
        return found
    try:
        found["ir_script"] = str(module.script())
    except Exception as exc:
        found["ir_missing"] = f"the module could not be printed ({type(exc).__name__})"
    try:
        text = ir.save_json(module)
        if len(text) <= MAX_JSON_CHARS:
            found["ir_json"] = text
        else:
            found["ir_missing"] = f"the module is {len(text):,} characters as JSON, over {MAX_JSON_CHARS:,}"
    except Exception as exc:
        found["ir_missing"] = f"the module could not be saved ({type(exc).__name__})"
    return found
