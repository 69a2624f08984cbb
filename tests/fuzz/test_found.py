"""What the fuzzer found, as plain tests (its inputs are also kept in ``seeds/``)."""

from __future__ import annotations

import json
from typing import Any

from iket_tui.export import SpeedscopeStream, recording_session, speedscope
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


def _pass(kind: str, seq: int, t_ns: int) -> dict[str, Any]:
    return {
        "type": kind,
        "compile": 1,
        "context": 1,
        "name": f"tl.Pass{seq}",
        "seq": seq,
        "depth": 0,
        "parent": None,
        "phase": None,
        "t_ns": t_ns,
        **({"duration_ns": 100} if kind == m.PASS_END else {}),
    }


def test_a_compile_the_recording_ends_before_it_began_is_drawn_from_its_begin_written_while_read_or_whole() -> None:
    """A compile that only its passes announce, in a recording whose last time seen is earlier
    (the heartbeat before it; nothing after it carries a time): it closes before it began."""
    messages = [
        m.heartbeat(t_ns=1000, produced=0, dropped=0, open_passes=0),
        _pass(m.PASS_START, 1, 2000),
        _pass(m.PASS_END, 1, 2100),
        _pass(m.PASS_START, 2, 2200),
        _pass(m.PASS_END, 2, 2300),
        m.process(pid=5004, start_time=1),
    ]
    written: list[bytes] = []
    stream = SpeedscopeStream(written.append)
    stream.feed(messages)
    stream.finish()
    whole = json.dumps(speedscope(recording_session(messages)), separators=(",", ":")).encode()
    assert b"".join(written) == whole
    profile = json.loads(whole)["profiles"][0]
    assert (profile["startValue"], profile["endValue"]) == (0, 0)
    assert {event["at"] for event in profile["events"]} == {0}
