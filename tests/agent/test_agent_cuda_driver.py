"""Why a process has no kernel ring names the step that would help on its machine: no GPU is
said as such (installing CuPy would not help), and a GPU without CuPy is told the extra that
matches its driver's CUDA version.

This machine has no GPU: the driver's library is mocked by a small C library, built here, that
answers as a driver of a given CUDA version would (and aborts if the agent initialises it, which
would keep forked children from using CUDA), and its GPUs by device files in a directory.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from iket_tui.agent.cuda_driver import driver_state
from iket_tui.agent.kernels import RingUnavailable, open_device_rings
from iket_tui.ring.layout import RingGeometry

FAKE_DRIVER = """
#include <stdlib.h>
int cuDriverGetVersion(int *version) { *version = VERSION; return 0; }
int cuInit(unsigned flags) { abort(); }
int cuDeviceGetCount(int *count) { abort(); }
"""


def _driver(tmp_path: Path, *, version: int, devices: int) -> Path:
    """A library that answers as an NVIDIA driver of CUDA ``version``, and ``devices`` GPUs'
    device files beside ``nvidiactl`` and ``nvidia-uvm`` in ``tmp_path/dev``."""
    if shutil.which("cc") is None:
        pytest.skip("no C compiler to build the mocked driver")
    source = tmp_path / "cuda.c"
    source.write_text(FAKE_DRIVER)
    library = tmp_path / f"libcuda-{version}.so"
    subprocess.run(["cc", "-shared", "-fPIC", f"-DVERSION={version}", "-o", str(library), str(source)], check=True)
    dev = tmp_path / "dev"
    dev.mkdir(exist_ok=True)
    for name in ("nvidiactl", "nvidia-uvm", *(f"nvidia{index}" for index in range(devices))):
        (dev / name).touch()
    return library


def _reason(monkeypatch: pytest.MonkeyPatch, driver: Path) -> str:
    monkeypatch.setenv("IKET_TUI_NVIDIA_DEVICES", str(driver.parent / "dev"))
    monkeypatch.setenv("IKET_TUI_CUDA_DRIVER", str(driver))
    with pytest.raises(RingUnavailable) as caught:
        open_device_rings(RingGeometry(256, 512))
    return str(caught.value)


@pytest.fixture(autouse=True)
def _no_cupy() -> None:
    try:
        import cupy  # noqa: F401
    except ImportError:
        return
    pytest.skip("CuPy is installed here: these are the reasons given without it")


def test_a_machine_without_a_driver_is_told_it_has_no_gpu_not_to_install_cupy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    reason = _reason(monkeypatch, tmp_path / "libcuda.so.1")  # not there, as on this machine
    assert reason == "no GPU here (no NVIDIA driver)"
    assert "CuPy" not in reason and "pip" not in reason


@pytest.mark.parametrize(("version", "extra", "said"), [(13000, "cuda13", "CUDA 13.0"), (12080, "cuda12", "CUDA 12.8")])
def test_a_gpu_without_cupy_is_told_the_extra_of_its_cuda_version(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, version: int, extra: str, said: str
) -> None:
    reason = _reason(monkeypatch, _driver(tmp_path, version=version, devices=8))
    assert reason == f"no CuPy: pip install 'iket-tui[{extra}]' (8 GPUs, {said})"


def test_a_cuda_version_without_an_extra_names_the_cupy_build_it_needs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    reason = _reason(monkeypatch, _driver(tmp_path, version=11080, devices=1))
    assert reason == "no CuPy: install the CuPy build for CUDA 11 (1 GPU, CUDA 11.8)"


def test_a_driver_without_gpus_says_there_is_no_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    driver = _driver(tmp_path, version=13000, devices=0)
    assert _reason(monkeypatch, driver) == "no GPU here (the NVIDIA driver sees none)"
    assert driver_state(str(driver), tmp_path / "dev").cuda == (13, 0)
