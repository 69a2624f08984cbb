"""Matching two sides' items in order by a key: what ``diff`` pairs compiles and launches by."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

T = TypeVar("T")


def pair_in_order(
    a: Iterable[T], b: Iterable[T], key: Callable[[T], Hashable]
) -> tuple[list[tuple[T, T]], list[T], list[T]]:
    """The n-th item of a key in ``a`` paired with the n-th of that key in ``b``, in ``a``'s
    order; then ``a``'s items without a match, and ``b``'s (grouped by key, in ``b``'s order
    within a key)."""
    queues: dict[Hashable, list[T]] = defaultdict(list)
    for item in b:
        queues[key(item)].append(item)
    taken: dict[Hashable, int] = defaultdict(int)
    pairs: list[tuple[T, T]] = []
    only_a: list[T] = []
    for item in a:
        k = key(item)
        queue = queues.get(k, [])
        at = taken[k]
        if at < len(queue):
            taken[k] = at + 1
            pairs.append((item, queue[at]))
        else:
            only_a.append(item)
    only_b = [item for k, queue in queues.items() for item in queue[taken.get(k, 0) :]]
    return pairs, only_a, only_b
