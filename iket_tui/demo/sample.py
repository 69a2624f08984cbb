"""The recording of a real GPU run that comes with iket-tui: what the demo shows of kernels where
there is no GPU to run them (``examples/h200-demo.msgpack``, see ``examples/README.md``)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

NAME = "h200-demo.msgpack"


def sample_recording() -> Path | None:
    """The bundled recording: in the installed package, or in the source tree; None if neither."""
    packaged = resources.files("iket_tui.demo") / NAME
    if packaged.is_file():
        return Path(str(packaged))
    source_tree = Path(__file__).resolve().parents[2] / "examples" / NAME
    return source_tree if source_tree.is_file() else None
