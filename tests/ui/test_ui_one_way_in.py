"""Everything a screen or widget shows comes in through the app: none of them imports a source,
reads a source's attributes, asks the app for one by name, reads a file or starts a process.
Only ``ui/app.py`` touches the source, and it reads files only on a worker thread.

The check reads each module's syntax tree, so that no spelling of a bypass slips through: a
plain ``import``, a module imported from its package, a relative import, an attribute read from
``self.app`` whose name says source, ``vars()`` or ``__dict__`` instead, a file opened as a
method or through ``io``, ``numpy.fromfile``, or a process started by any module that starts one.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

UI = Path(__file__).resolve().parents[2] / "iket_tui" / "ui"
SOURCES = "iket_tui.sources"
ALLOWED: dict[str, frozenset[str] | None] = {
    # The source interface itself: the types a batch and an answer are made of, the request
    # names and one-line reasons. Data and protocols only; none of it reads anything.
    "iket_tui.sources.base": None,
    # How a stacks answer reads as text: a pure function of the answer that arrived.
    "iket_tui.sources.stacks": frozenset({"stack_lines", "INNERMOST_FIRST"}),
    # A recording's timeline as the app's worker read it (its marks and length): data only.
    "iket_tui.sources.timeline": frozenset({"Mark", "MarkKind", "RecordingTimeline"}),
    # How an IR answer reads as text (before, after, or the diff): a pure function of the answer.
    "iket_tui.sources.ir": frozenset({"view_of"}),
}
"""What of ``iket_tui.sources`` a screen or widget may import (``None``: any name), and why."""
READERS = frozenset(
    {
        "open",
        "fromfile",
        "memmap",
        "read_text",
        "read_bytes",
        "RecordingReader",
        "RecordingSource",
        "SocketSource",
        "SshSource",
        "ProcessStreams",
        "read_recording",
        "native_stacks",
        "import_module",
        "__import__",
    }
)
"""Calls that read a file, make a source, run py-spy or import a module by name."""
PROCESS_MODULES = frozenset({"subprocess", "multiprocessing", "pty", "asyncio.subprocess"})
PROCESS_CALLS = frozenset(
    {"system", "popen", "Popen", "fork", "forkpty", "posix_spawn", "posix_spawnp", "ProcessPoolExecutor"}
    | {
        "create_subprocess_exec",
        "create_subprocess_shell",
        "spawnl",
        "spawnlp",
        "spawnv",
        "spawnvp",
        "execv",
        "execvp",
        "execl",
        "execlp",
    }
)
"""Ways to start a process without importing a module that is only for that (``os``, ``asyncio``)."""


def _widgets_and_screens() -> list[Path]:
    return sorted(path for path in UI.rglob("*.py") if path.relative_to(UI).as_posix() not in ("app.py", "__init__.py"))


def _imported(node: ast.Import | ast.ImportFrom) -> Iterator[tuple[str, str | None]]:
    """Each (module, name) an import brings in: ``name`` is ``None`` for a plain ``import``.
    Relative imports are resolved as seen from ``iket_tui.ui``."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name, None
        return
    if node.level:
        package = ["iket_tui", "ui"][: max(0, 2 - node.level + 1)]
        module = ".".join([*package, *([node.module] if node.module else [])])
    else:
        module = node.module or ""
    for alias in node.names:
        yield module, alias.name


def _import_offence(module: str, name: str | None) -> str | None:
    """Why importing ``name`` from ``module`` (``None``: ``import module``) is a way around the app."""
    full = module if name is None else f"{module}.{name}"
    top = module.split(".")[0]
    if top in PROCESS_MODULES or module in PROCESS_MODULES or full in PROCESS_MODULES:
        return f"imports {full}"
    if not (full == SOURCES or full.startswith(SOURCES + ".") or module == SOURCES):
        return None
    if name is None:
        return f"imports {module}"  # a plain import reaches every module of the package by attribute
    allowed = ALLOWED.get(module, frozenset())
    if module in ALLOWED and (allowed is None or name in allowed):
        return None
    return f"imports {full}"


def _offences(path: Path) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        where = f"{path.name}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import | ast.ImportFrom):
            for module, name in _imported(node):
                offence = _import_offence(module, name)
                if offence is not None:
                    found.append(f"{where}: {offence}")
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id == "getattr" and node.args:
                target = ast.unparse(node.args[0])
                if target != "self" or not isinstance(node.args[1], ast.Name):
                    found.append(f"{where}: getattr({target}, ...)")
            if isinstance(func, ast.Name) and func.id == "vars":
                found.append(f"{where}: vars(...)")
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if name in READERS:
                found.append(f"{where}: {name}(...)")
            if isinstance(func, ast.Attribute) and func.attr in PROCESS_CALLS:
                found.append(f"{where}: {ast.unparse(func)}(...) starts a process")
        if isinstance(node, ast.Attribute):
            if node.attr in ("source", "responses", "__dict__"):
                found.append(f"{where}: .{node.attr}")
            elif "source" in node.attr.lower() and ast.unparse(node.value) == "self.app":
                found.append(f"{where}: self.app.{node.attr}")
    return sorted(set(found), key=lambda text: (int(text.split(":")[1]), text))


