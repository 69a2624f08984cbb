"""What the agent imports, and when it watches TVM: run with IKET_TUI=1, prints as JSON whether
TVM was imported before the program imported it, and whether TVM's pass contexts and compile
entry points are watched once it did."""

from __future__ import annotations

import json
import sys

before = {name: name in sys.modules for name in ("tvm", "tvm_ffi", "tilelang")}
hooks_before = [getattr(finder, "package", "?") for finder in sys.meta_path if "iket_tui" in type(finder).__module__]

import tvm  # noqa: E402

watched = {
    "PassContext": getattr(tvm.transform.PassContext.__init__, "_iket_tui_watching", False),
    "compile": getattr(tvm.compile, "_iket_tui_watching", False),
    "relax.build": getattr(tvm.relax.build, "_iket_tui_watching", False),
    "tirx.build": getattr(tvm.tirx.build, "_iket_tui_watching", False),
}
hooks_after = [getattr(finder, "package", "?") for finder in sys.meta_path if "iket_tui" in type(finder).__module__]
print(json.dumps({"before": before, "hooks_before": hooks_before, "watched": watched, "hooks_after": hooks_after}))
