"""The text of an IR view on screen: TVMScript or a unified diff of it, through the Line API.

Only the lines on screen are highlighted and painted, each once, so a module of tens of
thousands of lines opens, scrolls and searches as fast as a short one. Each line is
highlighted on its own (TVMScript has no construct spanning lines that changes its colours);
a diff line gets the colour of its change under the highlighted code. The occurrences of a
search are marked, the current one more strongly, and the view scrolls to it.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pygments.lexers.python import PythonLexer  # type: ignore[import-untyped]
from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style as RichStyle
from rich.text import Span, Text
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Size
from textual.highlight import HighlightTheme
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.style import Style

from iket_tui.model.text_search import TextMatches

Kind = Literal["python", "diff"]

_DIFF_CLASSES = {"+": "inserted", "-": "deleted", "@": "hunk"}


class IRText(ScrollView, can_focus=True):
    """Lines of IR with line numbers (TVMScript) or change colours (a diff), and search marks."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "scroll_down", "Down", show=False),
        Binding("k", "scroll_up", "Up", show=False),
        Binding("g", "scroll_home", "Top", show=False),
        Binding("G", "scroll_end", "Bottom", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "ir-text--line-number",
        "ir-text--inserted",
        "ir-text--deleted",
        "ir-text--hunk",
        "ir-text--match",
        "ir-text--current-match",
    }

    DEFAULT_CSS = """
    IRText {
        background: $surface;
        & > .ir-text--line-number { color: $text-muted; }
        & > .ir-text--inserted { background: $success 15%; }
        & > .ir-text--deleted { background: $error 15%; }
        & > .ir-text--hunk { color: $text-accent; background: $accent 10%; text-style: bold; }
        & > .ir-text--match { background: $warning-muted; text-style: underline; }
        & > .ir-text--current-match { background: $warning; color: $text; text-style: bold underline; }
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.lines: list[str] = []
        self.kind: Kind = "python"
        self.matches: TextMatches | None = None
        self.current: int | None = None
        self._text_version = 0
        self._search_version = 0
        self._gutter = 0
        self._lexer = PythonLexer(stripnl=False, ensurenl=False)
        self._cache: LRUCache[tuple[int, ...], tuple[Strip, RichStyle]] = LRUCache(1024)
        self._token_styles: dict[Any, RichStyle | None] = {}
        self._styles: dict[str, RichStyle] = {}

    # Public operations

    def show(self, text: str, kind: Kind) -> None:
        """Show ``text``; the scroll position stays where it was (clamped to the new text)."""
        self.lines = text.expandtabs(8).splitlines() if "\t" in text else text.splitlines()
        self.kind = kind
        self._text_version += 1
        self._gutter = len(f"{len(self.lines):,}") + 2 if kind == "python" else 0
        width = max(map(len if text.isascii() else cell_len, self.lines), default=0)
        self.virtual_size = Size(self._gutter + width, len(self.lines))
        self.matches = None
        self.current = None
        self.refresh()

    def search(self, term: str) -> None:
        """Mark the occurrences of ``term`` (none when empty) and make current the first one
        from the top of the view on, wrapping; scroll to it."""
        self.matches = TextMatches(self.lines, term) if term else None
        self._search_version += 1
        self.current = None
        self.refresh()
        if self.matches is not None:
            self._go(self.matches.first_from(self.scroll_offset.y))

    def next_match(self) -> None:
        if self.matches is not None and self.current is not None:
            self._go(self.matches.after(self.current))

    def previous_match(self) -> None:
        if self.matches is not None and self.current is not None:
            self._go(self.matches.before(self.current))

    def line_text(self, y: int) -> str:
        """What row ``y`` of the view shows, as plain text."""
        return self.render_line(y).text

    # Scrolling to a match

    def _go(self, index: int | None) -> None:
        previous = self.current
        self.current = index
        if index is None or self.matches is None:
            return
        if previous is not None:
            self.refresh_line(self.matches.line_of(previous))
        line = self.matches.line_of(index)
        start, end = self.matches.span_of(index)
        region = self.scrollable_content_region
        height, width = max(1, region.height), max(1, region.width - self._gutter)
        x, y = self.scroll_offset
        if not y <= line < y + height:
            y = max(0, line - height // 2)
        if not (x <= start and end <= x + width):
            x = max(0, start - width // 2)
        self.scroll_to(x=x, y=y, animate=False, immediate=True)
        self.refresh_line(line)

    # Rendering

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        if index >= len(self.lines):
            return Strip.blank(width, self.rich_style)
        line, fill = self._line_strip(index)
        if self._gutter:
            number = Segment(f"{index + 1:>{self._gutter - 2},}  ", self._style("line-number"))
            body = line.crop_extend(scroll_x, scroll_x + max(0, width - self._gutter), fill)
            return Strip([number, *body], width).apply_offsets(scroll_x, index)
        return line.crop_extend(scroll_x, scroll_x + width, fill).apply_offsets(scroll_x, index)

    def _line_strip(self, index: int) -> tuple[Strip, RichStyle]:
        """Line ``index`` highlighted and marked, uncropped, and the style of the space after
        it; cached while its look stays."""
        marks = self.matches.on_line(index) if self.matches is not None else range(0)
        current = self.current if self.current is not None and self.current in marks else -1
        key = (self._text_version, index, self._search_version if marks else -1, current)
        cached = self._cache.get(key)
        if cached is None:
            text = self._highlighted(self.lines[index])
            text.stylize_before(text.style)  # rich leaves the base style out of a line without spans
            if self.matches is not None:
                for match in marks:
                    start, end = self.matches.span_of(match)
                    text.stylize(self._style("current-match" if match == current else "match"), start, end)
            fill = text.style if isinstance(text.style, RichStyle) else self.rich_style
            cached = self._cache[key] = (Strip(text.render(self.app.console), text.cell_len), fill)
        return cached

    def _highlighted(self, line: str) -> Text:
        base = self.rich_style
        if self.kind == "diff":
            change = _DIFF_CLASSES.get(line[:1])
            if line.startswith(("+++", "---")) or change == "hunk":
                return Text(line, style=self._style("hunk", whole=True), no_wrap=True, end="")
            if change is not None:
                base = self._style(change, whole=True)
            code = self._code(line[1:], base)
            code.pad_left(1, line[:1])
            return code
        return self._code(line, base)

    def _code(self, code: str, base: RichStyle) -> Text:
        spans = []
        start = 0
        for token, value in self._lexer.get_tokens(code):
            end = min(start + len(value), len(code))
            style = self._token_style(token)
            if style is not None and end > start:
                spans.append(Span(start, end, style))
            start = end
        return Text(code, style=base, spans=spans, no_wrap=True, end="")

    def _token_style(self, token: Any) -> RichStyle | None:
        if token in self._token_styles:
            return self._token_styles[token]
        styles = HighlightTheme.STYLES
        kind: Any = token
        while kind is not None and kind not in styles:
            kind = kind.parent
        found = None
        if kind is not None and styles[kind]:
            found = (self.get_visual_style() + Style.parse(styles[kind])).rich_style
            found = RichStyle(color=found.color, bold=found.bold, italic=found.italic, underline=found.underline)
        self._token_styles[token] = found
        return found

    def _style(self, name: str, *, whole: bool = False) -> RichStyle:
        """A component style: only what it sets (to lay over a line), or ``whole``: over the
        widget's own (to be a line's base)."""
        key = f"{name}/whole" if whole else name
        style = self._styles.get(key)
        if style is None:
            style = self._styles[key] = self.get_component_rich_style(f"ir-text--{name}", partial=not whole)
        return style

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()
        self._token_styles.clear()
        self._styles.clear()

    def _on_resize(self, event: events.Resize) -> None:
        self._cache.grow(max(1024, 4 * event.size.height))
