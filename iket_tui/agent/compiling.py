"""Which compile the current thread is generating code for.

TileLang calls the CUDA post-processing callback from inside a compile's codegen step, with no
reference to the compile; this lets what the callback reports (a traced module's event table)
name the compile that produced it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

_local = threading.local()


def current() -> int | None:
    """The compile whose codegen runs on this thread now, if any."""
    compile_id: int | None = getattr(_local, "compile", None)
    return compile_id


@contextmanager
def generating(compile_id: int | None) -> Iterator[None]:
    """Mark this thread as running the codegen of ``compile_id`` inside the block (nestable)."""
    outer = current()
    _local.compile = compile_id
    try:
        yield
    finally:
        _local.compile = outer
