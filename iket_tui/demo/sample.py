"""The recording that comes with iket-tui: what the demo shows where there is no GPU to run its
kernels (``examples/h200-demo-waiting.msgpack``, see ``examples/README.md``): a real run of the
demo program on an H200, with one more launch of its traced GEMM, written by the CPU producer,
in which a block waits four seconds before it is released (``scripts/demo_sample.py``)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

NAME = "h200-demo-waiting.msgpack"

TRACED_EVENTS = ("tile", "first_a", "k_step", "load", "mma")
"""The IKET events of the demo's ``traced_gemm``, in the order TileLang numbers them: the
events the bundled recording holds, known without importing TileLang."""


def sample_recording() -> Path | None:
    """The bundled recording: in the installed package, or in the source tree; None if neither."""
    packaged = resources.files("iket_tui.demo") / NAME
    if packaged.is_file():
        return Path(str(packaged))
    source_tree = Path(__file__).resolve().parents[2] / "examples" / NAME
    return source_tree if source_tree.is_file() else None
