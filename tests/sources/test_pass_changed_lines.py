"""How ``iket-tui dump`` writes whether a pass changed the module: on the ``pass_end`` line,
``changed=false`` for a pass that changed nothing, nothing where it is not known."""

from __future__ import annotations

import json

from iket_tui.protocol import messages as m
from iket_tui.sources.lines import TextLines, json_line


def _end(changed: bool | None) -> m.Message:
    return m.pass_end(
        compile=1,
        context=0,
        name="tl.Simplify",
        seq=3,
        depth=0,
        parent=None,
        phase=None,
        t_ns=10,
        duration_ns=5,
        changed=changed,
    )


def test_a_pass_end_line_marks_a_pass_that_changed_nothing() -> None:
    lines = TextLines()
    unchanged, changed, unknown = lines.line(_end(False)), lines.line(_end(True)), lines.line(_end(None))
    assert unchanged.endswith("tl.Simplify duration=5ns changed=false")
    assert changed.endswith("tl.Simplify duration=5ns changed=true")
    assert unknown.endswith("tl.Simplify duration=5ns")
    assert json.loads(json_line(_end(False)))["changed"] is False
    assert "changed" not in json.loads(json_line(_end(None)))
