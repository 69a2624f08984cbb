"""The comparison pane: a compile compared with the previous compile of its kernel in the session,
or a kernel launch with the previous launch of its kernel (``c`` chooses another), its changes
in the lines ``iket-tui diff`` prints, in the same order and with the same flags.

The comparison is made once, when the pane opens or another is chosen: a compile still running
is compared as far as it got (its passes still running have no time yet).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from iket_tui.model.compare import compare_pair, process_name, summarize
from iket_tui.model.compare_kernels import compare_launch, summarize_launch
from iket_tui.model.compare_text import FLAG_MARK, launch_lines, pair_lines
from iket_tui.model.kernels import ProcessKernels
from iket_tui.model.launches import Launch
from iket_tui.model.nodes import CompileNode, ProcessNode
from iket_tui.model.pass_tree import PassTree
from iket_tui.ui.footer import KeysFooter

ALL_PASSES = 1 << 30
"""The pane lists every pass of a pair (it scrolls), where the command lists a few."""


@dataclass(frozen=True)
class Counterpart:
    """Something the compile or launch on screen can be compared with, and how to compare them."""

    label: str
    """How the chooser names it: ``compile 3 gemm (the previous one)``."""
    lines: Callable[[], list[str]]
    """The comparison, made when it is chosen, as ``iket-tui diff`` prints it."""


class CompareScreen(Screen[None]):
    """The changes from a chosen counterpart to the compile or launch the user stood on."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,D", "back", "Back"),
        Binding("c", "choose", "Compare with..."),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {"compare-screen--flagged", "compare-screen--head"}

    DEFAULT_CSS = """
    CompareScreen #compare-title { height: auto; background: $panel; text-style: bold; padding: 0 1; }
    CompareScreen #compare-body { height: 1fr; padding: 0 1; }
    CompareScreen #compare-choices { display: none; height: auto; max-height: 50%; border: solid $accent; }
    CompareScreen #compare-choices.-shown { display: block; }
    CompareScreen > .compare-screen--flagged { color: $error; text-style: bold; }
    CompareScreen > .compare-screen--head { text-style: bold; }
    """

    def __init__(self, subject: str, counterparts: Sequence[Counterpart], chosen: int = 0) -> None:
        """``subject``: what is compared, in the title's words; ``counterparts``: what it can be
        compared with, the one compared first at ``chosen``."""
        super().__init__()
        self.subject = subject
        self.counterparts = list(counterparts)
        self.chosen = chosen
        self.lines: list[str] = []

    def compose(self) -> ComposeResult:
        yield Static(id="compare-title", markup=False)
        yield OptionList(*(Option(c.label) for c in self.counterparts), id="compare-choices")
        with VerticalScroll(id="compare-body"):
            yield Static(id="compare-lines", markup=False)
        yield KeysFooter()

    def on_mount(self) -> None:
        self._show()
        self.query_one("#compare-body").focus()

    def _show(self) -> None:
        counterpart = self.counterparts[self.chosen]
        self.lines = counterpart.lines()
        self.query_one("#compare-title", Static).update(f"{self.subject} compared with {counterpart.label}")
        flagged = self.get_component_rich_style("compare-screen--flagged", partial=True)
        head = self.get_component_rich_style("compare-screen--head", partial=True)
        text = Text()
        for i, line in enumerate(self.lines):
            if i:
                text.append("\n")
            style = flagged if line[2:].startswith(FLAG_MARK) else head if line and not line[0].isspace() else ""
            text.append(line, style=style)
        self.query_one("#compare-lines", Static).update(text)

    def action_back(self) -> None:
        """Back to where ``D`` was pressed; with the list of others open, back to the comparison."""
        choices = self.query_one("#compare-choices", OptionList)
        if choices.has_class("-shown"):
            choices.remove_class("-shown")
            self.query_one("#compare-body").focus()
            return
        self.app.pop_screen()

    def action_choose(self) -> None:
        """The list of what else it can be compared with; enter compares with the one chosen."""
        choices = self.query_one("#compare-choices", OptionList)
        choices.add_class("-shown")
        choices.highlighted = self.chosen
        choices.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.option_list.remove_class("-shown")
        self.chosen = event.option_index
        self._show()
        self.query_one("#compare-body").focus()


def _process_words(tree: PassTree, process: ProcessNode | None) -> str:
    """A process as a comparison names it (:func:`~iket_tui.model.compare.process_name`)."""
    processes = tree.processes
    order = processes.index(process) + 1 if process is not None and process in processes else 1
    return process_name(process.rank if process is not None else None, order)


def compile_comparison(tree: PassTree, comp: CompileNode) -> CompareScreen | str:
    """The pane comparing ``comp`` with the previous compile of its kernel in its process (else
    the nearest other compile that still holds its passes); what to tell the user instead when
    there is nothing to compare."""
    if comp.summary is not None:
        return f"compile {comp.id}'s passes were let go (the bound on passes held): nothing to compare"
    process = tree.process_of(comp)
    others = [c for c in tree.compiles if c is not comp and c.summary is None]
    if not others:
        return "no other compile in this session to compare it with"
    same = [c for c in others if c.kernel == comp.kernel and tree.process_of(c) is process]
    earlier = [c for c in same if c.order < comp.order]
    first = earlier[-1] if earlier else same[0] if same else None
    ordered = sorted(others, key=lambda c: (c is not first, abs(c.order - comp.order)))

    def lines_with(other: CompileNode) -> Callable[[], list[str]]:
        def made() -> list[str]:
            a = summarize(other, _process_words(tree, other.process))
            b = summarize(comp, _process_words(tree, comp.process))
            return pair_lines(compare_pair(a, b), ALL_PASSES)

        return made

    counterparts = [
        Counterpart(
            f"compile {other.id} {other.kernel or '-'}"
            + (" (the previous one)" if other is first and earlier else "")
            + (f" ({tree.process_label(tree.process_of(other))})" if tree.several else ""),
            lines_with(other),
        )
        for other in ordered
    ]
    return CompareScreen(f"compile {comp.id} {comp.kernel or '-'}", counterparts)


def launch_comparison(kernels: ProcessKernels, tree: PassTree, launch: Launch) -> CompareScreen | str:
    """The pane comparing ``launch`` with the previous launch of its kernel (else the nearest
    other launch that still holds its events); what to tell the user instead when there is
    nothing to compare."""
    if launch.evicted:
        return f"launch {launch.key[3]}'s events were let go (the bound on events held): nothing to compare"
    others = [other for other in kernels.newest_first() if other is not launch and not other.evicted]
    if not others:
        return "no other launch to compare it with"
    same = [other for other in others if other.kernel == launch.kernel and other.process is launch.process]
    earlier = [other for other in same if other.order < launch.order]
    first = earlier[0] if earlier else same[0] if same else None  # newest first: the previous one
    ordered = sorted(others, key=lambda other: (other is not first, abs(other.order - launch.order)))

    def lines_with(other: Launch) -> Callable[[], list[str]]:
        def made() -> list[str]:
            a = summarize_launch(other, _process_words(tree, other.process))
            b = summarize_launch(launch, _process_words(tree, launch.process))
            return launch_lines(compare_launch(a, b))

        return made

    counterparts = [
        Counterpart(
            f"launch {other.key[3]} {other.kernel}"
            + (" (the previous one)" if other is first and earlier else "")
            + (f" ({kernels.who(other)})" if kernels.who(other) else ""),
            lines_with(other),
        )
        for other in ordered
    ]
    return CompareScreen(f"launch {launch.key[3]} {launch.kernel}", counterparts)
