"""The help screen: every key, grouped by what it is for."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    (
        "Tree",
        (
            ("up/down  k/j", "move the cursor"),
            ("pgup/pgdn  home/end", "move by a page, to the first or last row"),
            ("left/right  h/l", "collapse or go to the parent / expand or go to the first child"),
            ("enter  space", "expand or collapse (space pauses a replay)"),
            ("e  +", "expand all (+ is faster in a replay)"),
            ("c  -", "collapse all (- is slower in a replay)"),
            ("click", "select a row and expand or collapse it"),
        ),
    ),
    (
        "Watching",
        (
            ("f", "follow the newest compile and its running pass"),
            ("/", "search pass names as you type; enter keeps it, escape drops it"),
            ("n  N", "next / previous match"),
            ("p", "pause the display (data keeps arriving) or the replay"),
            ("d", "show or hide the detail pane"),
            ("K", "kernels: launches of traced kernels and their flame view (escape comes back)"),
            ("S", "stacks of every thread of the target; r refreshes, n adds native frames (py-spy)"),
            (
                "i",
                "the IR before and after the pass under the cursor, and the diff (b, a, d; / searches, n N; w saves;"
                " ] [ the next / previous pass, past those that changed nothing)",
            ),
            ("R", "a reproducer of the running pass under the cursor (a stuck one), written to iket-repro-cN-pS/"),
            ("A", "abort the compile of the running pass under the cursor, after y: it fails, the program goes on"),
            ("D", "compare the compile under the cursor with the previous compile of its kernel (c: another)"),
        ),
    ),
    (
        "Kernels (K)",
        (
            ("up/down  left/right", "move the cursor: a warp's row, a column of time"),
            ("<  >  shift+up/down", "the newer / older launch, whatever has focus"),
            ("shift+left/right", "pan"),
            ("i  o  0", "zoom in / out around the cursor, fit where the blocks ran (again: the whole launch)"),
            ("b  B  g", "next / previous block, go to block N"),
            ("m", "group rows by SM (which blocks ran where) or by block and warp"),
            ("a", "per event name: count, durations, payload range"),
            ("enter", "details of the block, warp or SM under the cursor, in a pane"),
            ("/  n", "draw only events whose name matches; next such range"),
            ("f", "follow the newest finished launch (or one with a warp quiet past the threshold)"),
            ("D", "compare the launch with the previous launch of its kernel (c: another)"),
            ("tab  click", "move between the launches and the flame view; select"),
        ),
    ),
    (
        "Timing (T)",
        (
            ("n c t s m x % f", "sort by pass, count, total, self, mean, max, share, failed; again: reverse"),
            ("o  r", "sort by the next column / reverse the order"),
            ("click a header", "sort by that column"),
            ("tab  up/down", "move between the pass names and the compiles; pick the compile below"),
            ("escape  T", "back to the pass tree"),
        ),
    ),
    (
        "Replay",
        (
            ("space  p", "pause or resume playback"),
            ("s  .", "step one message while paused"),
            ("]  +", "faster"),
            ("[  -", "slower"),
            (
                "click the timeline",
                "jump to that time (the bar under the header; a jump shows what a replay reaches there)",
            ),
            ("x  X", "jump to the next / previous failure"),
            ("w  W", "jump to the next / previous stuck pass"),
            ("u  U", "jump to the next / previous quiet warp"),
            ("o  O", "jump to the next / previous process event (connected, ended, bye)"),
            ("g  G", "jump to the next / previous compile"),
            ("backspace", "back to where the last jump left (a jump pauses the replay: space plays on)"),
        ),
    ),
    ("", (("?", "this help"), ("q", "quit"))),
)


def help_table() -> Table:
    """The keys as two columns, each description wrapped within its own column, so that on a
    narrow terminal a long one goes on under itself and not under the keys."""
    table = Table.grid(padding=(0, 2))
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")
    for index, (title, keys) in enumerate(KEYS):
        if index:
            table.add_row("", "")
        if title:
            table.add_row(Text(title), "")
        for key, what in keys:
            table.add_row(Text(f"  {key}"), Text(what))
    return table


class HelpScreen(ModalScreen[None]):
    """A modal list of keys; any of escape, ? or q closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "dismiss_help", "Close help"),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body"):
            yield Static(help_table())

    def action_dismiss_help(self) -> None:
        self.dismiss(None)
