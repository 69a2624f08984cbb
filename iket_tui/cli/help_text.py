"""How ``--help`` lays out a command's description: wrapped to the terminal's width, whatever
width the source text was written at, with its examples kept exactly as written."""

from __future__ import annotations

import argparse
import re
import textwrap
from typing import Final

EXAMPLES: Final = "examples:"
"""How an epilog of example command lines starts; those lines are never rewrapped."""

_ITEM: Final = re.compile(r"^(  \S.*?\s{2,})(\S.*)$")
"""A line of a list: two spaces, a term, two or more spaces, then its text."""


class HelpText(argparse.HelpFormatter):
    """Paragraphs (separated by blank lines) rewrapped to the width argparse gives (the
    terminal's, from ``COLUMNS`` or the terminal itself); a list of terms (lines indented by two
    spaces, a term, then its text, continued by lines indented further) keeps its terms aligned
    and wraps its text under them; examples stay one command a line, as they are copied."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith(EXAMPLES):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return "\n\n".join(_paragraph(part, width, indent) for part in text.split("\n\n"))


def _paragraph(text: str, width: int, indent: str) -> str:
    """One paragraph: prose lines filled together, each list item filled under its term."""
    blocks: list[tuple[str, list[str]]] = []  # (the item's term and its spacing, or "" for prose; words)
    for line in text.splitlines():
        item = _ITEM.match(line)
        if item is not None:
            blocks.append((item.group(1), item.group(2).split()))
        elif line.startswith("  ") and blocks and blocks[-1][0]:
            blocks[-1][1].extend(line.split())  # the item's text goes on
        elif blocks and not blocks[-1][0]:
            blocks[-1][1].extend(line.split())
        else:
            blocks.append(("", line.split()))
    lines = []
    for term, words in blocks:
        hanging = indent + " " * len(term)
        first = indent + term if term else indent
        lines.append(
            textwrap.fill(
                " ".join(words),
                max(width, len(hanging) + 20),
                initial_indent=first,
                subsequent_indent=hanging,
                break_on_hyphens=False,
                break_long_words=False,
            )
        )
    return "\n".join(lines)
