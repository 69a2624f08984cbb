"""What the fuzzer found, as plain tests (its inputs are also kept in ``seeds/``)."""

from __future__ import annotations

import json
from typing import Any

from iket_tui.protocol import messages as m
from iket_tui.sources.lines import TextLines, json_line


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


def test_dump_shows_a_field_nested_1000_deep_as_text() -> None:
    msg = {"type": m.HEARTBEAT, "t_ns": 1, "produced": _nested(1000), "dropped": 0}
    line = json.loads(json_line(msg))
    depth = 0
    value = line["produced"]
    while isinstance(value, list):
        value, depth = value[0], depth + 1
    assert value == "<nested deeper than 32 levels>" and depth == 31
    text = TextLines().line(msg)
    assert "nested deeper than 32 levels" in text and "\n" not in text


def test_dump_keeps_a_message_on_one_line_whatever_its_field_names() -> None:
    msg = {"type": m.HEARTBEAT, "t_ns": 1, "produced": 1, "dropped": 0, "a\nb": [[]], "c d": "e f"}
    line = TextLines().line(msg)
    assert line.endswith('produced=1 dropped=0 "a\\nb"=[[]] "c d"="e f"')
    assert "\n" not in line and "\n" not in json_line(msg)
