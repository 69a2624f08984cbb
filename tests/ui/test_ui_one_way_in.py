"""Everything a screen or widget shows comes in through the app: none of them reads a source's
attributes, asks the app for one by name, or reads a file. Only ``ui/app.py`` touches the source,
and it reads files only on a worker thread."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

UI = Path(__file__).resolve().parents[2] / "iket_tui" / "ui"
READERS = frozenset({"open", "read_recording", "RecordingReader", "RecordingSource", "SocketSource"})
READ_METHODS = frozenset({"read_text", "read_bytes"})
SOURCE_MODULES = ("iket_tui.sources.socket", "iket_tui.sources.replay", "iket_tui.sources.reading")


def _widgets_and_screens() -> list[Path]:
    return sorted(path for path in UI.glob("*.py") if path.name not in ("app.py", "__init__.py"))


def _offences(path: Path) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        where = f"{path.name}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id == "getattr" and node.args:
                target = ast.unparse(node.args[0])
                if target != "self" or not isinstance(node.args[1], ast.Name):
                    found.append(f"{where}: getattr({target}, ...)")
            if isinstance(func, ast.Name) and func.id in READERS:
                found.append(f"{where}: {func.id}(...)")
            if isinstance(func, ast.Attribute) and func.attr in READ_METHODS:
                found.append(f"{where}: .{func.attr}(...)")
        if isinstance(node, ast.Attribute) and node.attr in ("source", "responses"):
            found.append(f"{where}: .{node.attr}")
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(SOURCE_MODULES):
            found.append(f"{where}: imports {node.module}")
    return sorted(found, key=lambda text: (int(text.split(":")[1]), text))


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
        "bad_screen.py:1: imports iket_tui.sources.reading",
        "bad_screen.py:4: getattr(self.app, ...)",
        "bad_screen.py:5: .responses",
        "bad_screen.py:5: .source",
        "bad_screen.py:6: .read_bytes(...)",
        "bad_screen.py:6: read_recording(...)",
    ]
