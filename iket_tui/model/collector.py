"""Garbage-collector settings for a process that holds a large pass tree.

A long replay or session keeps millions of nodes alive for good. With CPython's default
thresholds the collector rescans them again and again while new messages are decoded (a
third of the time of a 1,000,000-event replay); collecting the young generation less often
keeps that to a few percent without turning collection off.
"""

from __future__ import annotations

import gc
from typing import Final

LARGE_TREE_THRESHOLDS: Final = (50_000, 20, 20)


def tune_for_large_trees() -> None:
    """Use collector thresholds suited to a process holding a large, long-lived tree."""
    gc.set_threshold(*LARGE_TREE_THRESHOLDS)
