"""The passes of a pass context kept packed, ten integers a pass in one array, until something
asks for them as nodes.

Keeping one Python object per pass is what a long replay cannot afford: measured on a recording
of 1,000,000 pass events, a model that only keeps a :class:`~iket_tui.model.nodes.PassNode` per
pass (nothing else) costs 3.2 to 3.4 times reading and decoding the file, every new object
taking fresh memory and the collector rescanning them, while appending the same fields to an
array costs 1.4 to 1.5 times. So a context takes its passes packed while they start and end
in order, the way an instrumented pass manager reports them; the first time anything reads
its passes (:attr:`ContextNode.passes`, :attr:`ContextNode.roots`: a row drawn, a search, an
export, a running pass looked at), they are made into nodes once, exactly as the tree would
have made them, and the context keeps nodes from then on. Whatever the packed form does not
hold (a pass that ended out of order or never ended, a parent that is not the innermost open
pass, a repeated sequence number, a value past 64 bits) makes the nodes first and is applied
to them as before.
"""

from __future__ import annotations

import struct
from array import array
from typing import TYPE_CHECKING, Final

from iket_tui.model.nodes import DONE, NO_CHILDREN, PassNode

if TYPE_CHECKING:
    from iket_tui.model.nodes import ContextNode

FIELDS: Final = 10
"""Integers a pass takes: the offsets below."""
SEQ, DEPTH, PARENT, NAME, PHASE, START, END, DURATION, ORDER, CHILD_NS = range(FIELDS)
PACK: Final = struct.Struct(f"={FIELDS}q").pack
"""One pass's fields as the bytes the array holds (raises :class:`struct.error` past 64 bits):
appending them is a third of what extending the array by ten integers costs."""

NONE: Final = -(1 << 63)
"""An end or duration not known yet, a phase not given, a pass at the top of its context."""
LIMIT: Final = 1 << 62
"""Values packed are within +-LIMIT, so that sums of durations cannot leave 64 bits unnoticed."""
LOW: Final = -LIMIT


class Packing:
    """What the packed contexts of one tree share: pass names and phases, each kept once and
    packed as its number; the contexts still packed; and the nodes made from packed passes
    since the tree last took them into its list of every pass."""

    __slots__ = ("contexts", "made", "numbers", "strings")

    def __init__(self) -> None:
        self.numbers: dict[str, int] = {}
        self.strings: list[str] = []
        self.contexts: dict[ContextNode, None] = {}
        """Contexts whose passes are packed, in the order they were made."""
        self.made: list[PassNode] = []
        """Nodes unpacked and not yet in :attr:`PassTree.passes`."""

    def number(self, text: str) -> int:
        number = self.numbers.get(text)
        if number is None:
            number = self.numbers[text] = len(self.strings)
            self.strings.append(text)
        return number

    def unpack_all(self) -> None:
        """Make every packed context's passes into nodes."""
        for ctx in list(self.contexts):
            ctx.unpack()


class PackedPasses:
    """The passes of one context as :data:`FIELDS` integers each, in the order they started,
    with the positions of those still running, innermost last."""

    __slots__ = ("data", "last_seq", "open", "packing")

    def __init__(self, packing: Packing) -> None:
        self.data = array("q")
        self.packing = packing
        self.open: list[int] = []
        """Positions of the passes started and not ended, outermost first."""
        self.last_seq: int | None = None
        """The highest sequence number packed: one not above it may repeat a pass (a catch-up
        overlapping what was seen), which the nodes decide."""

    def __len__(self) -> int:
        return len(self.data) // FIELDS

    def unpack(self, ctx: ContextNode) -> tuple[dict[int, PassNode], list[PassNode]]:
        """The passes as the tree would have made them: by sequence number, and the top-level
        ones; the nodes are also handed to the tree's list of every pass."""
        data = self.data
        strings = self.packing.strings
        passes: dict[int, PassNode] = {}
        roots: list[PassNode] = []
        made: list[PassNode] = []
        for at in range(0, len(data), FIELDS):
            seq, depth, parent, name, phase, start, end, duration, order, child_ns = data[at : at + FIELDS]
            up = None if parent == NONE else made[parent]
            node = PassNode(strings[name], seq, depth, None if phase == NONE else strings[phase], start, up, ctx, order)
            if end != NONE:
                node.end_ns = end
                node.duration_ns = duration
                node.status = DONE
            node.child_ns = child_ns
            made.append(node)
            passes[seq] = node
            if up is None:
                roots.append(node)
            elif up.children is NO_CHILDREN:
                up.children = [node]
            else:
                up.children.append(node)
        self.packing.contexts.pop(ctx, None)
        self.packing.made += made
        return passes, roots
