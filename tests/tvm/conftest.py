"""The plain Apache TVM tests run real TVM compiles for this CPU, in their own environment
(``just test-tvm``: apache-tvm and TileLang cannot share one). Tests marked ``tvm`` skip, with the
reason, where plain TVM is not importable: where it is missing, and where TileLang is installed,
whose bundled ``tvm`` is not Apache TVM's. Nothing here imports TVM."""

from __future__ import annotations

import importlib.util
import os
import tempfile
from collections.abc import Iterator

import pytest

HAS_TILELANG = importlib.util.find_spec("tilelang") is not None
_TVM = importlib.util.find_spec("tvm")
HAS_PLAIN_TVM = not HAS_TILELANG and _TVM is not None and _TVM.origin is not None
"""Whether ``import tvm`` gives Apache TVM here; looked up without importing it. A spec without an
origin is a namespace package: this very directory, ``tests/tvm``, on pytest's path."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if HAS_PLAIN_TVM:
        return
    why = (
        "TileLang is installed here, whose bundled tvm is not Apache TVM"
        if HAS_TILELANG
        else "Apache TVM is not installed"
    )
    skip = pytest.mark.skip(reason=f"needs plain Apache TVM: {why}; `just test-tvm` runs these in .venv-tvm")
    for item in items:
        if item.get_closest_marker("tvm") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def private_runtime_dir() -> Iterator[str]:
    """Agents of these tests put their sockets here (a short path: socket paths are limited to 107 bytes)."""
    with tempfile.TemporaryDirectory(prefix="ikv") as directory, pytest.MonkeyPatch.context() as patch:
        os.chmod(directory, 0o700)
        patch.setenv("XDG_RUNTIME_DIR", directory)
        yield directory
