"""The search bar: find passes by name, incrementally, as the user types."""

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
    """An input for a pass name and the match count; Enter keeps the search, Escape drops it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel search", show=False)]

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
        yield Input(placeholder="pass name", id="search-input")
        yield Static("", id="search-count", markup=False)

    @property
    def term(self) -> str:
        return self.query_one(Input).value

    def open(self, term: str = "") -> None:
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
