"""TileLang, with the TVM it bundles, under the agent (IKET_TUI=1, so the agent starts before
TileLang is imported): lowers one demo kernel and prints as JSON whether the plain-TVM watcher took
hold of TileLang's TVM, and how many compiles and passes the agent told."""

from __future__ import annotations

import json
import sys

from iket_tui.agent.registry import registry
from iket_tui.protocol import messages as m

client, _catch_up = registry.attach(1_000_000)

from iket_tui.demo import kernels  # noqa: E402  (imports TileLang, and its tvm)

kernels.lower("vector_add")
from tilelang import tvm  # noqa: E402

sent = [m.as_message(item) for item in client.take(1_000_000)]
print(
    json.dumps(
        {
            "pass_contexts_watched": getattr(tvm.transform.PassContext.__init__, "_iket_tui_watching", False),
            "tvm_hook_left": [type(f).__module__ for f in sys.meta_path if type(f).__module__.endswith("tvm_hook")],
            "compiles": [msg["label"] for msg in sent if msg["type"] == m.COMPILE_BEGIN],
            "compilers": sorted({str(msg.get("compiler")) for msg in sent if msg["type"] == m.COMPILE_BEGIN}),
            "passes": sum(msg["type"] == m.PASS_START for msg in sent),
            "distinct": len({msg["seq"] for msg in sent if msg["type"] == m.PASS_START}),
        }
    )
)
