"""``D`` compares: on a compile, with the previous compile of its kernel; on a launch, with the
previous launch of its kernel; ``c`` chooses another. The pane says what ``iket-tui diff`` says of
the same two, in the same order with the same flags."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from textual.widgets import OptionList, Static
from ui_driving import app_test, wait_for_batches, wait_until
from ui_fakes import FakeSource, FrozenClock, batch

from iket_tui.model import synthetic
from iket_tui.model.nodes import CompileNode
from iket_tui.protocol import messages as m
from iket_tui.sources.base import SourceState
from iket_tui.ui.app import IketApp
from iket_tui.ui.compare_screen import CompareScreen, Counterpart
from tests.cli.cli_helpers import run_iket
from tests.cli.kernel_runs import kernel_messages

Compare = Callable[..., bool]
SLOWED = {"tl.LayoutInference": 4 * 26_908_000}
COMPILES = (
    synthetic.Lowering(compile=1, kernel="gemm", start_ns=100_000_000),
    synthetic.Lowering(compile=2, kernel="softmax", start_ns=400_000_000),
    synthetic.Lowering(compile=3, kernel="gemm", start_ns=700_000_000, slow=SLOWED),
)


def _session() -> list[m.Message]:
    """Three compiles (two of ``gemm``, the second with a pass slowed), then ``gemm`` and
    ``softmax`` launched twice each (launches 3 to 6), ``gemm``'s ``mma`` slower the second time."""
    messages: list[m.Message] = [synthetic.agent_hello()]
    for lowering in COMPILES:
        messages += lowering.messages()
    return messages + list(kernel_messages(seed=1, then_slower=({"mma": 320},)))


def _app() -> IketApp:
    source = FakeSource([batch(_session(), state=SourceState.LIVE)], stay_open=True)
    return IketApp(source, clock=FrozenClock(), follow=False)


def _recording(path: Path) -> Path:
    from iket_tui.sources.recorder import RecordingWriter

    writer = RecordingWriter(path, source="pid 4242: python kernels/demo.py")
    for msg in _session():
        writer.write(msg)
    writer.close("target exited")
    return path


def _pane(app: IketApp) -> tuple[str, list[str]]:
    screen = app.screen
    assert isinstance(screen, CompareScreen)
    return str(screen.query_one("#compare-title", Static).render()), screen.lines


async def _to_compile(pilot: Pilot[int], app: IketApp, number: int) -> CompileNode:
    comp = next(comp for comp in app.pass_tree.compiles if comp.id == number)
    line = app.rows.index_of(comp)
    assert line is not None
    await pilot.press("home", *["down"] * line)
    assert app.view.cursor is comp
    return comp


@app_test
async def test_d_on_a_compile_compares_it_with_the_previous_compile_of_its_kernel(tmp_path: Path) -> None:
    expected = run_iket("diff", str(_recording(tmp_path / "run.msgpack")), "--compile", "1", "--compile", "3")
    app = _app()
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for_batches(pilot, app, 1)
        await _to_compile(pilot, app, 3)
        await pilot.press("D")
        await wait_until(pilot, lambda: isinstance(app.screen, CompareScreen), "the comparison pane")
        title, lines = _pane(app)
        assert title == "compile 3 gemm compared with compile 1 gemm (the previous one)"
        assert lines[0].startswith("process 1 compile 1 -> 3 gemm: ") and lines[0].endswith("[1 pass slower]")
        assert lines[1] == f"  label: {COMPILES[0].label}"
        assert lines[3].split()[:2] == ["!", "tl.LayoutInference"]
        assert [line for line in lines if line.startswith("  ! ")] == [lines[3]]
        # What the command says of the same two compiles, in the same order with the same flags
        # (the pane lists every pass where the command lists five and those flagged).
        said = expected.stdout.splitlines()
        pair = said[said.index(lines[0]) :]
        assert [line.split() for line in lines[:8]] == [line.split() for line in pair[:8]]  # names wider in the pane
        passes = sum(1 for line in lines[3:] if line.startswith("    ") or line.startswith("  ! "))
        assert pair[8] == f"    and {passes - 5} more passes, each changed less"

        await pilot.press("c")  # another compile to compare with
        choices = app.screen.query_one("#compare-choices", OptionList)
        assert choices.has_focus and choices.option_count == 2
        await pilot.press("escape")  # the list closes, the comparison stays
        assert isinstance(app.screen, CompareScreen) and not choices.has_class("-shown")
        await pilot.press("c", "down", "enter")
        title, lines = _pane(app)
        assert title == "compile 3 gemm compared with compile 2 softmax"
        assert lines[0].startswith("process 1 compile 2 -> 3 softmax -> gemm: ") and lines[0].endswith(
            "[1 pass slower]"
        )

        await pilot.press("escape")
        assert not isinstance(app.screen, CompareScreen) and app.view.cursor.id == 3  # type: ignore[union-attr]


