"""README's "Layout of the code" names every top-level module and package of iket_tui, and
nothing that is no longer there, so that a newcomer's map of the code stays true."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _layout_rows() -> set[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Layout of the code", 1)[1].split("\n## ", 1)[0]
    return {match.rstrip("/") for match in re.findall(r"^\| `iket_tui/([^`]+)` \|", section, flags=re.M)}


def _top_level() -> set[str]:
    package = ROOT / "iket_tui"
    modules = {path.name for path in package.glob("*.py") if path.name != "__init__.py"}
    packages = {path.name for path in package.iterdir() if (path / "__init__.py").exists()}
    return modules | packages


def test_the_layout_table_names_every_top_level_module_and_nothing_else() -> None:
    assert _layout_rows() == _top_level()
