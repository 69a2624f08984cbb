"""The pass tree on screen: a Line API view over :class:`VisibleRows`.

Only the rows on screen are painted; each painted row is cached under a key made of what
it shows (its node's version, expansion, cursor, clock for running nodes, width), so a
batch of events repaints the few rows it changed and scrolling a long replay costs no more
than scrolling a short one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widget import Widget

from iket_tui.model.nodes import RUNNING, CompileNode, Node, PassNode, ProcessNode
from iket_tui.model.pass_tree import PassTree
from iket_tui.model.visible_rows import Row, VisibleRows, parent_of
from iket_tui.ui.row_painter import Columns, RowState, RowStyles, paint_row


class ColumnHeader(Widget):
    """The column titles above the tree, laid out like its rows."""

    DEFAULT_CSS = """
    ColumnHeader {
        height: 1;
        color: $text-muted;
        text-style: bold;
    }
    """

    def __init__(self, view: PassTreeView, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.view = view

    def render(self) -> str:
        width = self.view.scrollable_content_region.width or self.size.width
        return Columns(width).header()


class PassTreeView(ScrollView, can_focus=True):
    """Process, compiles, pass contexts and passes, with a cursor, collapse and expand."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "cursor_up", "Up", show=False),
        Binding("down,j", "cursor_down", "Down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home", "cursor_home", "First", show=False),
        Binding("end", "cursor_end", "Last", show=False),
        Binding("left,h", "collapse_or_parent", "Collapse", show=False),
        Binding("right,l", "expand_or_child", "Expand", show=False),
        Binding("enter,space", "toggle_node", "Toggle"),
        Binding("e,plus", "expand_all", "Expand all", show=False),
        Binding("c,minus", "collapse_all", "Collapse all", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {f"pass-tree--{name}" for name in RowStyles.names()}

    DEFAULT_CSS = """
    PassTreeView {
        overflow-x: hidden;
        overflow-y: scroll;
        & > .pass-tree--cursor { background: $block-cursor-blurred-background; }
        &:focus > .pass-tree--cursor { background: $block-cursor-background; text-style: bold; }
        & > .pass-tree--attention { background: $error-muted; }
        & > .pass-tree--arrow { color: $text-muted; }
        & > .pass-tree--dim { color: $text-muted; }
        & > .pass-tree--duration { }
        & > .pass-tree--match { background: $warning-muted; text-style: bold underline; }
        & > .pass-tree--process { text-style: bold; }
        & > .pass-tree--compile { text-style: bold; }
        & > .pass-tree--context { text-style: italic; }
        & > .pass-tree--running { color: $warning; }
        & > .pass-tree--done { color: $success; }
        & > .pass-tree--failed { color: $error; text-style: bold; }
        & > .pass-tree--incomplete { color: $error; }
        & > .pass-tree--mismatch { color: $accent; text-style: bold; }
        & > .pass-tree--stuck { color: $error; text-style: bold; }
        & > .pass-tree--unchanged { text-style: dim; }
    }
    """

    @dataclass
    class CursorMoved(Message):
        """The cursor is on another node; ``by_user`` when a key or click moved it."""

        view: PassTreeView
        node: Node
        by_user: bool

        @property
        def control(self) -> PassTreeView:
            return self.view

    def __init__(self, tree: PassTree, rows: VisibleRows, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.pass_tree = tree
        self.rows = rows
        self.cursor: Node = tree.process
        self.now_ns = 0
        self.search = ""
        self._cache: LRUCache[tuple[Any, ...], Strip] = LRUCache(1024)
        self._styles: RowStyles | None = None
        self._rows_version = -1
        self._painted: dict[int, tuple[Any, ...]] = {}

    # Public operations

    def show_tree(self, tree: PassTree, rows: VisibleRows) -> None:
        """Show another tree, from its process row (a replay that jumped back built its model anew)."""
        self.pass_tree = tree
        self.rows = rows
        self.cursor = tree.process
        self._cache.clear()
        self._painted.clear()
        self._rows_version = -1
        self.sync()
        self.refresh()

    @property
    def cursor_line(self) -> int:
        line = self.rows.index_of(self.cursor)
        return 0 if line is None else line

    def sync(self) -> None:
        """Catch up with the tree and the expansion: resize if rows came or went, and repaint
        the rows on screen whose content changed."""
        before = self.cursor_line
        self.rows.refresh()
        if self.rows.version != self._rows_version:
            self._rows_version = self.rows.version
            self.cursor = self.rows.nearest_shown(self.cursor)
            self.virtual_size = Size(self._width, len(self.rows))
            after = self.cursor_line
            top = self.scroll_offset.y
            if after != before and top <= before < top + self._page:
                self.scroll_to(y=top + after - before, animate=False, immediate=True)
            self._painted.clear()
            self.refresh()
            return
        top = self.scroll_offset.y
        for y, key in self._visible_keys():
            if self._painted.get(y) != key:
                self.refresh_line(top + y)

    def select(self, node: Node, *, by_user: bool = False, center: bool = False) -> None:
        """Put the cursor on ``node`` (or the nearest shown ancestor) and scroll to it."""
        node = self.rows.nearest_shown(node)
        previous = self.cursor_line
        moved = node is not self.cursor
        self.cursor = node
        line = self.cursor_line
        self.refresh_line(previous)
        self.refresh_line(line)
        self._scroll_to_line(line, center=center)
        if moved or by_user:
            self.post_message(self.CursorMoved(self, node, by_user))

    def set_search(self, term: str) -> None:
        if term != self.search:
            self.search = term
            self.refresh()

    def set_now(self, now_ns: int) -> None:
        self.now_ns = now_ns

    # Rendering

    @property
    def _width(self) -> int:
        return self.scrollable_content_region.width

    @property
    def _page(self) -> int:
        return max(1, self.scrollable_content_region.height)

    def _row_styles(self) -> RowStyles:
        if self._styles is None:
            resolved: dict[str, Style] = {}
            for name in RowStyles.names():
                partial = name not in ("base", "cursor")
                resolved[name] = self.get_component_rich_style(f"pass-tree--{name}", partial=partial)
            resolved["base"] = self.rich_style
            self._styles = RowStyles(**resolved)
        return self._styles

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles = None
        self._cache.clear()
        self._painted.clear()

    def _on_resize(self, event: events.Resize) -> None:
        self._cache.grow(max(1024, 4 * event.size.height))
        self.virtual_size = Size(self._width, len(self.rows))
        for header in self.app.query(ColumnHeader):
            header.refresh()

    def _row_key(self, index: int, row: Row) -> tuple[Any, ...]:
        node = row.node
        if isinstance(node, ProcessNode):
            version: tuple[int, ...] = (self.pass_tree.version,)
            ticking = True
        else:
            comp = node if isinstance(node, CompileNode) else node.compile
            version = (comp.version, comp.shape)
            ticking = node.status is RUNNING
        cursor = node is self.cursor
        return (
            row,
            version,
            self.rows.is_expanded(node) if row.expandable else False,
            cursor,
            cursor and self.has_focus,
            self.now_ns if ticking else 0,
            self.search if isinstance(node, PassNode) and self.search.lower() in node.name.lower() else "",
            self._width,
        )

    def _visible_keys(self) -> list[tuple[int, tuple[Any, ...]]]:
        top = self.scroll_offset.y
        keys = []
        for y in range(self._page):
            row = self.rows.row(top + y)
            if row is None:
                break
            keys.append((y, self._row_key(top + y, row)))
        return keys

    def render_line(self, y: int) -> Strip:
        index = self.scroll_offset.y + y
        width = self.size.width
        row = self.rows.row(index)
        if row is None:
            self._painted.pop(y, None)
            return Strip.blank(width, self.rich_style)
        key = self._row_key(index, row)
        self._painted[y] = key
        strip = self._cache.get(key)
        if strip is None:
            state = RowState(
                expanded=key[2],
                cursor=key[3],
                now_ns=self.now_ns,
                search=key[6],
            )
            strip = paint_row(self.pass_tree, row, state, Columns(self._width), self._row_styles())
            self._cache[key] = strip
        return strip.crop_extend(0, width, self.rich_style)

    def on_focus(self) -> None:
        self.refresh_line(self.cursor_line)

    def on_blur(self) -> None:
        self.refresh_line(self.cursor_line)

    # Cursor and scrolling

    def _scroll_to_line(self, line: int, *, center: bool = False) -> None:
        self.scroll_to_region(
            Region(0, line, max(1, self._width), 1),
            animate=False,
            center=center,
            force=True,
            immediate=True,
        )

    def _move_to_line(self, line: int) -> None:
        line = max(0, min(line, len(self.rows) - 1))
        row = self.rows.row(line)
        if row is not None:
            self.select(row.node, by_user=True)

    def action_cursor_up(self) -> None:
        self._move_to_line(self.cursor_line - 1)

    def action_cursor_down(self) -> None:
        self._move_to_line(self.cursor_line + 1)

    def action_page_up(self) -> None:
        self._move_to_line(self.cursor_line - self._page)

    def action_page_down(self) -> None:
        self._move_to_line(self.cursor_line + self._page)

    def action_cursor_home(self) -> None:
        self._move_to_line(0)

    def action_cursor_end(self) -> None:
        self._move_to_line(len(self.rows) - 1)

    # Expansion

    def _expandable(self, node: Node) -> bool:
        row = self.rows.row(self.cursor_line)
        return row is not None and row.node is node and row.expandable

    def action_toggle_node(self) -> None:
        node = self.cursor
        if self._expandable(node):
            self.rows.toggle(node)
            self.sync()
        self.post_message(self.CursorMoved(self, node, True))

    def action_collapse_or_parent(self) -> None:
        node = self.cursor
        if self._expandable(node) and self.rows.is_expanded(node):
            self.rows.set_expanded(node, False)
            self.sync()
            self.post_message(self.CursorMoved(self, node, True))
            return
        parent = parent_of(node, self.pass_tree)
        if parent is not None:
            self.select(parent, by_user=True)

    def action_expand_or_child(self) -> None:
        node = self.cursor
        if not self._expandable(node):
            return
        if not self.rows.is_expanded(node):
            self.rows.set_expanded(node, True)
            self.sync()
            self.post_message(self.CursorMoved(self, node, True))
            return
        self._move_to_line(self.cursor_line + 1)

    def action_expand_all(self) -> None:
        self.rows.expand_all()
        self.sync()
        self.select(self.cursor, by_user=True)

    def action_collapse_all(self) -> None:
        self.rows.collapse_all()
        self.sync()
        self.select(self.cursor, by_user=True)

    async def _on_click(self, event: events.Click) -> None:
        line = self.scroll_offset.y + event.y
        row = self.rows.row(line)
        if row is None:
            return
        self.select(row.node, by_user=True)
        if row.expandable:
            self.rows.toggle(row.node)
            self.sync()
