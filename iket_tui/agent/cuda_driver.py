"""What this machine's NVIDIA driver says about its GPUs, asked without CuPy: so that a process
with no kernel ring is told the step that would give it one (a GPU and its driver, or the CuPy
build that matches the driver's CUDA version), never to install something that would not help."""

from __future__ import annotations

import ctypes
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

DRIVER_LIBRARY: Final = "libcuda.so.1"
"""The CUDA driver's library, which the NVIDIA driver installs (not the CUDA toolkit)."""

_GPU_DEVICE: Final = re.compile(r"nvidia\d+")
"""The device file of one GPU (``/dev/nvidia0``), beside ``nvidiactl`` and ``nvidia-uvm``."""

CUPY_EXTRAS: Final = {12: "cuda12", 13: "cuda13"}
"""The iket-tui extra that installs the CuPy build of each CUDA major version."""


@dataclass(frozen=True)
class DriverState:
    """The GPUs the driver sees (0 without a driver) and the CUDA version it runs, as
    ``(major, minor)`` (``None`` without a driver); ``problem`` says why no GPU is seen."""

    devices: int
    cuda: tuple[int, int] | None
    problem: str | None = None


def driver_state(library: str | None = None, devices: Path | None = None) -> DriverState:
    """Ask the CUDA driver (``library``, by default :data:`DRIVER_LIBRARY`, or what
    ``IKET_TUI_CUDA_DRIVER`` names) which CUDA version it runs, and count the GPUs it serves
    (the ``nvidiaN`` device files under ``devices``, by default ``/dev``, or what
    ``IKET_TUI_NVIDIA_DEVICES`` names). The driver is never initialised (``cuInit``): a process
    that initialised CUDA before forking leaves its children unable to use it. Never raises: a
    missing driver or a failing call is said in ``problem``."""
    name = library or os.environ.get("IKET_TUI_CUDA_DRIVER") or DRIVER_LIBRARY
    try:
        cuda = ctypes.CDLL(name)
    except OSError:
        return DriverState(0, None, "no GPU here (no NVIDIA driver)")
    version = ctypes.c_int(0)
    if cuda.cuDriverGetVersion(ctypes.byref(version)) != 0:
        return DriverState(0, None, "no GPU here (the NVIDIA driver does not answer)")
    found = (version.value // 1000, version.value % 1000 // 10)
    directory = devices or Path(os.environ.get("IKET_TUI_NVIDIA_DEVICES") or "/dev")
    try:
        count = sum(1 for entry in directory.iterdir() if _GPU_DEVICE.fullmatch(entry.name))
    except OSError:
        count = 0
    if count < 1:
        return DriverState(0, found, "no GPU here (the NVIDIA driver sees none)")
    return DriverState(count, found)


def without_cupy(state: DriverState) -> str:
    """Why there is no ring where CuPy cannot be imported, with the step that would help here:
    a machine without a GPU is told so (CuPy would not help); one with a GPU is told which
    extra installs the CuPy of its driver's CUDA version."""
    if state.devices < 1 or state.cuda is None:
        return state.problem or "no GPU here"
    major, minor = state.cuda
    gpus = f"{state.devices} GPU{'' if state.devices == 1 else 's'}, CUDA {major}.{minor}"
    extra = CUPY_EXTRAS.get(major)
    if extra is None:
        return f"no CuPy: install the CuPy build for CUDA {major} ({gpus})"
    return f"no CuPy: pip install 'iket-tui[{extra}]' ({gpus})"
