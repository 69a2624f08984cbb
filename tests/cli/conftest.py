"""Fixtures for command-line tests: a private runtime directory for agent sockets."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def runtime_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """A short private ``XDG_RUNTIME_DIR`` (socket paths are limited to 107 bytes), and a
    private ``TMPDIR`` for the output logs of programs that ``iket-tui run`` starts."""
    path = Path(tempfile.mkdtemp(prefix="ik"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.delenv("IKET_TUI", raising=False)
    yield path
    shutil.rmtree(path, ignore_errors=True)
