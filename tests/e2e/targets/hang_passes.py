"""Passes of a user's own that never return, for the tests of stuck compiles: one loops in
Python, one blocks in native code (libc's ``pause()``, until a signal arrives). Importing this
module only defines them, so that a reproducer may import it to rebuild a pass."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import tilelang.transform
from tilelang import tvm

_libc = ctypes.CDLL(None, use_errno=True)

SPIN = "hang_test.SpinForever"
PAUSE = "hang_test.PauseForever"
PLACE = "tl.InjectSoftwarePipeline"
"""The TileLang pass the hanging pass runs just before."""


@tvm.transform.module_pass(opt_level=0, name=SPIN)
def spin_forever(mod: Any, ctx: Any) -> Any:
    turns = 0
    while turns >= 0:  # a Python loop that never ends
        turns += 1
    return mod


@tvm.transform.module_pass(opt_level=0, name=PAUSE)
def pause_forever(mod: Any, ctx: Any) -> Any:
    _libc.pause()  # blocks in native code until a signal is handled
    return mod


HANGS = {"spin": spin_forever, "pause": pause_forever}


@contextmanager
def before_pipelining(hang: Any) -> Iterator[None]:
    """Run ``hang`` just before TileLang's software pipelining, in every compile meanwhile."""
    attribute = PLACE.removeprefix("tl.")
    original = getattr(tilelang.transform, attribute)

    def with_hang(*args: Any, **kwargs: Any) -> Any:
        return tvm.transform.Sequential([hang, original(*args, **kwargs)], opt_level=0, name="hang_test.Pipelining")

    setattr(tilelang.transform, attribute, with_hang)
    try:
        yield
    finally:
        setattr(tilelang.transform, attribute, original)
