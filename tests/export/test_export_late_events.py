"""A streamed export writes a compile once it ended and lets its passes go; a pass or codegen
step of that compile that comes later (only a recording that lies sends one) cannot be written
any more: it is counted and said, never dropped in silence."""

from __future__ import annotations

import io

import pytest

from iket_tui.export import session_notes, stream_of
from iket_tui.model.synthetic import Lowering, agent_hello
from iket_tui.protocol import messages as m


def _late(compile_id: int, t_ns: int) -> list[m.Message]:
    common = {"compile": compile_id, "context": 0, "seq": 999, "depth": 0, "parent": None, "phase": None}
    return [
        m.pass_start(name="tl.Late", t_ns=t_ns, **common),
        m.pass_end(name="tl.Late", t_ns=t_ns + 5, duration_ns=5, **common),
        {"type": m.CODEGEN_BEGIN, "compile": compile_id, "name": "late", "t_ns": t_ns + 10},
        {
            "type": m.CODEGEN_END,
            "compile": compile_id,
            "name": "late",
            "t_ns": t_ns + 20,
            "duration_ns": 10,
            "ok": True,
        },
    ]


@pytest.mark.parametrize("fmt", ["chrome", "speedscope", "perfetto"])
def test_events_of_a_compile_already_written_are_counted_and_said(fmt: str) -> None:
    compile_messages = Lowering(compile=1, kernel="gemm", start_ns=1_000_000).messages()
    end = compile_messages[-1]["t_ns"]
    stream = stream_of(fmt, io.BytesIO().write, name="late.msgpack")
    stream.feed([agent_hello(), *compile_messages])  # the compile ends: written, its passes let go
    stream.feed(_late(1, end + 1_000))
    stream.finish()
    assert stream.session.tree.late_events == 4
    assert "left out 4 pass and codegen events that came after their compile had ended and was written" in (
        session_notes(stream.session)
    )


def test_events_that_come_with_their_compiles_end_are_written_not_counted() -> None:
    compile_messages = Lowering(compile=1, kernel="gemm", start_ns=1_000_000).messages()
    end = compile_messages[-1]["t_ns"]
    stream = stream_of("chrome", io.BytesIO().write, name="late.msgpack")
    stream.feed([agent_hello(), *compile_messages, *_late(1, end + 1_000)])
    stream.finish()
    assert stream.session.tree.late_events == 0
    assert session_notes(stream.session) == ()