@pytest.mark.parametrize("path", _widgets_and_screens(), ids=lambda path: path.name)
def test_no_screen_or_widget_reads_a_source_or_a_file(path: Path) -> None:
    assert _offences(path) == []


def test_the_check_finds_what_it_looks_for(tmp_path: Path) -> None:
    bad = tmp_path / "bad_screen.py"
    bad.write_text(
        "from iket_tui.sources.reading import read_recording\n"
        "class S:\n"
        "    def poll(self):\n"
        "        tree = getattr(self.app, 'pass_tree', None)\n"
        "        found = self.source.responses.pop(1)\n"
        "        return read_recording(self.path), self.path.read_bytes()\n",
        encoding="utf-8",
    )
    assert _offences(bad) == [
        "bad_screen.py:1: imports iket_tui.sources.reading.read_recording",
        "bad_screen.py:4: getattr(self.app, ...)",
        "bad_screen.py:5: .responses",
        "bad_screen.py:5: .source",
        "bad_screen.py:6: read_bytes(...)",
        "bad_screen.py:6: read_recording(...)",
    ]


BYPASSES = {
    "import iket_tui.sources.socket": "imports iket_tui.sources.socket",
    "import iket_tui.sources.base": "imports iket_tui.sources.base",
    "from iket_tui.sources import replay": "imports iket_tui.sources.replay",
    "from iket_tui import sources": "imports iket_tui.sources",
    "from ..sources import recorder": "imports iket_tui.sources.recorder",
    "from ..sources.socket import SocketSource": "imports iket_tui.sources.socket.SocketSource",
    "from iket_tui.sources.stacks import native_stacks": "imports iket_tui.sources.stacks.native_stacks",
    "from iket_tui.sources.py_spy import py_spy_path": "imports iket_tui.sources.py_spy.py_spy_path",
    "import iket_tui.sources.recorder as recorder": "imports iket_tui.sources.recorder",
    "replay.RecordingSource(p)": "RecordingSource(...)",
    "sources.socket.SocketSource(p)": "SocketSource(...)",
    "RecordingReader(p)": "RecordingReader(...)",
    "path.open('rb')": "open(...)",
    "open(path)": "open(...)",
    "io.open(path)": "open(...)",
    "numpy.fromfile(path)": "fromfile(...)",
    "np.memmap(path)": "memmap(...)",
    "native_stacks(pid)": "native_stacks(...)",
    "importlib.import_module('iket_tui.sources.socket')": "import_module(...)",
    "__import__('iket_tui.sources.socket')": "__import__(...)",
    "self.app._source": "self.app._source",
    "self.app.source_of_truth": "self.app.source_of_truth",
    "vars(self.app)['source']": "vars(...)",
    "self.app.__dict__['source']": ".__dict__",
    "import subprocess": "imports subprocess",
    "from subprocess import run": "imports subprocess.run",
    "import multiprocessing": "imports multiprocessing",
    "from asyncio import subprocess": "imports asyncio.subprocess",
    "os.system('py-spy dump')": "os.system(...) starts a process",
    "os.popen('py-spy dump')": "os.popen(...) starts a process",
    "asyncio.create_subprocess_exec('py-spy')": "asyncio.create_subprocess_exec(...) starts a process",
    "os.execvp('py-spy', [])": "os.execvp(...) starts a process",
}


@pytest.mark.parametrize(("line", "said"), BYPASSES.items(), ids=list(BYPASSES))
def test_the_check_finds_each_way_around_the_app(tmp_path: Path, line: str, said: str) -> None:
    bad = tmp_path / "bad_screen.py"
    bad.write_text(f"class S:\n    def poll(self, p, path, pid):\n        {line}\n", encoding="utf-8")
    assert _offences(bad) == [f"bad_screen.py:3: {said}"]


ALLOWED_LINES = (
    "from iket_tui.sources.base import NATIVE_STACKS, SourceError",
    "from iket_tui.sources.stacks import stack_lines",
    "from iket_tui.sources.ir import view_of",
    "from ..sources.base import Answer",
    "self.app.request('stacks', timeout_s=1.0)",
    "self.search_bar.begin('term')",
)


@pytest.mark.parametrize("line", ALLOWED_LINES)
def test_the_check_lets_the_allowed_through(tmp_path: Path, line: str) -> None:
    fine = tmp_path / "fine_screen.py"
    fine.write_text(f"class S:\n    def poll(self):\n        {line}\n", encoding="utf-8")
    assert _offences(fine) == []
