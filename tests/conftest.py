"""Tests marked ``tilelang`` skip, with the reason, where the ``tilelang`` extra is not installed."""

from __future__ import annotations

import importlib.util

import pytest

HAS_TILELANG = importlib.util.find_spec("tilelang") is not None
"""Whether TileLang can be imported here; looked up without importing it (that takes seconds)."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if HAS_TILELANG:
        return
    skip = pytest.mark.skip(reason="needs TileLang: install the tilelang extra (pip install -e '.[tilelang,test]')")
    for item in items:
        if item.get_closest_marker("tilelang") is not None:
            item.add_marker(skip)
