"""A user's compiles named as the user knows them, pass pipelines of the program's own, and why a
kernel compiled again, with a real program and real TileLang (``targets/own_compiles.py``).

The program lowers the demo's vector add four times from one function (the third with the pass
configuration ``tl.disable_tma_lower`` set, the fourth from a module twice as tall), calls a
``@tilelang.jit`` kernel with its sizes, and runs a ``Sequential`` of its own in a ``PassContext``
of its own, outside TileLang's entry points, with a pass of its own that waits for the test. One
client watches it all live; the stream is then applied to a model and the tree's rows and detail
pane read as a user reads them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from agent_wire import WireClient, of_type, socket_of, spawn_target

from iket_tui.model.nodes import DONE, CompileNode
from iket_tui.model.session import Session
from iket_tui.model.visible_rows import Row
from iket_tui.protocol import messages as m
from iket_tui.protocol.messages import Message
from iket_tui.ui.details import describe
from iket_tui.ui.row_painter import Columns, RowState, RowStyles, paint_row

pytestmark = pytest.mark.tilelang

TARGET = "own_compiles.py"
LOWER_LINE = next(
    number
    for number, text in enumerate((Path(__file__).parent / "targets" / TARGET).read_text().splitlines(), 1)
    if "tilelang.lower(" in text
)
OWN_PASS = "own.SlowCheck"


@dataclass
class Watched:
    messages: list[Message]
    while_held: list[Message]
    """What the client had received while the program's own pass was running."""
    stdout: str
    session: Session


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Watched]:
    gate = tmp_path_factory.mktemp("own") / "go"
    proc = spawn_target(TARGET, env={"IKET_TEST_GATE": str(gate)})
    try:
        client = WireClient(socket_of(proc))
        client.catch_up()
        gate.touch()
        client.read_until(lambda msg: msg["type"] == m.PASS_START and msg["name"] == OWN_PASS)
        while_held = list(client.received)
        Path(f"{gate}.slow").touch()
        client.read_to_end()
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    session = Session()
    session.apply(client.received)
    yield Watched(client.received, while_held, stdout, session)


def row_of(session: Session, comp: CompileNode) -> str:
    now = session.last_t_ns
    return paint_row(session.tree, Row(comp, 1, False), RowState(False, False, now), Columns(240), RowStyles()).text


def test_the_program_ran_every_compile(watched: Watched) -> None:
    assert watched.stdout.splitlines()[-1] == "done"
    compiles = watched.session.tree.compiles
    assert len(compiles) == 6, [comp.label for comp in compiles]  # TileLang's own calls of passes are not compiles
    assert all(comp.status is DONE for comp in compiles)


def test_each_lowering_names_the_function_and_line_that_asked_for_it(watched: Watched) -> None:
    for comp in watched.session.tree.compiles[:4]:
        row = row_of(watched.session, comp)
        assert row.lstrip().startswith(f"✓ vector_add · lower_step ({TARGET}:{LOWER_LINE})"), row


def test_a_jit_kernel_reads_as_its_function_and_arguments_with_its_prim_func_still_named(watched: Watched) -> None:
    jit = watched.session.tree.compiles[4]
    row = row_of(watched.session, jit)
    assert "✓ scaled_add(1024, 1024) · <module> (own_compiles.py:" in row, row
    assert "kernel=main" in row  # the prim_func's name, which every TileLang example calls main
    fields = dict(describe(watched.session, jit, watched.session.last_t_ns).fields)
    assert fields["jit call"] == "scaled_add(1024, 1024)" and fields["kernel"] == "main"


def test_the_same_kernel_compiled_again_says_so_and_names_the_changed_config_key(watched: Watched) -> None:
    first, second, third = watched.session.tree.compiles[:3]
    assert "compiled 4 times" in row_of(watched.session, first)
    assert "compiled 4 times: same target, pass config, label and input module" in row_of(watched.session, second)
    assert "compiled 4 times: tl.disable_tma_lower changed" in row_of(watched.session, third)
    fields = dict(describe(watched.session, third, watched.session.last_t_ns).fields)
    assert fields["compiled"] == "4 times in this process; this is compile 3 of them"
    assert fields[f"changed since #{second.id}"] == "pass config tl.disable_tma_lower (unset) → True"
    assert fields["pass config"] == "tl.disable_tma_lower=True"
    assert "input module diff" not in fields  # the same module


def test_a_compile_from_another_module_shows_the_diff_of_the_two_modules(watched: Watched) -> None:
    third, fourth = watched.session.tree.compiles[2:4]
    assert "compiled 4 times: input module changed" in row_of(watched.session, fourth)
    fields = dict(describe(watched.session, fourth, watched.session.last_t_ns).fields)
    assert fields[f"changed since #{third.id}"].startswith("input module structural hash ")
    diff = fields["input module diff"].splitlines()
    assert diff[1:3] == ["--- before", "+++ now"]
    removed = [line.split() for line in diff if line.startswith("-") and "T.match_buffer(A_handle" in line]
    added = [line.split() for line in diff if line.startswith("+") and "T.match_buffer(A_handle" in line]
    assert removed == [
        ["-", "A", "=", "T.match_buffer(A_handle,", "(1024,", "1024),", '"float16",', "strides=(1024,", "1))"]
    ]
    assert added == [
        ["+", "A", "=", "T.match_buffer(A_handle,", "(2048,", "1024),", '"float16",', "strides=(1024,", "1))"]
    ]


def test_a_pipeline_of_the_programs_own_is_a_compile_with_every_pass_seen_while_it_runs(watched: Watched) -> None:
    (begin,) = [msg for msg in of_type(watched.while_held, m.COMPILE_BEGIN) if msg.get("kind") == "pipeline"]
    started = [msg["name"] for msg in of_type(watched.while_held, m.PASS_START, compile=begin["compile"])]
    assert started == ["own.Cleanup", "tirx.Simplify", OWN_PASS]  # the held pass is seen while it runs
    assert not of_type(watched.while_held, m.PASS_END, name=OWN_PASS)

    pipeline = watched.session.tree.compiles[5]
    row = row_of(watched.session, pipeline)
    assert "main · own_pipeline (own_compiles.py:" in row and "pipeline own.Cleanup" in row, row
    passes = [node.name for ctx in pipeline.context_order for node in ctx.passes.values()]
    assert passes == ["own.Cleanup", "tirx.Simplify", OWN_PASS, "tirx.RemoveNoOp"]
    fields = dict(describe(watched.session, pipeline, watched.session.last_t_ns).fields)
    assert fields["kind"] == "a pass pipeline the program ran itself"
