"""Rows of the pass tree painted without an app: what each kind of row says."""

from __future__ import annotations

from rich.style import Style

from iket_tui.model.nodes import PassNode
from iket_tui.model.pass_tree import PassTree
from iket_tui.model.session import Session
from iket_tui.model.synthetic import Lowering, agent_hello, live_stream
from iket_tui.model.visible_rows import Row
from iket_tui.ui.row_painter import STATUS_W, Columns, RowState, RowStyles, headline, paint_row

MS = 1_000_000


def pass_named(tree: PassTree, name: str) -> PassNode:
    return next(node for node in tree.passes if node.name == name)


def paint(tree: PassTree, row: Row, *, width: int = 120, now_ns: int = 0, **state: object) -> str:
    look = RowState(
        expanded=bool(state.get("expanded", True)), cursor=False, now_ns=now_ns, search=str(state.get("search", ""))
    )
    return paint_row(tree, row, look, Columns(width), RowStyles()).text


def test_a_finished_pass_shows_its_name_phase_and_durations() -> None:
    session = Session()
    tree = session.tree
    session.apply(Lowering(compile=1, kernel="gemm", start_ns=0).messages())
    lower = pass_named(tree, "tl.LowerTileOp")

    text = paint(tree, Row(lower, 3, True))
    assert text.startswith("      ▼ ✓ tl.LowerTileOp ")
    assert "pipeline_cuda" in text
    assert text.split()[-4:] == ["85.1", "ms", "84.6", "ms"]
    assert " done " not in text  # a finished pass needs no status word
    assert len(text) == 120


def test_a_running_pass_shows_a_live_timer_and_turns_stuck() -> None:
    session = Session(stuck_after_ns=30_000 * MS)
    tree = session.tree
    session.apply(live_stream(running_for_ns=2_000 * MS))
    layout = tree.running_passes()[0]
    row = Row(layout, 3, False)

    assert "● tl.LayoutInference" in paint(tree, row, now_ns=layout.start_ns + 2_000 * MS)
    running = paint(tree, row, now_ns=layout.start_ns + 2_000 * MS).split()
    assert running[-6:] == ["running", "pipeline_cuda", "2.00", "s", "2.00", "s"]
    stuck = paint(tree, row, now_ns=layout.start_ns + 45_000 * MS)
    assert "! tl.LayoutInference" in stuck
    assert stuck.split()[-6:] == ["stuck", "pipeline_cuda", "45.0", "s", "45.0", "s"]


def test_failed_compile_and_pass_rows_say_so() -> None:
    session = Session()
    tree = session.tree
    session.apply(Lowering(compile=4, kernel="add_transposed", start_ns=0, fail_in="tl.LayoutInference").messages())
    comp = tree.compiles[0]
    assert comp.failing is not None

    compile_text = paint(tree, Row(comp, 1, True), width=160)
    assert compile_text.startswith("  ▼ ✗ add_transposed InternalError: Layout infer conflict")
    assert " failed " in compile_text
    assert "✗ tl.LayoutInference" in paint(tree, Row(comp.failing, 3, False))


def test_each_codegen_step_has_its_own_row_with_its_time() -> None:
    session = Session()
    tree = session.tree
    session.apply(Lowering(compile=1, kernel="gemm", start_ns=0, codegen_ns=2_900 * MS).messages())
    nvcc, host = tree.compiles[0].codegen_steps

    nvcc_text = paint(tree, Row(nvcc, 2, False))
    assert nvcc_text.startswith("      ✓ codegen tilelang_cuda ")
    assert nvcc_text.split()[-2:] == ["2.90", "s"]
    host_text = paint(tree, Row(host, 2, False))
    assert host_text.startswith("      ✓ codegen tilelang_c_host ")
    assert host_text.split()[-2:] == ["1.10", "ms"]


def test_a_running_codegen_step_shows_a_live_timer() -> None:
    session = Session()
    tree = session.tree
    spec = Lowering(compile=1, kernel="gemm", start_ns=0, codegen_ns=2_900 * MS)
    messages = spec.messages()
    began = next(index for index, msg in enumerate(messages) if msg["type"] == "codegen_begin")
    session.apply(messages[: began + 1])
    [nvcc] = tree.compiles[0].codegen_steps

    text = paint(tree, Row(nvcc, 2, False), now_ns=nvcc.begin_ns + 1_250 * MS)
    assert text.startswith("      ● codegen tilelang_cuda ")
    assert text.split()[-3:] == ["running", "1.25", "s"]


