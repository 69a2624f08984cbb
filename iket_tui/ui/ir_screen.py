"""The IR of one pass, fetched from the live target on request: before it, after it, and the
diff between the two, highlighted, searched with ``/``, ``n`` and ``N`` as in ``less``, saved
to a file on ``w``; ``]`` and ``[`` go to the compile's next and previous pass, past the passes
known to have changed nothing (as MLIR's ``-mlir-print-ir-after-change``)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Static

from iket_tui.model.nodes import PassNode
from iket_tui.outputs import OutputError, write_file
from iket_tui.protocol import messages as m
from iket_tui.sources.base import SourceError
from iket_tui.sources.ir import view_of
from iket_tui.ui.footer import KeysFooter
from iket_tui.ui.ir_text import IRText
from iket_tui.ui.messages import AskTarget, ResponseArrived
from iket_tui.ui.search_bar import SearchBar

WAIT_S = 30.0


class IRScreen(Screen[None]):
    """Before, after or diff of one pass (``b``, ``a``, ``d``); a search (``/``) stays across them."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,i", "app.pop_screen", "Passes"),
        Binding("b", "view('before')", "Before"),
        Binding("a", "view('after')", "After"),
        Binding("d", "view('diff')", "Diff"),
        Binding("slash", "search", "Search"),
        Binding("n", "search_next", "Next match"),
        Binding("N", "search_previous", "Previous match", show=False),
        Binding("w", "save", "Save"),
        Binding("right_square_bracket", "step(1)", "Next pass"),
        Binding("left_square_bracket", "step(-1)", "Previous pass", show=False),
    ]

    DEFAULT_CSS = """
    IRScreen #ir-title { height: 1; background: $panel; text-style: bold; padding: 0 1; }
    IRScreen #ir-body { height: 1fr; }
    """

    def __init__(self, ask: AskTarget, node: PassNode, *, save_dir: Path | None = None) -> None:
        super().__init__()
        self.ask = ask
        self.node = node
        self.view = "diff"
        """The view asked for; ``shown`` is the one on screen (the diff takes a while to compute)."""
        self.shown: str | None = None
        self.answer: m.Message | None = None
        self.text = ""
        """The text on screen, as ``w`` saves it."""
        self.term = ""
        self.save_dir = save_dir or Path.cwd()
        self._asked: int | None = None  # the request whose answer this screen waits for
        self._texts: dict[str, str] = {}
        self.skipped = 0
        """Passes that changed nothing passed over by the last step to this pass."""

    @property
    def what(self) -> str:
        node = self.node
        return f"{node.name} (pass {node.seq} of compile {node.compile.id})"

    @property
    def body(self) -> IRText:
        return self.query_one("#ir-body", IRText)

    @property
    def search_bar(self) -> SearchBar:
        return self.query_one("#ir-search", SearchBar)

    def compose(self) -> ComposeResult:
        yield Static(id="ir-title", markup=False)
        yield IRText(id="ir-body")
        yield SearchBar(placeholder="text in the IR (case ignored unless it has a capital)", id="ir-search")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.search_bar.display = False
        self.body.focus()
        self._ask()

    def _ask(self) -> None:
        """Ask the target for the IR around :attr:`node`."""
        node = self.node
        try:
            self._asked = self.ask(m.WHAT_IR, timeout_s=WAIT_S, compile=node.compile.id, seq=node.seq, which="both")
        except SourceError as exc:
            self._title(f"no IR of {self.what}: {exc}")
            return
        self._title(f"asking the target for the IR around {self.what} ...")

    def title_text(self) -> str:
        return str(self.query_one("#ir-title", Static).render())

    # Views

    def action_view(self, view: str) -> None:
        self.view = view
        self._show()

    def action_save(self) -> None:
        if self.shown is None:
            self.notify("nothing to save yet", severity="warning")
            return
        suffix = "diff" if self.shown == "diff" else "py"
        path = self.save_dir / f"iket-ir-c{self.node.compile.id}-p{self.node.seq}-{self.shown}.{suffix}"
        try:
            write_file(path, self.text.encode("utf-8"))
        except OutputError as exc:
            self.notify(str(exc), severity="error")
            return
        except OSError as exc:
            self.notify(f"cannot write {path}: {exc.strerror or exc}", severity="error")
            return
        self.notify(f"saved {path}")

    @on(ResponseArrived)
    def _answered(self, message: ResponseArrived) -> None:
        answer = message.answer
        if answer.request_id != self._asked:
            return
        self._asked = None
        found, why = message.outcome(unsaid="not available")
        if found is None:
            self._title(f"no IR of {self.what}: {why}")
            return
        self.answer = found
        if not isinstance(found.get("after"), str):
            self.view = "before"  # a pass still running: only what it was given exists
        self._show()

    def _show(self) -> None:
        """Show the view asked for; a diff not computed yet is computed off the app's thread."""
        if self.answer is None:
            return
        text = self._texts.get(self.view)
        if text is None and self.view != "diff":
            text = self._texts[self.view] = view_of(self.answer, self.view)
        if text is None:
            self._title(f"computing the diff of {self.what} ...")
            self._compute_diff(self.answer)
            return
        self.text = text
        self.shown = self.view
        self.body.show(text, "diff" if self.view == "diff" else "python")
        if self.term:
            self.body.search(self.term)
        self._title_for_view()

    @work(thread=True, exclusive=True, exit_on_error=False, group="ir-diff", description="diff the IR of a pass")
    def _compute_diff(self, answer: m.Message) -> None:
        diff = view_of(answer, "diff")
        self.app.call_from_thread(self._diff_done, answer, diff)

    def _diff_done(self, answer: m.Message, diff: str) -> None:
        if answer is self.answer:
            self._texts["diff"] = diff
            if self.view == "diff":
                self._show()

    # Other passes

    def action_step(self, by: int) -> None:
        """Go to the compile's next (``by`` 1) or previous (-1) pass, past those known to have
        changed nothing: their IR after is their IR before."""
        passes = sorted(
            (found for context in self.node.compile.contexts.values() for found in context.passes.values()),
            key=lambda found: found.seq,
        )
        at = passes.index(self.node) if self.node in passes else -1
        skipped = 0
        index = at + by
        while 0 <= index < len(passes) and passes[index].changed is False:
            skipped += 1
            index += by
        if not 0 <= index < len(passes):
            later = "later" if by > 0 else "earlier"
            why = f"no {later} pass of compile {self.node.compile.id} changed the module" if skipped else ""
            self.notify(
                f"{why} ({_skipped(skipped)})" if skipped else f"no {later} pass in compile {self.node.compile.id}"
            )
            return
        self.node = passes[index]
        self.skipped = skipped
        self.answer = None
        self.shown = None
        self._texts = {}
        self.view = "diff"
        self._ask()

    # Search

    def action_search(self) -> None:
        self.search_bar.begin(self.term)

    def action_search_next(self) -> None:
        self.body.next_match()
        self._title_for_view()

    def action_search_previous(self) -> None:
        self.body.previous_match()
        self._title_for_view()

    @on(SearchBar.Closed)
    def _search_closed(self, message: SearchBar.Closed) -> None:
        """Enter searches (an empty term drops the search); Escape leaves it as it was."""
        message.stop()
        self.body.focus()
        if message.kept:
            self.term = message.term
            self.body.search(self.term)
            self._title_for_view()

    @on(SearchBar.Changed)
    def _search_typed(self, message: SearchBar.Changed) -> None:
        message.stop()

    def search_status(self) -> str:
        """``match i of k``, ``no match for X``, or nothing without a search."""
        matches, current = self.body.matches, self.body.current
        if matches is None or not self.term:
            return ""
        if current is None:
            return f"no match for {self.term}"
        return f"match {current + 1:,} of {len(matches):,}"

    # Title

    def _title_for_view(self) -> None:
        if self.shown is None:
            return
        found = self.search_status()
        self.search_bar.show_count(found.removeprefix("match ").split(" for ")[0])
        lines = f"{len(self.body.lines):,} lines"
        parts = (f"IR {self.shown} {self.what}", lines, found, _skipped(self.skipped) if self.skipped else "")
        self._title(" · ".join(part for part in parts if part))

    def _title(self, text: str) -> None:
        self.query_one("#ir-title", Static).update(text)


def _skipped(count: int) -> str:
    return f"{count:,} pass{'es' if count != 1 else ''} that changed nothing skipped"
