"""The search bar: a term typed after ``/``, reported as it changes and when the user is done
(the pass tree finds passes by name as the user types; the IR view searches on Enter)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Input, Static


class SearchBar(Horizontal):
    """An input for a term and the match count; closing it with Enter keeps the term, with
    Escape does not (the pass tree then drops its search, the IR view keeps the one it had)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel search", show=False)]

    DEFAULT_CSS = """
    SearchBar {
        height: 1;
        background: $panel;
        & > #search-prompt { width: 2; padding-left: 1; color: $accent; text-style: bold; }
        & > #search-input { width: 1fr; height: 1; border: none; padding: 0 1; }
        & > #search-count { width: auto; min-width: 12; padding: 0 1; color: $text-muted; }
    }
    """

    def __init__(self, *, placeholder: str = "pass name", id: str | None = None) -> None:
        super().__init__(id=id)
        self.placeholder = placeholder

    @dataclass
    class Changed(Message):
        bar: SearchBar
        term: str

        @property
        def control(self) -> SearchBar:
            return self.bar

    @dataclass
    class Closed(Message):
        """The user is done searching: ``kept`` after Enter, not after Escape."""

        bar: SearchBar
        term: str
        kept: bool

        @property
        def control(self) -> SearchBar:
            return self.bar

    def compose(self) -> ComposeResult:
        yield Static("/", id="search-prompt", markup=False)
        yield Input(placeholder=self.placeholder, id="search-input")
        yield Static("", id="search-count", markup=False)

    @property
    def term(self) -> str:
        return self.query_one(Input).value

    def begin(self, term: str = "") -> None:
        """Show the bar with ``term`` in its field, focused: a search begins (again)."""
        self.display = True
        field = self.query_one(Input)
        field.value = term
        field.focus()

    def show_count(self, text: str) -> None:
        self.query_one("#search-count", Static).update(text)

    @on(Input.Changed)
    def _changed(self, event: Input.Changed) -> None:
        event.stop()
        self.post_message(self.Changed(self, event.value))

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.display = False
        self.post_message(self.Closed(self, event.value, kept=True))

    def action_cancel(self) -> None:
        self.display = False
        self.post_message(self.Closed(self, self.term, kept=False))
