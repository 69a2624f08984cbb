"""Text broken into lines for a narrow terminal without parting a number from its unit.

Textual wraps a line at any space, so ``24 events`` or ``4.00 s`` can end up with the number at
the end of one line and its unit at the start of the next; lines broken here first never do.
"""

from __future__ import annotations

import re

from rich.cells import cell_len


def wrapped(text: str, width: int) -> str:
    """``text`` broken into lines of at most ``width`` cells at spaces, never between a number
    and the word after it (``24 events``, ``4.00 s``), so that a number keeps its unit."""
    lines: list[str] = []
    for paragraph in text.split("\n"):
        words: list[str] = []
        for token in paragraph.split(" "):
            if words and re.search(r"\d$", words[-1]) and token[:1].isalpha():
                words[-1] += " " + token
            else:
                words.append(token)
        line = ""
        for word in words:
            if line and cell_len(f"{line} {word}") > width:
                lines.append(line)
                line = word
            else:
                line = f"{line} {word}" if line else word
        lines.append(line)
    return "\n".join(lines)
