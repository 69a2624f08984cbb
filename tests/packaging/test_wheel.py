"""The wheel a user installs from PyPI: one version, the licence, and the files the package
reads at run time (the CUDA runtime, the sample recording, the agent's .pth)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from iket_tui import __version__

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(out)],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("iket_tui-*.whl")
    return zipfile.ZipFile(built)


def test_the_wheel_carries_its_licence_and_the_files_read_at_run_time(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    dist_info = f"iket_tui-{__version__}.dist-info"
    assert f"{dist_info}/licenses/LICENSE" in names
    assert wheel.read(f"{dist_info}/licenses/LICENSE").lstrip().startswith(b"Apache License")
    for packaged in (
        "iket_tui/ring/device_runtime.cuh",
        "iket_tui/ring/drain_pass.c",
        "iket_tui/demo/h200-demo-waiting.msgpack",
        "iket_tui_agent.pth",
    ):
        assert packaged in names


def test_its_metadata_has_one_version_and_what_pypi_shows(wheel: zipfile.ZipFile) -> None:
    metadata = Parser().parsestr(wheel.read(f"iket_tui-{__version__}.dist-info/METADATA").decode())
    assert metadata["Version"] == __version__
    assert metadata["License-Expression"] == "Apache-2.0"
    assert "Topic :: Software Development :: Compilers" in metadata.get_all("Classifier")
    assert "tilelang" in metadata["Keywords"].split(",")
    extras = set(metadata.get_all("Provides-Extra"))
    assert {"tilelang", "tvm", "cuda", "native", "test", "dev"} <= extras
    native = [req for req in metadata.get_all("Requires-Dist") if req.endswith("extra == 'native'")]
    assert native and native[0].startswith("py-spy")


def test_the_gpu_extras_install_the_cupy_of_cuda_12_or_13_and_the_agent_names_them(wheel: zipfile.ZipFile) -> None:
    from iket_tui.agent.cuda_driver import CUPY_EXTRAS

    metadata = Parser().parsestr(wheel.read(f"iket_tui-{__version__}.dist-info/METADATA").decode())
    requires = metadata.get_all("Requires-Dist")

    def of(extra: str) -> list[str]:
        return [req.split(";")[0].strip() for req in requires if req.endswith(f"extra == '{extra}'")]

    assert [req.split(">")[0] for req in of("cuda12")] == ["cupy-cuda12x"]
    assert [req.split(">")[0] for req in of("cuda13")] == ["cupy-cuda13x"]
    assert of("cuda") == of("cuda12")  # the name it had before CUDA 13, kept
    assert set(CUPY_EXTRAS.values()) <= set(metadata.get_all("Provides-Extra"))
