"""The Pythons the package claims are the Pythons CI tests: every ``Programming Language :: Python
:: 3.N`` classifier has its lane in .ci/run (3.11 is the main venv's, the highest one
``just core-latest``'s, the others ``just core-python 3.N``), and requires-python admits no
minor version below the lowest one claimed."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def claimed() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    versions = [
        m.group(1)
        for c in project["classifiers"]
        if (m := re.fullmatch(r"Programming Language :: Python :: (3\.\d+)", c))
    ]
    return sorted(versions, key=lambda v: int(v.split(".")[1]))


def test_every_python_claimed_has_its_lane_in_ci() -> None:
    versions = claimed()
    assert versions[0] == "3.11", versions
    ci = (ROOT / ".ci" / "run").read_text()
    justfile = (ROOT / "Justfile").read_text()
    assert f'latest_python := "{versions[-1]}"' in justfile
    assert "just core-latest" in ci
    for version in versions[1:-1]:
        assert f"just core-python {version}\n" in ci, f"Python {version} is claimed but .ci/run does not test it"
    assert (
        re.search(r"^\.venv/bin/just core-python (?!(" + "|".join(map(re.escape, versions)) + r")\n)", ci, re.M) is None
    )


def test_requires_python_starts_at_the_lowest_claimed() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == f">={claimed()[0]}"
