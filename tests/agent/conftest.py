"""Agent tests run real target processes; each session gets its own private runtime directory."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session", autouse=True)
def private_runtime_dir() -> Iterator[str]:
    """Agents of these tests put their sockets here, away from the user's real ones."""
    with tempfile.TemporaryDirectory(prefix="ikt") as directory, pytest.MonkeyPatch.context() as patch:
        os.chmod(directory, 0o700)
        patch.setenv("XDG_RUNTIME_DIR", directory)
        yield directory
