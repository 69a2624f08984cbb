"""A pass that finishes out of order: the agent reports the mismatch and the pass left open,
and the tree shows it.

TVM pairs ``run_before_pass``/``run_after_pass`` itself, so a real mismatch needs a broken
pass; here the agent's own pass instrument is driven directly with the callbacks TVM would
make, in the wrong order.
"""

from __future__ import annotations

import pytest

from iket_tui.agent.registry import Registry
from iket_tui.model.nodes import MISMATCH
from iket_tui.model.session import Session
from iket_tui.protocol import messages as m

pytest.importorskip("tilelang")

import tvm

from iket_tui.agent.tilelang_tool import CompileWatcher


def test_an_after_pass_callback_for_the_wrong_pass_is_reported_and_shown() -> None:
    registry = Registry()
    client, _ = registry.attach(limit=1000)
    watcher = CompileWatcher(registry)
    instrument = watcher.create_pass_instrument()
    instrument.enter_pass_ctx()
    instrument.run_before_pass(None, tvm.transform.PassInfo(0, "tl.LayoutInference", []))
    instrument.run_after_pass(None, tvm.transform.PassInfo(0, "tl.LowerTileOp", []))
    instrument.exit_pass_ctx()
    watcher.finish(None)
    sent = [m.as_message(item) for item in client.take(1000)]

    assert [msg["type"] for msg in sent] == [
        m.COMPILE_BEGIN,
        m.PASS_CONTEXT_ENTER,
        m.PASS_START,
        m.CALLBACK_MISMATCH,
        m.PASS_INCOMPLETE,
        m.PASS_CONTEXT_EXIT,
        m.COMPILE_END,
    ]
    mismatch = sent[3]
    assert (mismatch["expected"], mismatch["got"]) == ("tl.LayoutInference", "tl.LowerTileOp")
    assert sent[4]["name"] == "tl.LayoutInference"
    assert "unmatched after-pass callback for 'tl.LowerTileOp'" in sent[4]["error"]
    assert registry.observer_errors == 0

    session = Session()
    session.apply(sent)
    tree = session.tree
    (node,) = tree.passes
    assert node.name == "tl.LayoutInference" and node.status is MISMATCH
    assert tree.compiles[0].mismatches == 1