@app_test
async def test_d_on_a_launch_compares_it_with_the_previous_launch_of_its_kernel(tmp_path: Path) -> None:
    expected = run_iket("diff", str(_recording(tmp_path / "run.msgpack")), "--launch", "3", "--launch", "5")
    app = _app()
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for_batches(pilot, app, 1)
        await pilot.press("K")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "KernelsScreen", "the kernels screen")
        await pilot.click("#launches", offset=(2, 2))  # the second row: launch 5 of gemm (newest first)
        await wait_until(pilot, lambda: getattr(app.screen, "selected", None) is not None, "a launch selected")
        assert app.screen.selected.key[3] == 5  # type: ignore[attr-defined]
        await pilot.press("D")
        await wait_until(pilot, lambda: isinstance(app.screen, CompareScreen), "the comparison pane")
        title, lines = _pane(app)
        assert title == "launch 5 gemm compared with launch 3 gemm (the previous one)"
        said = expected.stdout.splitlines()
        assert lines == said[said.index(lines[0]) : said.index(lines[0]) + len(lines)]
        assert lines[0] == "process 1 launch 3 -> 5 gemm  [range-slower]"
        assert [line.split()[1] for line in lines if line.startswith("  ! ")] == ["mma"]
        await pilot.press("c", "down", "down", "enter")  # launch 4 of softmax, another kernel and grid
        title, lines = _pane(app)
        assert title == "launch 5 gemm compared with launch 4 softmax"
        assert lines[0] == "process 1 launch 4 -> 5 softmax -> gemm  [count-changed, payload-changed]"
        assert lines[1].startswith("  grid 8x1x1 -> 4x2x1: ")
        await pilot.press("D")
        assert type(app.screen).__name__ == "KernelsScreen"


@app_test
async def test_with_nothing_to_compare_the_user_is_told() -> None:
    messages: list[Any] = [synthetic.agent_hello(), *COMPILES[0].messages()]
    app = IketApp(FakeSource([batch(messages, state=SourceState.LIVE)], stay_open=True), clock=FrozenClock())
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for_batches(pilot, app, 1)
        await _to_compile(pilot, app, 1)
        await pilot.press("D")
        await pilot.pause()
        assert not isinstance(app.screen, CompareScreen)
        assert [n.message for n in app._notifications] == ["no other compile in this session to compare it with"]


def test_the_comparison_pane_at_100x30(snap_compare: Compare) -> None:
    app = _app()

    async def compare_compile_3(pilot: Pilot[int]) -> None:
        await wait_for_batches(pilot, app, 1)
        await _to_compile(pilot, app, 3)
        await pilot.press("D")
        await wait_until(pilot, lambda: isinstance(app.screen, CompareScreen), "the comparison pane")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(100, 30), run_before=compare_compile_3)


@app_test
async def test_a_long_title_wraps_whole_at_80_columns() -> None:
    subject = "launch 6 traced_gemm_kernel"
    label = "launch 5 traced_gemm_kernel (the previous one)"
    app = _app()
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for_batches(pilot, app, 1)
        await app.push_screen(CompareScreen(subject, [Counterpart(label, lambda: ["process 1 launch 5 -> 6"])]))
        await pilot.pause()
        title = app.screen.query_one("#compare-title", Static)
        shown = [strip.text.strip() for strip in title.render_lines(title.region.reset_offset)]
        assert " ".join(line for line in shown if line) == f"{subject} compared with {label}"
