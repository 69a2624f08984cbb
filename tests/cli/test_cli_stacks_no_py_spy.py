"""``stacks --native`` where py-spy is not installed: one line saying how to install it, and a
non-zero exit code, before anything else is printed."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import FakeAgent, assert_one_line_error

ROOT = Path(__file__).resolve().parents[2]


def test_native_stacks_without_py_spy_say_how_to_install_it(tmp_path: Path) -> None:
    """iket-tui run by a Python with no py-spy beside it and none on the PATH: the interpreter
    this environment is built on, reached through a link in a directory of its own."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python3"
    python.symlink_to(Path(getattr(sys, "_base_executable", sys.executable)).resolve())
    path = f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin"
    if shutil.which("py-spy", path=path) is not None:
        pytest.skip("py-spy is installed system-wide here")
    env = {**os.environ, "PATH": path, "PYTHONPATH": os.pathsep.join([str(ROOT), *site.getsitepackages()])}
    env.pop("VIRTUAL_ENV", None)
    with FakeAgent("endless") as agent:
        done = subprocess.run(
            [str(python), "-m", "iket_tui", "stacks", str(agent.pid), "--native"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
    assert done.stdout == ""
    assert_one_line_error(done, "iket-tui: native stacks need py-spy: pip install 'iket-tui[native]'")
