"""The footer of every screen: its keys, as many as the width holds, each whole.

Textual's footer lays its keys out in one row and lets the last one run off the edge (``] Fa``
at 120 columns); this one shows the keys in their order up to the first that does not fit, and
drops that one and those after it. The help screen (``?``) lists them all.
"""

from __future__ import annotations

from rich.cells import cell_len
from textual import events
from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

KEY_PADDING = 3
"""Cells a key takes besides its key and description: one before the key, one after it, one
after the description (Textual's footer style, not compact)."""


def key_width(key_display: str, description: str) -> int:
    """The cells one key of the footer takes."""
    return cell_len(key_display) + cell_len(description) + KEY_PADDING


class KeysFooter(Footer):
    """A footer that drops whole keys from its end where the width is short."""

    def __init__(self) -> None:
        super().__init__()
        self._laid_out_for = 0

    def compose(self) -> ComposeResult:
        width = self.size.width
        self._laid_out_for = width
        used = 0
        for widget in super().compose():
            if width and isinstance(widget, FooterKey):
                used += key_width(widget.key_display, widget.description)
                if used > width:
                    return
            yield widget

    def on_resize(self, event: events.Resize) -> None:
        if event.size.width != self._laid_out_for:
            self.call_after_refresh(self.recompose)
