"""What the export tests share: the H200 recording and the event table of a small kernel."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from iket_tui.ring.events import EventInfo, ModuleEvents

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"

SMALL_TABLE = ModuleEvents(
    module=1,
    id_bits=5,
    kernels=("small_kernel",),
    events=(
        EventInfo(1, "outer", "range"),
        EventInfo(2, "tick", "mark", "float32"),
        EventInfo(3, "inner", "range", "int32"),
    ),
)


def as_json(document: dict[str, Any]) -> Any:
    """The document as a reader of the written file sees it."""
    return json.loads(json.dumps(document, allow_nan=False))
