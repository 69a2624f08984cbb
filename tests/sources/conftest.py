"""Fixtures for the event sources: a private runtime directory for agent sockets."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def runtime_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A short private ``XDG_RUNTIME_DIR`` (socket paths are limited to 107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="ik"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(path))
    monkeypatch.delenv("IKET_TUI", raising=False)
    yield path
    shutil.rmtree(path, ignore_errors=True)
