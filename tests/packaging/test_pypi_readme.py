"""The description PyPI shows: README.md as built into the wheel's metadata, with nothing that
only resolves beside the repository (pictures and links by relative path), since PyPI has no
repository beside it and the project names no repository URL yet."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from iket_tui import __version__

ROOT = Path(__file__).resolve().parents[2]
RELATIVE_LINK = re.compile(r"!?\[[^\]]*\]\((?!https?://)[^)]*\)")
"""A Markdown picture or link whose target is not an absolute web address."""


@pytest.fixture(scope="module")
def description(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(out)],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("iket_tui-*.whl")
    metadata = Parser().parsestr(zipfile.ZipFile(built).read(f"iket_tui-{__version__}.dist-info/METADATA").decode())
    return metadata["Description-Content-Type"], metadata.get_payload()


def test_pypi_shows_the_readme_without_pictures_or_links_by_relative_path(description: tuple[str, str]) -> None:
    content_type, text = description
    readme = (ROOT / "README.md").read_text()
    assert content_type == "text/markdown"
    assert RELATIVE_LINK.search(readme), "README.md has no relative picture or link left: this test checks nothing"
    assert RELATIVE_LINK.findall(text) == []
    assert "<img" not in text
    install = re.search(r"```sh\n(.*?)\n```", readme, re.DOTALL)
    assert install is not None and install.group(1) in text  # the README's own text, commands first
    assert text.startswith("# iket-tui\n")


def test_a_file_it_names_instead_of_linking_is_named_and_said_to_be_in_the_source_distribution(
    description: tuple[str, str],
) -> None:
    _, text = description
    linked = re.findall(r"(?<!!)\[[^\]]*\]\(((?!https?://|#)[^)]*)\)", (ROOT / "README.md").read_text())
    assert linked
    for path in linked:
        assert f"`{path}`" in text, path
    assert text.rstrip().endswith("are in each release's source distribution.")