def test_the_process_row_names_the_target_and_sums_up() -> None:
    session = Session()
    tree = session.tree
    session.apply([agent_hello(pid=31337, argv=["python", "train.py"])])
    session.apply(Lowering(compile=1, kernel="k", start_ns=0, fail_in="tl.Simplify").messages())

    text = paint(tree, Row(tree.process, 0, True), width=90).rstrip()
    assert text.startswith("▼ pid 31337 python train.py")
    assert text.endswith("1 compile, 1 failed")


def test_narrow_rows_drop_the_self_column_first_and_shorten_long_names() -> None:
    session = Session()
    tree = session.tree
    session.apply(Lowering(compile=1, kernel="k" * 80, start_ns=0).messages())

    assert Columns(120).shown == {"status", "phase", "total", "self"}
    assert Columns(86).shown == {"status", "phase", "total"}  # the self time goes first
    assert Columns(78).shown == {"status", "total"}  # then the phase
    text = paint(tree, Row(tree.compiles[0], 1, True), width=78)
    assert len(text) == 78
    assert "k…" in text
    simplify = paint(tree, Row(pass_named(tree, "tl.Simplify"), 3, False), width=78)
    assert "pipeline_cuda" not in simplify and simplify.split()[-2:] == ["353", "µs"]  # one duration, whole


def test_the_column_titles_line_up_with_the_row_cells() -> None:
    session = Session()
    tree = session.tree
    session.apply(live_stream())
    for width in (78, 140):
        columns = Columns(width)
        header = columns.header()
        row = paint(tree, Row(tree.running_passes()[0], 3, False), width=width, now_ns=session.last_t_ns)
        assert header.index("status") == row.index("running") == columns.name_width + 1
        assert header.rstrip().endswith("self" if width >= 120 else "total") and len(header) == width
        assert len("incomplete") <= STATUS_W


def test_a_search_match_is_highlighted_in_the_name() -> None:
    session = Session()
    tree = session.tree
    session.apply(Lowering(compile=1, kernel="k", start_ns=0).messages())
    match = Style(underline=True)
    styles = RowStyles(match=match)
    row = Row(pass_named(tree, "tl.LayoutInference"), 3, False)
    strip = paint_row(
        tree, row, RowState(expanded=False, cursor=False, now_ns=0, search="layout"), Columns(100), styles
    )

    highlighted = [segment.text for segment in strip if segment.style is not None and segment.style.underline]
    assert highlighted == ["Layout"]


def test_a_compiler_error_is_summed_up_by_its_error_line() -> None:
    nvcc = (
        "RuntimeError: Compilation error:\n"
        'common.h(621): warning #1444-D: type "longlong4" was declared deprecated\n'
        'kernel.cu(41): error: identifier "__tl_missing" is undefined\n'
        "1 error detected in the compilation of kernel.cu."
    )
    assert headline(nvcc) == 'RuntimeError: kernel.cu(41): error: identifier "__tl_missing" is undefined'
    in_a_temporary_directory = nvcc.replace("kernel.cu(41)", "/tmp/tmp3_q2z085/kernel.cu(41)")
    assert headline(in_a_temporary_directory) == headline(nvcc)
    assert headline("InternalError: Layout infer conflict\n  detail") == "InternalError: Layout infer conflict"
    assert headline("") == ""


def _name_style(tree: PassTree, node: PassNode, styles: RowStyles) -> Style:
    look = RowState(expanded=True, cursor=False, now_ns=0, search="")
    strip = paint_row(tree, Row(node, 3, False), look, Columns(120), styles)
    return next(segment.style for segment in strip if segment.text.strip() == node.name)


def test_a_pass_that_changed_nothing_is_dimmed_and_one_not_known_is_not() -> None:
    session = Session()
    tree = session.tree
    messages = Lowering(compile=1, kernel="gemm", start_ns=0).messages()
    for msg in messages:
        if msg["type"] == "pass_end" and msg["name"] in ("tl.LowerTileOp", "tl.Simplify"):
            msg["changed"] = msg["name"] == "tl.LowerTileOp"
    session.apply(messages)
    styles = RowStyles(unchanged=Style(dim=True))

    lower, simplify = pass_named(tree, "tl.LowerTileOp"), pass_named(tree, "tl.Simplify")
    layout = pass_named(tree, "tl.LayoutInference")
    assert (lower.changed, simplify.changed, layout.changed) == (True, False, None)
    assert _name_style(tree, simplify, styles).dim
    assert not _name_style(tree, lower, styles).dim
    assert not _name_style(tree, layout, styles).dim  # not known: shown as any pass
    assert "tl.Simplify" in paint(tree, Row(simplify, 3, False))  # dimmed, still read in full
