"""Passes of a user's own that never return, for the tests of stuck compiles: one loops in
Python, one blocks in native code (libc's ``pause()``, until a signal arrives), one waits in an
installed library (filelock) for a lock that someone else holds (the file ``IKET_TEST_LOCK``).
Importing this module only defines them, so that a reproducer may import it to rebuild a pass."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import filelock
import tilelang.transform
from tilelang import tvm

_libc = ctypes.CDLL(None, use_errno=True)

SPIN = "hang_test.SpinForever"
PAUSE = "hang_test.PauseForever"
WAIT = "hang_test.WaitForLock"
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


@tvm.transform.module_pass(opt_level=0, name=WAIT)
def wait_for_lock(mod: Any, ctx: Any) -> Any:
    with filelock.FileLock(os.environ["IKET_TEST_LOCK"]):  # waits inside filelock while another holds it
        pass
    return mod


HANGS = {"spin": spin_forever, "pause": pause_forever, "lock": wait_for_lock}


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
