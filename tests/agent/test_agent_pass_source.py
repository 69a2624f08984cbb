"""Which code of the user's own a stuck pass is credited to (``pass_source`` of a ``stuck``
capture): the pass function that the compiler called, even while it waits inside an installed
library or a helper of another file, never the library; nothing for the compiler's own passes.

Real frames of real files: a stand-in for the compiler's Python (the directory the capture
takes for TVM's and TileLang's), a library under a ``site-packages`` directory, and the user's
passes, calling each other as a compile does. The same with TileLang itself is in
tests/e2e/test_hangs.py."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

import pytest

from iket_tui.agent import stuck

COMPILER = """
import sys

CAPTURE = None


def run_pass(function, *args):
    return function(*args)  # TVM's FFI callback calling a Python pass


def own_pass():
    return capture()


def capture():
    return CAPTURE(sys._getframe())
"""

LIBRARY = """
import sys

CAPTURE = None


def acquire(then):
    return then()  # a lock that waits, calling back once it has it


def wrapped(function):
    def wrapper(*args):
        return function(*args)
    return wrapper


def capture():
    return CAPTURE(sys._getframe())
"""

PASSES = """
import fake_compiler
import fakelock


def waits_for_lock():
    return fakelock.acquire(lambda: helper())  # the pass, blocked in the library


def helper():
    return fakelock.capture()


def calls_the_compiler():
    return fake_compiler.capture()  # the pass, inside a call back into the compiler's Python


def plain():
    return fakelock.capture()
"""


def _module(path: Path, name: str, text: str) -> ModuleType:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    compiler_dir = tmp_path / "compiler"
    monkeypatch.setattr(stuck, "_compiler_dirs", lambda: (str(compiler_dir),))
    for name in ("fake_compiler", "fakelock", "user_passes"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    compiler = _module(compiler_dir / "fake_compiler.py", "fake_compiler", COMPILER)
    library = _module(tmp_path / "lib" / "python3" / "site-packages" / "fakelock.py", "fakelock", LIBRARY)
    passes = _module(tmp_path / "work" / "user_passes.py", "user_passes", PASSES)
    compiler.CAPTURE = library.CAPTURE = stuck.pass_source
    return {
        "compiler": compiler,
        "library": library,
        "passes": passes,
        "file": str(tmp_path / "work" / "user_passes.py"),
    }


def _line(code: dict[str, Any], text: str) -> int:
    lines = Path(code["file"]).read_text().splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line)


def test_a_pass_waiting_inside_a_library_is_credited_to_the_pass(code: dict[str, Any]) -> None:
    found = code["compiler"].run_pass(code["passes"].waits_for_lock)
    assert found == {
        "file": code["file"],
        "line": _line(code, "return fakelock.acquire("),
        "function": "waits_for_lock",
        "module": "user_passes",
        "qualname": "waits_for_lock",
        "made_by": None,
    }


def test_a_library_wrapping_the_pass_is_not_the_users(code: dict[str, Any]) -> None:
    found = code["compiler"].run_pass(code["library"].wrapped(code["passes"].plain))
    assert found is not None and (found["function"], found["file"]) == ("plain", code["file"])


def test_a_pass_calling_back_into_the_compiler_is_still_the_pass(code: dict[str, Any]) -> None:
    found = code["compiler"].run_pass(code["passes"].calls_the_compiler)
    assert found is not None and (found["function"], found["line"]) == (
        "calls_the_compiler",
        _line(code, "return fake_compiler.capture()"),
    )


def test_the_compilers_own_pass_is_nobodys(code: dict[str, Any]) -> None:
    """The frames around the compile (this test's, the program's) are not a pass: no compiler
    frame called them."""
    assert code["compiler"].run_pass(code["compiler"].own_pass) is None


def test_no_frame_is_nobodys() -> None:
    frame: FrameType | None = None
    assert stuck.pass_source(frame) is None
